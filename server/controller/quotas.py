"""Client quotas (KIP-546) by entity and quota key."""

from __future__ import annotations

from typing import Iterator

from protocol.generated.metadata.client_quota_record import ClientQuotaRecord
from server.controller.offsets import OffsetControl
from server.controller.record_table import RecordTable
from server.controller.result import VersionedRecord

# An entity is its (type, name) parts in type order: ("user", "alice"), ("client-id", None), ...
Entity = tuple[tuple[str, str | None], ...]


def entity_of(record: ClientQuotaRecord) -> Entity:
    return tuple(sorted((e.entity_type, e.entity_name) for e in record.entity))


class ClientQuotaControl:
    def __init__(self, offsets: OffsetControl) -> None:
        # (entity, quota key) -> the record that set it; a quota's value is the record's.
        self.quotas: RecordTable[tuple[Entity, str], ClientQuotaRecord] = RecordTable(offsets, "client quota")

    def replay(self, record: ClientQuotaRecord) -> None:
        key = (entity_of(record), record.key)
        if record.remove:
            # Kafka removes a quota that is not set without complaint.
            if key in self.quotas.entries:
                self.quotas.remove(key)
        else:
            self.quotas.put(key, record)

    def by_entity(self) -> dict[Entity, dict[str, float]]:
        result: dict[Entity, dict[str, float]] = {}
        for (entity, name), record in self.quotas.items():
            result.setdefault(entity, {})[name] = record.value
        return result

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.quotas.snapshot_records()
