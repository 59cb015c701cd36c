"""The cost model: a request handler costs at most O(request size x log of the state).

Each request-heavy handler is served in-process (the router's authorization, then the
controller) at size n and at 2n, with a state that grows with n too, and its cost is counted,
never timed: every Python call and line the interpreter runs (``sys.settrace``) and every call
of a C function (``sys.setprofile``'s ``c_call``). A scan done inside one C call, such as
``list.count`` or ``name in some_list``, is a single ``c_call`` however long the list; so the
names in the requests are ``CountedName``s, whose comparisons are Python calls and show up.

Linear work doubles from n to 2n, and a log factor adds a little: the ratio stays near 2.
Quadratic work (each item compared with every other item, or every check walking all ACLs)
quadruples, and with n large enough that it outweighs the linear part, the ratio goes well
above 2.6: for cost a*n + b*n^2, the ratio (2a + 4bn) / (a + bn) passes 2.6 once b*n > 0.43*a.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, Callable

import pytest

from protocol.constants import AclOperation, AclPermissionType, AclResourceType, AlterConfigOpType, PatternType
from protocol.error_codes import Error
from protocol.generated.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialUpsertion)
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.generated.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest, TopicRequest
from protocol.generated.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest, UserName)
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.message import Message, api_key_of
from server.apis import Router
from server.context import Principal, RequestContext
from server.controller.clock import ManualClock
from server.controller.configs import CLUSTER_DEFAULT
from server.controller.features import MV_LATEST
from server.controller.quorum_controller import QuorumController
from server.controller.result import ControllerResult
from server.security.acl import AuthorizerConfig
from server.security.settings import SecurityConfig
from tests.support.harness import registration

N = 150
LIMIT = 2.6
TOPIC_CONFIG, BROKER_CONFIG = 2, 4
ADMIN = RequestContext(Principal("User", "admin"), "127.0.0.1")
ALICE = RequestContext(Principal("User", "alice"), "127.0.0.1")  # no super user: every item is judged


class CountedName(str):
    """A name whose equality test is a Python call, so that comparing it inside a C-level scan
    is counted; hashing is str's, so dict and set lookups cost what they cost for any name."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def cost(action: Callable[[], object]) -> int:
    """How many Python calls and lines, and C calls, ``action`` runs."""
    events = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        nonlocal events
        events += 1
        return trace

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal events
        if event == "c_call":
            events += 1

    saved = sys.gettrace(), sys.getprofile()
    sys.settrace(trace)
    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.settrace(saved[0])
        sys.setprofile(saved[1])
    return events


class ImmediateCommitter:
    """Every write is committed as it is submitted: answers need not wait."""

    committed_offset = -1

    @property
    def commits(self) -> "ImmediateCommitter":
        """Its own progress: how far it committed, and the waits."""
        return self

    def submit(self, records: object, base_offset: int) -> None:
        pass

    def wait(self, offset: int) -> None:
        return None


class Cluster:
    """A controller with one live broker, and the router in front of it with an authorizer."""

    def __init__(self) -> None:
        self.qc = QuorumController("MkU3OEVBNTcwNTJENDM2Qg", 1, ManualClock())
        self.qc.apply(ControllerResult([(FeatureLevelRecord(name="metadata.version", feature_level=MV_LATEST), 0)]))
        self.qc.activate()
        security = SecurityConfig(authorizer=AuthorizerConfig(super_users=frozenset({"User:admin"})))
        self.router = Router(lambda: self.qc, ImmediateCommitter(), security)  # type: ignore[arg-type]
        epoch = self.qc.register_broker(registration(1, mv_range=(7, MV_LATEST)), 4).response.broker_epoch
        beat = self.qc.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=epoch, current_metadata_offset=self.qc.last_applied_offset), 1)
        assert not beat.response.is_fenced

    def serve(self, request: Message, version: int, context: RequestContext) -> Message:
        """A decoded request as the router serves it: authorized and narrowed for its
        principal, then handled by the controller."""
        route = self.router._route(api_key_of(request), version)
        assert route is not None
        response = self.router._serve(route, request, context, None)  # type: ignore[arg-type]  # no SASL here
        assert isinstance(response, Message)
        self.qc.committed(self.qc.last_applied_offset)
        return response

    def setup(self, request: Message, version: int) -> Message:
        return self.serve(request, version, ADMIN)


def topic_names(n: int) -> list[str]:
    return [CountedName(f"topic-{i:05d}") for i in range(n)]


def acl(name: str, principal: str, operation: AclOperation, pattern: PatternType = PatternType.LITERAL,
        resource_type: AclResourceType = AclResourceType.TOPIC) -> AclCreation:
    return AclCreation(resource_type=resource_type, resource_name=CountedName(name), resource_pattern_type=pattern,
                       principal=principal, host="*", operation=operation, permission_type=AclPermissionType.ALLOW)


def upsertion(name: str) -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(name=name, mechanism=2, iterations=4096, salt=b"salt", salted_password=b"p" * 64)


def users(n: int) -> list[str]:
    return [CountedName(f"user-{i:05d}") for i in range(n)]


def with_topics_and_acls(n: int) -> Cluster:
    """n topics of one partition and n ACLs: alice may describe every other topic, and the
    rest have an ACL for someone else (literal ones, and prefixed ones that match nothing she
    asks for)."""
    cluster = Cluster()
    names = topic_names(n)
    created = cluster.setup(CreateTopicsRequest(topics=[
        CreatableTopic(name=t, num_partitions=1, replication_factor=1) for t in names]), 7)
    assert {t.error_code for t in created.topics} == {Error.NONE}
    creations = [acl(t, "User:alice", AclOperation.DESCRIBE) if i % 2 == 0
                 else acl(t, "User:bob", AclOperation.READ) if i % 4 == 1
                 else acl(f"other-{i:05d}", "User:bob", AclOperation.READ, PatternType.PREFIXED)
                 for i, t in enumerate(names)]
    cluster.setup(CreateAclsRequest(creations=creations), 3)
    assert len(cluster.qc.acls.acls) == n
    return cluster


