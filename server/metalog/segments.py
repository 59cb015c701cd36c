"""The __cluster_metadata log on disk: segment files of magic-v2 record batches.

Layout as Kafka keeps it: ``<metadata.log.dir>/__cluster_metadata-0/<base offset, 20 digits>.log``.
A batch counts as committed once it is written and fsynced. Recovery verifies every CRC; a
bad batch at the very end (a write torn by a crash) is cut off with a log line, while a bad
batch followed by good data is corruption and stops start-up, naming the file and offset.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from protocol.errors import DecodeError
from protocol.records import (
    HEADER_SIZE, BatchHeader, RecordBatch, batch_crc_ok, decode_batch, read_batch_header, record_values)
from server.metalog.durable import fsync_dir

log = logging.getLogger("kraftwire.metalog")

PARTITION_DIR = "__cluster_metadata-0"
SUFFIX = ".log"


class LogCorruption(Exception):
    """A damaged batch that is not a torn tail; start-up must stop."""

    def __init__(self, path: Path, position: int, offset: int | None, reason: str) -> None:
        where = f"byte {position}" + ("" if offset is None else f" (log offset {offset})")
        super().__init__(f"corrupt metadata log {path} at {where}: {reason}")
        self.path = path
        self.position = position
        self.offset = offset


@dataclass(frozen=True)
class BatchEntry:
    base_offset: int
    last_offset: int
    epoch: int
    segment: int  # index into MetadataLog.segments
    position: int
    size: int
    control: bool = False  # a control batch (leader change, voters, kraft.version)


def offset_gap(header: BatchHeader, expected: int) -> str | None:
    """Why a batch where the log is at ``expected`` does not continue it (None if it does):
    the log is refused at start-up for it."""
    if header.base_offset != expected:
        return f"batch starts at offset {header.base_offset}, expected {expected}"
    return None


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


class MetadataLog:
    def __init__(self, directory: Path, segment_bytes: int = 1 << 30) -> None:
        self.directory = Path(directory) / PARTITION_DIR
        self.segment_bytes = segment_bytes
        self.segments: list[Path] = []
        self.entries: list[BatchEntry] = []
        self._bases: list[int] = []  # entries' base offsets, for bisect
        # Each leader epoch in the log and the offset of its first batch, for diverging fetches.
        self._epoch_starts: list[int] = []
        self._epochs: list[int] = []
        self._active: BinaryIO | None = None  # open file of the last segment
        self._active_size = 0
        self.start_offset = 0
        self.appended_bytes = 0  # written since open, for the snapshot trigger
        # append() runs on the committer's writer thread while delete_segments_before() runs
        # on the event loop; both rewrite the segment list and the index under this lock.
        self._lock = threading.Lock()
        self._unusable: str | None = None  # why appends are refused, after a failed cut back
        self._unsynced = False  # an append(sync=False) wrote bytes not yet fsynced

    # --- opening and recovery ---------------------------------------------------------------
    @classmethod
    def open(cls, directory: Path, segment_bytes: int = 1 << 30) -> "MetadataLog":
        self = cls(directory, segment_bytes)
        self.directory.mkdir(parents=True, exist_ok=True)
        paths = sorted(self.directory.glob("*" + SUFFIX))
        for i, path in enumerate(paths):
            self._recover_segment(path, last=(i == len(paths) - 1))
        if self.entries:
            self.start_offset = self.entries[0].base_offset
        elif paths:
            self.start_offset = int(paths[-1].name[:-len(SUFFIX)])
        if not self.segments:
            self._roll(self.start_offset)
        else:
            self._active = open(self.segments[-1], "ab")
            self._active_size = self.segments[-1].stat().st_size
        return self

    def _recover_segment(self, path: Path, last: bool) -> None:
        data = path.read_bytes()
        index = len(self.segments)
        self.segments.append(path)
        base = int(path.name[:-len(SUFFIX)])
        expected = self.entries[-1].last_offset + 1 if self.entries else base
        pos = 0
        while pos < len(data):
            problem = _check_batch(data, pos)
            if problem is None:
                header = read_batch_header(data, pos)
                if (gap := offset_gap(header, expected)) is not None:
                    # Name the offset the log is at: the damaged field is not to be trusted.
                    raise LogCorruption(path, pos, expected, gap)
                self._check_epoch(path, pos, header)
                self._index(BatchEntry(header.base_offset, header.last_offset,
                                       header.partition_leader_epoch, index, pos, header.size, header.is_control))
                expected = header.last_offset + 1
                pos += header.size
                continue
            if last and not _valid_batch_after(data, pos + 1):
                log.warning("metadata log %s: truncating a torn batch at byte %d (%d bytes: %s)",
                            path, pos, len(data) - pos, problem)
                with open(path, "r+b") as f:
                    f.truncate(pos)
                    f.flush()
                    os.fsync(f.fileno())
                return
            raise LogCorruption(path, pos, expected, problem)

    def _check_epoch(self, path: Path, pos: int, header: BatchHeader) -> None:
        """Leader epochs never go down along the log. The CRC does not cover the epoch field,
        so this is the only check a damaged epoch meets."""
        epoch = header.partition_leader_epoch
        if epoch < 0:
            raise LogCorruption(path, pos, header.base_offset, f"negative leader epoch {epoch}")
        if not self.entries or epoch >= self.entries[-1].epoch:
            return
        prev = self.entries[-1]
        before = self.entries[-2] if len(self.entries) > 1 else None
        if before is not None and before.epoch <= epoch:
            # The batch before this one stands out from both neighbours: it is the odd one.
            raise LogCorruption(self.segments[prev.segment], prev.position, prev.base_offset,
                                f"leader epoch {prev.epoch} is above the epochs around it "
                                f"({before.epoch} before, {epoch} after)")
        raise LogCorruption(path, pos, header.base_offset,
                            f"leader epoch {epoch} is below {prev.epoch} of the batch before it "
                            f"(at byte {prev.position} of {self.segments[prev.segment].name})")

    def _index(self, entry: BatchEntry) -> None:
        self.entries.append(entry)
        self._bases.append(entry.base_offset)
        if not self._epochs or entry.epoch != self._epochs[-1]:
            # Start before epoch: a reader on another thread never finds an epoch without it.
            self._epoch_starts.append(entry.base_offset)
            self._epochs.append(entry.epoch)

    # --- writing ----------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        """The offset the next record will get."""
        return self.entries[-1].last_offset + 1 if self.entries else self.start_offset

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def append(self, batches: list[bytes], sync: bool = True) -> None:
        """Write whole batches and fsync them; on any failure nothing of them stays indexed.

        The caller gives batches whose base offsets continue the log; a write that fails is
        cut back off the file so a later append does not land after half a batch. A Raft
        leader appends with ``sync=False`` and calls ``sync`` once for a group of appends.
        """
        if self._unusable is not None:
            raise OSError(errno.EIO, self._unusable)
        with self._lock:
            if self._active_size >= self.segment_bytes:
                self._roll(self.end_offset)
        f = self._active
        if f is None:
            raise OSError(errno.EBADF, "the metadata log is closed")
        start = self._active_size
        try:
            f.write(b"".join(batches))
            f.flush()
            if sync:
                os.fsync(f.fileno())
            else:
                self._unsynced = True
        except OSError:
            self._cut_back(start)
            raise
        with self._lock:
            # The active segment is always the last one, but a delete while the write was
            # under way may have moved its index.
            segment = len(self.segments) - 1
            pos = start
            for raw in batches:
                header = read_batch_header(raw)
                self._index(BatchEntry(header.base_offset, header.last_offset,
                                       header.partition_leader_epoch, segment, pos, len(raw), header.is_control))
                pos += len(raw)
            self.appended_bytes += pos - start
            self._active_size = pos

    def _cut_back(self, size: int) -> None:
        try:
            if self._active is not None:
                self._active.close()
        except OSError:
            pass
        try:
            with open(self.segments[-1], "r+b") as f:
                f.truncate(size)
            self._active = open(self.segments[-1], "ab")
        except OSError as exc:
            # The failed bytes may still be in the file: a later batch written after them would
            # sit behind garbage and be indexed at the wrong position. Refuse every write.
            self._unusable = f"a failed write could not be cut back off {self.segments[-1]}: {exc}"
            log.error("metadata log: %s; refusing further writes", self._unusable)

    def duplicate_active_fd(self) -> int | None:
        """A descriptor of the active segment that stays valid after a roll closes the file,
        for an fsync on another thread (the caller closes it); None if the log is closed."""
        return os.dup(self._active.fileno()) if self._active is not None else None

    def sync(self) -> None:
        """Make every append durable."""
        if self._unsynced and self._active is not None:
            os.fsync(self._active.fileno())
        self._unsynced = False

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset``, a batch boundary: the tail a follower
        wrote in an epoch its leader's log does not continue. Durable on return."""
        with self._lock:
            i = bisect_left(self._bases, offset)
            if i and self.entries[i - 1].last_offset >= offset:
                raise ValueError(f"offset {offset} is inside the batch at {self.entries[i - 1].base_offset}")
            if i == len(self.entries):
                return
            first = self.entries[i]
            self.close()
            for path in self.segments[first.segment + 1:]:
                path.unlink(missing_ok=True)
            del self.segments[first.segment + 1:]
            with open(self.segments[-1], "r+b") as f:
                f.truncate(first.position)
                f.flush()
                os.fsync(f.fileno())
            del self.entries[i:]
            del self._bases[i:]
            while self._epoch_starts and self._epoch_starts[-1] >= offset:
                self._epoch_starts.pop()
                self._epochs.pop()
            self._active = open(self.segments[-1], "ab")
            self._active_size = first.position
            self._unsynced = False
            fsync_dir(self.directory)

    def _roll(self, base_offset: int) -> None:
        if self._active is not None:
            self.sync()
            self._active.close()
        path = self.directory / segment_name(base_offset)
        self._active = open(path, "ab")
        self._active_size = self._active.tell()
        self.segments.append(path)
        fsync_dir(self.directory)

    def close(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None

    # --- reading ----------------------------------------------------------------------------
    def entry_for(self, offset: int) -> int | None:
        """Index of the batch that holds ``offset``, or None outside the log."""
        i = bisect_right(self._bases, offset) - 1
        if i < 0 or offset > self.entries[i].last_offset:
            return None
        return i

    def read(self, offset: int, max_bytes: int, up_to: int | None = None) -> bytes:
        """Whole batches from the one holding ``offset``; at least one batch even if it is
        larger than ``max_bytes`` (as Kafka does), and none past ``up_to``."""
        i = self.entry_for(offset)
        if i is None:
            return b""
        chosen: list[BatchEntry] = []
        total = 0
        while i < len(self.entries):
            e = self.entries[i]
            if up_to is not None and e.last_offset > up_to:
                break
            if chosen and total + e.size > max_bytes:
                break
            chosen.append(e)
            total += e.size
            i += 1
        # Batches of one segment lie back to back: one read per segment, not one per batch.
        out = []
        start = 0
        for j in range(1, len(chosen) + 1):
            if j == len(chosen) or chosen[j].segment != chosen[start].segment:
                first, last = chosen[start], chosen[j - 1]
                with open(self.segments[first.segment], "rb") as f:
                    f.seek(first.position)
                    out.append(f.read(last.position + last.size - first.position))
                start = j
        return b"".join(out)

    def _read_entry(self, e: BatchEntry) -> bytes:
        with open(self.segments[e.segment], "rb") as f:
            f.seek(e.position)
            return f.read(e.size)

    def batches(self, from_offset: int = 0) -> Iterator[RecordBatch]:
        """Decoded batches from the one holding ``from_offset`` to the end."""
        for data, e in self.raw_batches(from_offset):
            yield decode_batch(data, e.position)[0]

    def record_values(self, from_offset: int = 0) -> Iterator[tuple[BatchHeader, list[tuple[int, bytes | None]]]]:
        """(header, [(offset, value)]) per batch, the fast path for replaying the log."""
        for data, e in self.raw_batches(from_offset):
            yield record_values(data, e.position)

    def control_batches(self) -> Iterator[bytes]:
        """The bytes of every control batch in the log, in order."""
        with self._lock:
            entries = [e for e in self.entries if e.control]
        for entry in entries:
            yield self._read_entry(entry)

    def raw_batches(self, from_offset: int) -> Iterator[tuple[bytes, BatchEntry]]:
        """(segment bytes, entry) of each batch from the one holding ``from_offset``; the batch
        is at ``entry.position`` of the bytes, and its file is ``segments[entry.segment]``."""
        i = self.entry_for(max(from_offset, self.start_offset))
        if i is None:
            return
        current = None
        data = b""
        for e in self.entries[i:]:
            if e.segment != current:
                current = e.segment
                data = self.segments[e.segment].read_bytes()
            yield data, e

    def bytes_after(self, offset: int) -> int:
        """Bytes of the batches that end at or after ``offset``."""
        return sum(e.size for e in self.entries if e.last_offset >= offset)

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the end offset of that epoch), for diverging fetches.

        Observers send their last fetched epoch with every fetch, so this looks the epoch up
        in the per-epoch index instead of walking every batch; epochs never go down along
        the log (recovery checks it)."""
        epochs = self._epochs
        count = len(epochs)
        i = bisect_right(epochs, epoch, 0, count) - 1
        if i < 0:
            return -1, -1
        end = self._epoch_starts[i + 1] if i + 1 < count else self.end_offset
        return epochs[i], end

    def restart_at(self, offset: int) -> None:
        """Drop every segment and continue the log at ``offset``: a snapshot there already
        holds more than the log did (Kafka's log does the same when a snapshot overtakes it)."""
        with self._lock:
            self.close()
            for path in self.segments:
                path.unlink(missing_ok=True)
            self.segments, self.entries, self._bases = [], [], []
            self._epoch_starts, self._epochs = [], []
            self.start_offset = offset
            self._roll(offset)

    def delete_segments_before(self, offset: int) -> list[Path]:
        """Delete segments wholly below ``offset`` (covered by a snapshot)."""
        removed = []
        with self._lock:
            while len(self.segments) > 1:
                next_base = int(self.segments[1].name[:-len(SUFFIX)])
                if next_base > offset:
                    break
                removed.append(self.segments.pop(0))
                removed[-1].unlink()
                entries = [BatchEntry(e.base_offset, e.last_offset, e.epoch, e.segment - 1, e.position, e.size, e.control)
                           for e in self.entries if e.segment > 0]
                self._bases = [e.base_offset for e in entries]
                self.entries = entries
            if removed:
                starts: list[int] = []
                epochs: list[int] = []
                for e in self.entries:
                    if not epochs or e.epoch != epochs[-1]:
                        starts.append(e.base_offset)
                        epochs.append(e.epoch)
                self._epoch_starts, self._epochs = starts, epochs
                self.start_offset = self.entries[0].base_offset if self.entries else offset
                fsync_dir(self.directory)
        return removed


def _check_batch(data: bytes, pos: int) -> str | None:
    """Why the batch at ``pos`` is not whole and valid, or None if it is."""
    if len(data) - pos < HEADER_SIZE:
        return "batch header is cut short"
    try:
        header: BatchHeader = read_batch_header(data, pos)
    except DecodeError as exc:
        return exc.reason
    if pos + header.size > len(data):
        return f"batch of {header.size} bytes runs past the end of the file"
    if not batch_crc_ok(data, pos, header):
        return "CRC-32C mismatch"
    return None


def _valid_batch_after(data: bytes, start: int) -> bool:
    """Whether any whole, CRC-valid batch starts after ``start``: then the damage is not a
    torn tail but corruption with good data behind it."""
    pos = data.find(b"\x02", start)
    while pos >= 0:
        candidate = pos - 16  # magic sits 16 bytes into a batch
        if candidate >= start and _check_batch(data, candidate) is None:
            return True
        pos = data.find(b"\x02", pos + 1)
    return False
