"""Delegation tokens (KIP-48 in KRaft, KIP-900) by token id."""

from __future__ import annotations

from typing import Iterator

from protocol.generated.metadata.delegation_token_record import DelegationTokenRecord
from protocol.generated.metadata.remove_delegation_token_record import RemoveDelegationTokenRecord
from server.controller.offsets import OffsetControl
from server.controller.record_table import RecordTable
from server.controller.result import VersionedRecord


class DelegationTokenControl:
    def __init__(self, offsets: OffsetControl) -> None:
        self.tokens: RecordTable[str, DelegationTokenRecord] = RecordTable(offsets, "delegation token")

    def replay_add(self, record: DelegationTokenRecord) -> None:
        # A renewal writes the token again with a later expiration: it replaces the entry.
        self.tokens.put(record.token_id, record)

    def replay_remove(self, record: RemoveDelegationTokenRecord) -> None:
        self.tokens.remove(record.token_id)

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.tokens.snapshot_records()
