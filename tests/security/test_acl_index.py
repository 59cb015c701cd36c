"""The ACL index against the plain definition: over many random ACL sets, a check through the
index answers what walking every ACL answers, and so do the DescribeAcls filters; replay keeps
the index in step with the ACL records, undo included."""

from __future__ import annotations

import random

import pytest

from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType
from protocol.generated.messages.create_acls_request import CreateAclsRequest
from protocol.generated.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.generated.metadata.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from server.controller.acls import AclControl
from server.controller.offsets import OffsetControl
from server.controller.result import ControllerResult
from server.security.acl import WILDCARD, WILDCARD_PRINCIPAL, Acl, AuthorizerConfig, authorize, filter_matches
from tests.support.security import creation, match_all, replay

NAMES = ["foo", "foobar", "fo", "f", "bar", "ba", WILDCARD, "kafka-cluster"]
PRINCIPALS = ["User:alice", "User:bob", WILDCARD_PRINCIPAL]
HOSTS = ["10.0.0.1", "10.0.0.2", WILDCARD]
TYPES = [AclResourceType.TOPIC, AclResourceType.GROUP]
OPERATIONS = [AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
              AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS]
PERMISSIONS = [AclPermissionType.ALLOW, AclPermissionType.DENY]


def reference(principal: str, host: str, operation: AclOperation, resource_type: AclResourceType, name: str,
              acls: list[AccessControlEntryRecord], config: AuthorizerConfig) -> bool:
    """Kafka's rule, walking every ACL: a matching DENY wins, then any matching ALLOW; no ACL
    on the resource at all allows only where the configuration says so."""
    if principal in config.super_users:
        return True
    applying = [a for a in acls if filter_matches(a, resource_type, name, PatternType.MATCH, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)]
    mine = [a for a in applying if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)]
    implied = {AclOperation.DESCRIBE: {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER},
               AclOperation.DESCRIBE_CONFIGS: {AclOperation.ALTER_CONFIGS}}
    if any(a.permission_type == AclPermissionType.DENY and a.operation in (AclOperation.ALL, operation) for a in mine):
        return False
    if any(a.permission_type == AclPermissionType.ALLOW
           and (a.operation in (AclOperation.ALL, operation) or a.operation in implied.get(operation, ()))
           for a in mine):
        return True
    return not applying and config.allow_everyone_if_no_acl_found


def random_acls(rng: random.Random, control: AclControl, count: int) -> None:
    replay(control, control.create_acls(CreateAclsRequest(creations=[
        creation(rng.choice(NAMES), rng.choice(TYPES), rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
                 rng.choice(PRINCIPALS), rng.choice(HOSTS), rng.choice(OPERATIONS), rng.choice(PERMISSIONS))
        for _ in range(count)])))


@pytest.mark.parametrize("seed", range(20))
def test_checks_through_the_index_answer_as_a_walk_of_every_acl(seed: int) -> None:
    rng = random.Random(seed)
    control = AclControl(OffsetControl())
    random_acls(rng, control, rng.randrange(0, 25))
    standing = list(control.acls.entries.values())
    for config in (AuthorizerConfig(), AuthorizerConfig(allow_everyone_if_no_acl_found=True)):
        for principal in ("User:alice", "User:bob", "User:carol"):
            for name in NAMES + ["foobarbaz", "b", "x"]:
                for operation in OPERATIONS:
                    for resource_type in TYPES:
                        args = (principal, "10.0.0.1", operation, resource_type, name)
                        assert authorize(*args, control.index, config) == reference(*args, standing, config), args


@pytest.mark.parametrize("seed", range(10))
def test_filters_through_the_index_select_what_a_walk_selects(seed: int) -> None:
    rng = random.Random(seed)
    control = AclControl(OffsetControl())
    random_acls(rng, control, 30)
    standing = list(control.acls.entries.values())
    for resource_type in [AclResourceType.ANY, *TYPES]:
        for name in [None, *NAMES, "foobarbaz"]:
            for pattern in [PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED]:
                for principal in [None, "User:alice"]:
                    fields = match_all(resource_type_filter=resource_type, resource_name_filter=name,
                                       pattern_type_filter=pattern, principal_filter=principal)
                    described = control.describe_acls(DescribeAclsRequest(**fields))
                    got = sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                                  a.permission_type) for r in described.resources for a in r.acls)
                    want = sorted(_fields(a) for a in standing if filter_matches(
                        a, resource_type, name, pattern, principal, None, AclOperation.ANY, AclPermissionType.ANY))
                    assert got == want, fields


def _fields(a: Acl) -> tuple[int, str, int, str, str, int, int]:
    return (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission_type)


def test_replay_keeps_the_index_in_step_and_undo_reverts_it() -> None:
    offsets = OffsetControl()
    offsets.activate()
    control = AclControl(offsets)
    everyone = AuthorizerConfig(allow_everyone_if_no_acl_found=True)

    def allowed(name: str) -> bool:
        return authorize("User:alice", "10.0.0.1", AclOperation.READ, AclResourceType.TOPIC, name, control.index, everyone)

    def apply(result: ControllerResult) -> None:
        for record, _ in result.records:
            offsets.replaying(offsets.next_offset)
            if isinstance(record, AccessControlEntryRecord):
                control.replay_add(record)
            else:
                assert isinstance(record, RemoveAccessControlEntryRecord)
                control.replay_remove(record)
            offsets.replayed(offsets.next_offset)

    apply(control.create_acls(CreateAclsRequest(creations=[
        creation("fo", pattern=PatternType.PREFIXED, principal="User:bob")])))
    assert not allowed("foo") and allowed("bar")
    apply(control.delete_acls(DeleteAclsRequest(filters=[DeleteAclsFilter(**match_all())])))
    assert allowed("foo") and len(control.acls) == 0
    offsets.revert_to(1)  # the deletion is undone
    assert not allowed("foo") and len(control.acls) == 1
    offsets.revert_to(0)  # and the creation
    assert allowed("foo") and len(control.acls) == 0
    # A standing ACL is not written again, nor one named twice in a request.
    apply(control.create_acls(CreateAclsRequest(creations=[creation("foo")])))
    again = control.create_acls(CreateAclsRequest(creations=[creation("foo"), creation("bar"), creation("bar")]))
    assert [getattr(r, "resource_name") for r, _ in again.records] == ["bar"]
