"""Access control entries (KIP-500's ACLs as metadata records), by their UUID, and the ACL
admin APIs: CreateAcls and DeleteAcls write records, DescribeAcls reads them."""

from __future__ import annotations

import uuid
from typing import Iterable, Iterator

from protocol.error_codes import Error
from protocol.generated.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.generated.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from protocol.generated.messages.delete_acls_request import DeleteAclsRequest
from protocol.generated.messages.delete_acls_response import (
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse)
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.messages.describe_acls_response import AclDescription, DescribeAclsResource, DescribeAclsResponse
from protocol.generated.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.generated.metadata.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from server.controller.offsets import OffsetControl
from server.controller.record_table import RecordTable
from server.controller.result import ControllerResult, VersionedRecord
from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType
from server.security.acl import CLUSTER_NAME, CONCRETE_TYPES, AclIndex, filter_matches


def _entry(record: AccessControlEntryRecord) -> tuple[int, str, int, str, str, int, int]:
    return (record.resource_type, record.resource_name, record.pattern_type, record.principal,
            record.host, record.operation, record.permission_type)


def creation_problem(c: AclCreation) -> str | None:
    """Why an ACL cannot be created, in the words of Kafka's AclControlManager, or None."""
    if c.resource_type not in CONCRETE_TYPES:
        return "Invalid resourceType " + str(c.resource_type)
    if c.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + str(c.resource_pattern_type)
    if c.operation in (AclOperation.ANY, AclOperation.UNKNOWN) or c.operation > max(AclOperation):
        return "Invalid operation " + str(c.operation)
    if c.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return "Invalid permissionType " + str(c.permission_type)
    if not c.resource_name:
        return "Resource name should not be empty"
    if c.resource_type == AclResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    kind, sep, name = c.principal.partition(":")
    if not sep or not kind or not name:
        return "Could not parse principal from `" + c.principal + "` (no colon is present separating the " \
               "principal type from the principal name)"
    if not c.host:
        return "Invalid empty host"
    return None


class AclControl:
    def __init__(self, offsets: OffsetControl) -> None:
        self.acls: RecordTable[bytes, AccessControlEntryRecord] = RecordTable(offsets, "ACL")
        # The same ACLs by resource, for the authorizer and the filters; replay keeps it in step.
        self.index: AclIndex[bytes, AccessControlEntryRecord] = AclIndex()

    def replay_add(self, record: AccessControlEntryRecord) -> None:
        old = self.acls.entries.get(record.id)
        self.acls.put(record.id, record)
        self._reindex(record.id, old, record)

    def replay_remove(self, record: RemoveAccessControlEntryRecord) -> None:
        old = self.acls.entries.get(record.id)
        self.acls.remove(record.id)
        self._reindex(record.id, old, None)

    def _reindex(self, acl_id: bytes, old: AccessControlEntryRecord | None,
                 new: AccessControlEntryRecord | None) -> None:
        self._move(acl_id, old, new)
        if self.acls.offsets.recording:
            self.acls.offsets.on_undo(lambda: self._move(acl_id, new, old))

    def _move(self, acl_id: bytes, old: AccessControlEntryRecord | None,
              new: AccessControlEntryRecord | None) -> None:
        if old is not None:
            self.index.remove(acl_id, old)
        if new is not None:
            self.index.add(acl_id, new)

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.acls.snapshot_records()

    def _matching(self, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
                  host: str | None, operation: int, permission: int) -> list[tuple[bytes, AccessControlEntryRecord]]:
        """The ACLs a filter selects, in a stable order; looked up by resource when the filter
        names one."""
        candidates = self.index.filtered(resource_type, name, pattern_type, principal)
        pool: Iterable[tuple[bytes, AccessControlEntryRecord]] = (
            self.acls.entries.items() if candidates is None else candidates)
        found = [(acl_id, acl) for acl_id, acl in pool
                 if filter_matches(acl, resource_type, name, pattern_type, principal, host, operation, permission)]
        found.sort(key=lambda item: repr(item[0]))
        return found

    def create_acls(self, req: CreateAclsRequest) -> ControllerResult:
        """One result per creation; an ACL that already stands is created again as nothing."""
        created: set[tuple[int, str, int, str, str, int, int]] = set()
        records: list[VersionedRecord] = []
        results = []
        for c in req.creations:
            problem = creation_problem(c)
            if problem is not None:
                results.append(AclCreationResult(error_code=Error.INVALID_REQUEST, error_message=problem))
                continue
            record = AccessControlEntryRecord(
                id=uuid.uuid4().bytes, resource_type=c.resource_type, resource_name=c.resource_name,
                pattern_type=c.resource_pattern_type, principal=c.principal, host=c.host,
                operation=c.operation, permission_type=c.permission_type)
            if _entry(record) not in created and not self.index.stands(record):
                created.add(_entry(record))
                records.append((record, 0))
            results.append(AclCreationResult(error_message=None))
        return ControllerResult(records, CreateAclsResponse(results=results))

    def delete_acls(self, req: DeleteAclsRequest) -> ControllerResult:
        """Every ACL matching each filter goes; one removed by an earlier filter is listed there."""
        records: list[VersionedRecord] = []
        removed: set[bytes] = set()
        results = []
        for f in req.filters:
            matching = []
            for acl_id, acl in self._matching(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                              f.principal_filter, f.host_filter, f.operation, f.permission_type):
                if acl_id in removed:
                    continue
                removed.add(acl_id)
                records.append((RemoveAccessControlEntryRecord(id=acl_id), 0))
                matching.append(DeleteAclsMatchingAcl(
                    error_message=None, resource_type=acl.resource_type, resource_name=acl.resource_name,
                    pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host,
                    operation=acl.operation, permission_type=acl.permission_type))
            results.append(DeleteAclsFilterResult(error_message=None, matching_acls=matching))
        return ControllerResult(records, DeleteAclsResponse(filter_results=results))

    def describe_acls(self, req: DescribeAclsRequest) -> DescribeAclsResponse:
        groups: dict[tuple[int, str, int], list[AclDescription]] = {}
        for _, acl in self._matching(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                                     req.principal_filter, req.host_filter, req.operation, req.permission_type):
            groups.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                               permission_type=acl.permission_type))
        return DescribeAclsResponse(error_message=None, resources=[
            DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
            for (t, n, p), acls in sorted(groups.items())])
