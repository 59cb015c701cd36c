"""State that is a set of records by key, as ACLs, SCRAM credentials, delegation tokens and
client quotas are: a record puts the entry for its key, its remove record drops it, and the
snapshot is the records that stand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Generic, Hashable, Iterator, TypeVar

from protocol.message import Message
from server.controller.offsets import OffsetControl, restore_key
from server.controller.result import VersionedRecord

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

K = TypeVar("K", bound=Hashable)
R = TypeVar("R", bound=Message)


class RecordTable(Generic[K, R]):
    def __init__(self, offsets: OffsetControl, what: str) -> None:
        self.offsets = offsets
        self.what = what  # names the entries in errors
        self.entries: dict[K, R] = {}

    def put(self, key: K, record: R) -> None:
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self.entries, key))
        self.entries[key] = record

    def remove(self, key: K) -> None:
        """Drop the entry; a remove of something never added means the log is not one
        history (Kafka's controller refuses it too)."""
        if key not in self.entries:
            raise ValueError(f"no {self.what} {key!r} to remove")
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self.entries, key))
        del self.entries[key]

    def __len__(self) -> int:
        return len(self.entries)

    def items(self, order: Callable[[K], SupportsRichComparison] = repr) -> list[tuple[K, R]]:
        """Entries in a stable order, so that equal states snapshot to equal bytes."""
        return sorted(self.entries.items(), key=lambda item: order(item[0]))

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        for _, record in self.items():
            yield record, 0
