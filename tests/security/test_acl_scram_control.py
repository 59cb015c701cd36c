"""The ACL and SCRAM admin commands on the controller state (AclControlManagerTest's and
ScramControlManagerTest's scenarios): what is refused and with which error, what is written,
and what the describe commands list."""

from __future__ import annotations

from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType
from protocol.error_codes import Error
from protocol.generated.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialDeletion, ScramCredentialUpsertion)
from protocol.generated.messages.create_acls_request import CreateAclsRequest
from protocol.generated.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest, UserName)
from server.controller.acls import AclControl
from server.controller.offsets import OffsetControl
from server.controller.scram import ScramControl
from tests.support.security import creation, match_all, replay


def test_invalid_acls_are_refused_one_by_one() -> None:
    acls = AclControl(OffsetControl())
    bad = [creation(rtype=AclResourceType.ANY), creation(pattern=PatternType.MATCH), creation(op=AclOperation.ANY),
           creation(permission=AclPermissionType.ANY), creation(name=""), creation(rtype=AclResourceType.CLUSTER, name="x"),
           creation(principal="alice"), creation(host="")]
    response = replay(acls, acls.create_acls(CreateAclsRequest(creations=[*bad, creation()])))
    assert [r.error_code for r in response.results] == [Error.INVALID_REQUEST] * len(bad) + [Error.NONE]
    assert len(acls.acls) == 1


def test_an_acl_that_stands_is_not_written_again() -> None:
    acls = AclControl(OffsetControl())
    replay(acls, acls.create_acls(CreateAclsRequest(creations=[creation()])))
    again = acls.create_acls(CreateAclsRequest(creations=[creation(), creation()]))
    assert again.records == []
    assert [r.error_code for r in again.response.results] == [0, 0]


def test_describe_and_delete_by_filter() -> None:
    acls = AclControl(OffsetControl())
    replay(acls, acls.create_acls(CreateAclsRequest(creations=[
        creation("foo"), creation("fo", pattern=PatternType.PREFIXED), creation("bar", principal="User:bob"),
        creation("*", op=AclOperation.WRITE)])))
    matching = acls.describe_acls(DescribeAclsRequest(**match_all(
        resource_type_filter=AclResourceType.TOPIC, resource_name_filter="foo", pattern_type_filter=PatternType.MATCH)))
    assert sorted((r.resource_name, r.pattern_type) for r in matching.resources) == [
        ("*", PatternType.LITERAL), ("fo", PatternType.PREFIXED), ("foo", PatternType.LITERAL)]
    deleted = replay(acls, acls.delete_acls(DeleteAclsRequest(filters=[
        DeleteAclsFilter(**match_all(principal_filter="User:alice", operation=AclOperation.READ)),
        DeleteAclsFilter(**match_all(principal_filter="User:alice"))])))
    # An ACL the first filter removed is not listed again by the second.
    assert [len(f.matching_acls) for f in deleted.filter_results] == [2, 1]
    assert [a.principal for a in acls.acls.entries.values()] == ["User:bob"]


def upsert(name: str, mechanism: int = 2, iterations: int = 4096) -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=b"salt",
                                    salted_password=b"x" * 64)


def test_scram_alterations_and_their_errors() -> None:
    scram = ScramControl(OffsetControl())
    response = replay(scram, scram.alter(AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="ghost", mechanism=2), ScramCredentialDeletion(name="twice", mechanism=2)],
        upsertions=[upsert("alice"), upsert("twice"), upsert("few", iterations=4095), upsert("many", iterations=16385),
                    upsert("odd", mechanism=3), upsert("")])))
    assert {r.user: r.error_code for r in response.results} == {
        "ghost": Error.RESOURCE_NOT_FOUND, "twice": Error.DUPLICATE_RESOURCE, "alice": Error.NONE,
        "few": Error.UNACCEPTABLE_CREDENTIAL, "many": Error.UNACCEPTABLE_CREDENTIAL,
        "odd": Error.UNSUPPORTED_SASL_MECHANISM, "": Error.UNACCEPTABLE_CREDENTIAL}
    assert list(scram.credentials.entries) == [("alice", 2)]
    stored = scram.credentials.entries[("alice", 2)]
    assert stored.stored_key != b"x" * 64 and len(stored.server_key) == 64  # keys, not the salted password
    described = scram.describe(DescribeUserScramCredentialsRequest(users=[UserName(name="alice"), UserName(name="zed")]))
    assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in described.results] == [("alice", 0, [(2, 4096)]), ("zed", Error.RESOURCE_NOT_FOUND, [])]
    removed = replay(scram, scram.alter(AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="alice", mechanism=2)])))
    assert [r.error_code for r in removed.results] == [0] and len(scram.credentials) == 0
