"""Access control entries (KIP-500's ACLs as metadata records), by their UUID."""

from __future__ import annotations

from typing import Iterator

from protocol.generated.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.generated.metadata.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from server.controller.offsets import OffsetControl
from server.controller.record_table import RecordTable
from server.controller.result import VersionedRecord


class AclControl:
    def __init__(self, offsets: OffsetControl) -> None:
        self.acls: RecordTable[bytes, AccessControlEntryRecord] = RecordTable(offsets, "ACL")

    def replay_add(self, record: AccessControlEntryRecord) -> None:
        self.acls.put(record.id, record)

    def replay_remove(self, record: RemoveAccessControlEntryRecord) -> None:
        self.acls.remove(record.id)

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.acls.snapshot_records()