# Each scenario prepares the state for size n and returns the request to measure.
def describe_scram(n: int) -> tuple[Cluster, Callable[[], Message]]:
    cluster = Cluster()
    cluster.setup(AlterUserScramCredentialsRequest(upsertions=[upsertion(u) for u in users(n)]), 0)
    request = DescribeUserScramCredentialsRequest(users=[UserName(name=u) for u in users(n)])
    return cluster, lambda: cluster.serve(request, 0, ADMIN)


def alter_scram(n: int) -> tuple[Cluster, Callable[[], Message]]:
    cluster = Cluster()
    request = AlterUserScramCredentialsRequest(upsertions=[upsertion(u) for u in users(n)])
    return cluster, lambda: cluster.serve(request, 0, ADMIN)


def metadata(n: int) -> tuple[Cluster, Callable[[], Message]]:
    cluster = with_topics_and_acls(n)
    request = MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topic_names(n)])
    return cluster, lambda: cluster.serve(request, 12, ALICE)


def describe_topic_partitions(n: int) -> tuple[Cluster, Callable[[], Message]]:
    cluster = with_topics_and_acls(n)
    request = DescribeTopicPartitionsRequest(topics=[TopicRequest(name=t) for t in topic_names(n)])
    return cluster, lambda: cluster.serve(request, 0, ALICE)


def create_topics(n: int) -> tuple[Cluster, Callable[[], Message]]:
    cluster = Cluster()
    cluster.setup(CreateAclsRequest(creations=[acl("new-", "User:alice", AclOperation.CREATE, PatternType.PREFIXED)]), 3)
    # Most names come twice and are refused as duplicates; a tenth are created.
    names = [CountedName(f"new-{i:05d}") for i in range(n)] * 2 + [CountedName(f"new-{i:05d}")
                                                                   for i in range(n, n + n // 10)]
    request = CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=1)
                                          for name in names])
    return cluster, lambda: cluster.serve(request, 7, ALICE)


def alter_config_keys(n: int) -> tuple[Cluster, Callable[[], Message]]:
    cluster = Cluster()
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=BROKER_CONFIG, resource_name=CLUSTER_DEFAULT, configs=[
            AlterableConfig(name=CountedName(f"custom.setting.{i:05d}"), config_operation=AlterConfigOpType.SET,
                            value="x") for i in range(n)])])
    return cluster, lambda: cluster.serve(request, 1, ADMIN)


def append_to_list_config(n: int) -> tuple[Cluster, Callable[[], Message]]:
    # The handler splits the value into names of its own, plain strings: a scan of them in C
    # is not seen here, only work done in Python.
    cluster = Cluster()
    cluster.setup(CreateTopicsRequest(topics=[CreatableTopic(name="throttled", num_partitions=1,
                                                             replication_factor=1)]), 7)
    key = "leader.replication.throttled.replicas"

    def change(operation: AlterConfigOpType, first: int) -> IncrementalAlterConfigsRequest:
        value = ",".join(f"{i}:1" for i in range(first, first + n))
        return IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=TOPIC_CONFIG, resource_name="throttled",
            configs=[AlterableConfig(name=key, config_operation=operation, value=value)])])
    cluster.setup(change(AlterConfigOpType.SET, 0), 1)
    request = change(AlterConfigOpType.APPEND, n // 2)
    return cluster, lambda: cluster.serve(request, 1, ADMIN)


def create_acls(n: int) -> tuple[Cluster, Callable[[], Message]]:
    cluster = Cluster()
    cluster.setup(CreateAclsRequest(creations=[acl(f"standing-{i:05d}", "User:bob", AclOperation.READ)
                                               for i in range(n)]), 3)
    request = CreateAclsRequest(creations=[acl(f"topic-{i:05d}", f"User:u{i}", AclOperation.WRITE)
                                           for i in range(n)])
    return cluster, lambda: cluster.serve(request, 3, ADMIN)


def delete_acls(n: int) -> tuple[Cluster, Callable[[], Message]]:
    """n filters, each naming one of the n resources that have ACLs."""
    cluster = with_topics_and_acls(n)
    request = DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=AclResourceType.TOPIC, resource_name_filter=name, pattern_type_filter=PatternType.MATCH,
        principal_filter=None, host_filter=None, operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)
        for name in topic_names(n)])
    return cluster, lambda: cluster.serve(request, 3, ADMIN)


SCENARIOS = [describe_scram, alter_scram, metadata, describe_topic_partitions, create_topics, alter_config_keys,
             append_to_list_config, create_acls, delete_acls]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_handler_cost_grows_linearly(scenario: Callable[[int], tuple[Cluster, Callable[[], Message]]]) -> None:
    costs = []
    for n in (N, 2 * N):
        _, serve = scenario(n)
        costs.append(cost(serve))
    ratio = costs[1] / costs[0]
    assert ratio < LIMIT, f"{scenario.__name__}: cost {costs[0]} at n={N}, {costs[1]} at n={2 * N}"


def test_the_measure_sees_a_scan_inside_c() -> None:
    """The counted names make a quadratic ``list.count`` visible, which a count of calls alone
    would miss."""
    def duplicates(names: list[str]) -> set[str]:
        return {name for name in names if names.count(name) > 1}

    ratio = cost(lambda: duplicates(users(2 * N))) / cost(lambda: duplicates(users(N)))
    assert ratio > 3.5
