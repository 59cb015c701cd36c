"""The Raft log in memory, for driving Raft cores in tests and simulations: ``lose_unflushed``
plays a crash, ``take_snapshot`` compacts as a controller would."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from protocol.message import Message
from protocol.records import read_batch_header
from server.raft.types import OffsetAndEpoch
from server.raft.voters import IN_SNAPSHOT, quorum_messages, snapshot_quorum_messages


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes


class InMemoryLog:
    """A RaftLog in a list; ``lose_unflushed`` plays a crash for the simulation."""

    def __init__(self, snapshot: tuple[int, int] | None = None) -> None:
        """``snapshot``: (end offset, epoch) of a snapshot the log starts after."""
        self._snapshot = OffsetAndEpoch(*snapshot) if snapshot else None
        self._snapshot_data = b""
        self._start = snapshot[0] if snapshot else 0
        self.batches: list[StoredBatch] = []
        self._bases: list[int] = []
        # Each epoch in the log and the offset of its first batch (the epoch cache).
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []
        self._flushed = self._start

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def snapshot_data(self) -> bytes:
        """The latest snapshot's bytes: the batches it replaced."""
        return self._snapshot_data

    @property
    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return self._snapshot

    @property
    def end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self._start

    @property
    def last_epoch(self) -> int:
        if self.batches:
            return self.batches[-1].epoch
        return self._snapshot.epoch if self._snapshot else 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    def append(self, batches: list[bytes]) -> None:
        for raw in batches:
            header = read_batch_header(raw)
            if header.base_offset != self.end_offset:
                raise ValueError(f"batch at offset {header.base_offset} does not continue the log "
                                 f"ending at {self.end_offset}")
            if header.partition_leader_epoch < self.last_epoch:
                raise ValueError(f"batch epoch {header.partition_leader_epoch} is below "
                                 f"the log's last epoch {self.last_epoch}")
            self._add(StoredBatch(header.base_offset, header.last_offset, header.partition_leader_epoch, raw))

    def _add(self, batch: StoredBatch) -> None:
        self.batches.append(batch)
        self._bases.append(batch.base_offset)
        if not self._epochs or self._epochs[-1] != batch.epoch:
            self._epochs.append(batch.epoch)
            self._epoch_starts.append(batch.base_offset)

    def truncate_to(self, offset: int) -> None:
        i = bisect_right(self._bases, offset - 1)
        if i and self.batches[i - 1].last_offset >= offset:
            raise ValueError(f"offset {offset} is inside a batch")
        del self.batches[i:]
        del self._bases[i:]
        while self._epoch_starts and self._epoch_starts[-1] >= self.end_offset:
            self._epochs.pop()
            self._epoch_starts.pop()
        self._flushed = min(self._flushed, self.end_offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        i = bisect_right(self._epochs, epoch) - 1
        if i < 0:
            if self._snapshot is not None and self._snapshot.epoch <= epoch:
                return OffsetAndEpoch(self._start, self._snapshot.epoch)
            return OffsetAndEpoch(self._start, 0)
        end = self._epoch_starts[i + 1] if i + 1 < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(end, self._epochs[i])

    def read(self, from_offset: int, max_bytes: int, up_to: int | None = None) -> bytes:
        i = bisect_right(self._bases, from_offset) - 1
        if i < 0 or from_offset > self.batches[i].last_offset:
            return b""
        if up_to is not None and self.batches[i].last_offset > up_to:
            return b""
        out = [self.batches[i].data]
        total = len(out[0])
        for batch in self.batches[i + 1:]:
            if total + len(batch.data) > max_bytes or (up_to is not None and batch.last_offset > up_to):
                break
            out.append(batch.data)
            total += len(batch.data)
        return b"".join(out)

    def flush(self) -> None:
        self._flushed = self.end_offset

    def begin_flush(self) -> None:
        self.flush()

    def lose_unflushed(self, keep_batches: int) -> None:
        """A crash: keep the flushed batches and ``keep_batches`` of the unflushed ones (the
        operating system may have written some of them anyway)."""
        flushed = bisect_right(self._bases, self._flushed - 1)
        self.truncate_to(self.batches[flushed + keep_batches].base_offset
                         if flushed + keep_batches < len(self.batches) else self.end_offset)
        self._flushed = self.end_offset

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        if snapshot != self._snapshot:
            return None
        return self._snapshot_data[position:position + max_bytes], len(self._snapshot_data)

    def install_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        self.truncate_to(self.start_offset)
        self._snapshot, self._snapshot_data = snapshot, data
        self._start = self._flushed = snapshot.offset

    def quorum_messages(self) -> list[tuple[int, Message]]:
        found = [(IN_SNAPSHOT, message) for message in snapshot_quorum_messages(self._snapshot_data)]
        for batch in self.batches:
            found.extend(quorum_messages(batch.data))
        return found

    def take_snapshot(self, end_offset: int) -> None:
        """Snapshot everything below ``end_offset`` (a batch boundary) and drop it from the
        log. The snapshot of an in-memory log is simply those batches' bytes."""
        i = bisect_right(self._bases, end_offset - 1)
        if i == 0 or self.batches[i - 1].last_offset != end_offset - 1:
            raise ValueError(f"offset {end_offset} is not the end of a batch in the log")
        kept = self.batches[i:]
        self._snapshot = OffsetAndEpoch(end_offset, self.batches[i - 1].epoch)
        self._snapshot_data = self._snapshot_data + b"".join(b.data for b in self.batches[:i])
        self._start = end_offset
        self.batches, self._bases = [], []
        self._epochs, self._epoch_starts = [], []
        flushed = self._flushed
        for batch in kept:
            self._add(batch)
        self._flushed = max(flushed, end_offset)
