"""The cost model: a request handler costs O(request size x log of the state), never the
request times the state.

Each case runs a handler twice, with the request and the state both of size n and then 2n,
and counts the work done: every Python line executed, every call (Python or C), and every
name comparison. A handler within the model does about twice the work at 2n; one that weighs
each item of the request against all of the state does four times as much. Nothing here reads
a clock, so a busy machine cannot change the verdict.

Names are ``Name`` objects, a str whose equality is Python code: a C-level scan of a list of
names (``list.count``, ``x in some_list``) then runs one counted comparison per element, and
shows up as the quadratic work it is.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, Callable

import pytest

from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType
from protocol.generated.messages import ApiKey
from protocol.generated.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialUpsertion)
from protocol.generated.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest, UserName)
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.generated.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.generated.metadata.user_scram_credential_record import UserScramCredentialRecord
from server.context import Principal, RequestContext
from server.controller.result import ControllerResult
from server.security.acl import AuthorizerConfig
from server.security.requests import RequestAuthorizer
from tests.server.test_state_machine import Harness

N = 150  # the smaller size; the larger is 2N
# Linear work doubles; n log n work at these sizes stays well under 2.6; quadratic work is 4x.
BOUND = 2.6


class Name(str):
    """A str whose comparisons are counted (they run as Python calls)."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)  # type: ignore[no-any-return]


def work(fn: Callable[[], Any]) -> int:
    """Lines, calls and comparisons executed by ``fn()``."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return tracer

    def profiler(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "c_call":
            count += 1

    sys.settrace(tracer)
    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(None)
        sys.settrace(None)
    return count


def growth(case: Callable[[int], Callable[[], Any]]) -> float:
    """Work at 2N over work at N; ``case(n)`` builds state and request of size n and returns
    the handler call to measure."""
    return work(case(2 * N)) / work(case(N))


def harness_with_topics(n: int) -> Harness:
    h = Harness()
    h.active_broker(1)
    created = h.command("create_topics", CreateTopicsRequest(topics=[
        CreatableTopic(name=f"existing-{i}", num_partitions=1, replication_factor=1) for i in range(n)]), 7)
    assert all(t.error_code == 0 for t in created.response.topics)
    return h


def with_acls(h: Harness, n: int) -> Harness:
    """n ACLs for other users, on other topics, literal and prefixed."""
    h.qc.apply(ControllerResult([(AccessControlEntryRecord(
        id=i.to_bytes(16, "big"), resource_type=AclResourceType.TOPIC, resource_name=f"other-{i}",
        pattern_type=PatternType.PREFIXED if i % 2 else PatternType.LITERAL, principal=f"User:u{i}", host="*",
        operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW), 0) for i in range(n)]))
    return h


def with_scram_users(h: Harness, n: int) -> Harness:
    h.qc.apply(ControllerResult([(UserScramCredentialRecord(
        name=f"user-{i}", mechanism=1, salt=b"s", stored_key=b"k" * 32, server_key=b"k" * 32, iterations=4096), 0)
        for i in range(n)]))
    return h


def describe_scram(n: int) -> Callable[[], Any]:
    h = with_scram_users(Harness(), n)
    request = DescribeUserScramCredentialsRequest(users=[UserName(name=Name(f"user-{i * 2}")) for i in range(n)])
    return lambda: h.qc.describe_user_scram_credentials(request, 0)


def alter_scram(n: int) -> Callable[[], Any]:
    h = with_scram_users(Harness(), n)
    request = AlterUserScramCredentialsRequest(deletions=[], upsertions=[ScramCredentialUpsertion(
        name=Name(f"new-{i}"), mechanism=1, iterations=4096, salt=b"salt", salted_password=b"p" * 32)
        for i in range(n)])
    return lambda: h.qc.alter_user_scram_credentials(request, 0)


def authorize_metadata(n: int) -> Callable[[], Any]:
    h = with_acls(harness_with_topics(n), n)
    authorizer = RequestAuthorizer(AuthorizerConfig(), lambda kind, name: h.qc.acls.index.applying_to(kind, name),
                                   lambda topic_id: None)
    context = RequestContext(Principal("User", "nobody"), "10.0.0.1")
    request = MetadataRequest(topics=[MetadataRequestTopic(name=Name(f"existing-{i}")) for i in range(n)])
    return lambda: authorizer.narrow(ApiKey.METADATA, request, 12, context)


def create_acls(n: int) -> Callable[[], Any]:
    h = with_acls(Harness(), n)
    request = CreateAclsRequest(creations=[AclCreation(
        resource_type=AclResourceType.TOPIC, resource_name=Name(f"new-{i}"), resource_pattern_type=PatternType.LITERAL,
        principal="User:alice", host="*", operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)
        for i in range(n)])
    return lambda: h.qc.create_acls(request, 3)


def describe_acls_of_one_topic(n: int) -> Callable[[], Any]:
    # The request is one filter whatever n is: its cost may grow with the state only by a log.
    h = with_acls(Harness(), n * n // N)
    request = DescribeAclsRequest(
        resource_type_filter=AclResourceType.TOPIC, resource_name_filter="other-2", pattern_type_filter=PatternType.MATCH,
        principal_filter=None, host_filter=None, operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)
    return lambda: h.qc.describe_acls(request, 3)


def create_topics(n: int) -> Callable[[], Any]:
    h = harness_with_topics(n)
    request = CreateTopicsRequest(topics=[
        CreatableTopic(name=Name(f"new-{i}"), num_partitions=1, replication_factor=1) for i in range(n)])
    return lambda: h.qc.create_topics(request, 7)


def metadata(n: int) -> Callable[[], Any]:
    h = harness_with_topics(n)
    request = MetadataRequest(topics=[MetadataRequestTopic(name=Name(f"existing-{i}")) for i in range(n)])
    return lambda: h.qc.metadata(request, 12)


def alter_topic_configs(n: int) -> Callable[[], Any]:
    h = harness_with_topics(n)
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=2, resource_name=Name(f"existing-{i}"), configs=[AlterableConfig(
            name="retention.ms", config_operation=0, value="1000")]) for i in range(n)])
    return lambda: h.qc.incremental_alter_configs(request, 1)


CASES = [describe_scram, alter_scram, authorize_metadata, create_acls, describe_acls_of_one_topic, create_topics,
         metadata, alter_topic_configs]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_handler_work_grows_with_the_request_not_request_times_state(case: Callable[[int], Callable[[], Any]]) -> None:
    assert growth(case) < BOUND


def test_the_measure_tells_quadratic_work_apart() -> None:
    """The meter itself: a scan per item (the shape of the old SCRAM duplicate check) is
    caught, a lookup per item is not."""
    def scanning(n: int) -> Callable[[], Any]:
        names = [Name(f"user-{i}") for i in range(n)]
        return lambda: [names.count(name) for name in names]

    def hashing(n: int) -> Callable[[], Any]:
        names = [Name(f"user-{i}") for i in range(n)]
        return lambda: [name in set(names) for name in names[:1]] + [name in {} for name in names]

    assert growth(scanning) > 3.5
    assert growth(hashing) < BOUND
