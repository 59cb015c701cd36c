"""SCRAM credentials (KIP-554) by user name and mechanism."""

from __future__ import annotations

from typing import Iterator

from protocol.generated.metadata.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from protocol.generated.metadata.user_scram_credential_record import UserScramCredentialRecord
from server.controller.offsets import OffsetControl
from server.controller.record_table import RecordTable
from server.controller.result import VersionedRecord

# Kafka's ScramMechanism numbers.
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


class ScramControl:
    def __init__(self, offsets: OffsetControl) -> None:
        self.credentials: RecordTable[tuple[str, int], UserScramCredentialRecord] = RecordTable(offsets, "SCRAM credential")

    def replay_add(self, record: UserScramCredentialRecord) -> None:
        self.credentials.put((record.name, record.mechanism), record)

    def replay_remove(self, record: RemoveUserScramCredentialRecord) -> None:
        self.credentials.remove((record.name, record.mechanism))

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.credentials.snapshot_records()
