"""The metadata log on disk as the Raft core sees it (``server.raft.log.RaftLog``).

Appends are written at once but fsynced only when the core flushes, so a leader gathers the
appends of a linger period into one fsync; a voter only ever reports what it has flushed. The
leader's fsync runs on a writer thread (``begin_flush``), so the event loop keeps serving while
the disk works; a follower's is done before it fetches again, as it reports its log end.
Snapshots are the checkpoint files beside the segments: those this node takes from its own
committed state, and one fetched whole from the leader when this log is too far behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from protocol.message import Message
from protocol.errors import DecodeError
from protocol.records import HEADER_SIZE, read_batch_header
from server.metalog.durable import write_atomically
from server.raft.types import OffsetAndEpoch
from server.raft.voters import IN_SNAPSHOT, quorum_messages
from server.metalog.segments import MetadataLog
from server.metalog.snapshots import SnapshotId, list_snapshots


log = logging.getLogger("kraftwire.metalog")


def _fsync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _snapshot_quorum_messages(path: Path) -> list[Message]:
    """The kraft.version and voter set of a snapshot file: Kafka writes them in its first
    batch, beside the header, so only that batch is read."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_SIZE)
            if len(head) < HEADER_SIZE:
                return []
            rest = f.read(read_batch_header(head).size - HEADER_SIZE)
        return [message for _, message in quorum_messages(head + rest)]
    except (OSError, DecodeError):
        # An unreadable snapshot is the controller's load to refuse or set aside, with its reason.
        return []


class DiskRaftLog:
    def __init__(self, log: MetadataLog) -> None:
        self.log = log
        self._flushed = log.end_offset
        self.on_flushed: Callable[[], None] = lambda: None  # a background flush completed
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="raft-log-flush")
        self._flushing = False
        self._flush_again = False  # appends came while a flush ran: flush once more after it
        self._truncations = 0  # a flush begun before a truncation may not count
        newest = list_snapshots(log.directory)[-1:]
        self._snapshot: OffsetAndEpoch | None = OffsetAndEpoch(newest[0].end_offset, newest[0].epoch) if newest else None

    def snapshot_taken(self, snapshot: SnapshotId) -> None:
        """The shell wrote a snapshot of its committed state."""
        if self._snapshot is None or (snapshot.end_offset, snapshot.epoch) > self._snapshot:
            self._snapshot = OffsetAndEpoch(snapshot.end_offset, snapshot.epoch)

    @property
    def start_offset(self) -> int:
        return self.log.start_offset

    @property
    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return self._snapshot

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def last_epoch(self) -> int:
        if self.log.entries:
            return self.log.last_epoch
        return self._snapshot.epoch if self._snapshot is not None else 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    def append(self, batches: list[bytes]) -> None:
        self.log.append(batches, sync=False)

    def flush(self) -> None:
        self.log.sync()
        self._flushed = self.log.end_offset

    def begin_flush(self) -> None:
        if self._flushing:
            self._flush_again = True
            return
        if self._flushed == self.log.end_offset:
            return
        fd = self.log.duplicate_active_fd()
        if fd is None:
            self.flush()
            return
        self._flushing = True
        end, truncations = self.log.end_offset, self._truncations
        task = asyncio.get_running_loop().run_in_executor(self._writer, _fsync_and_close, fd)
        task.add_done_callback(lambda f: self._flush_done(f, end, truncations))

    def _flush_done(self, task: asyncio.Future[None], end: int, truncations: int) -> None:
        self._flushing = False
        if self._flush_again:
            # What was appended meanwhile goes in the next fsync at once: the group commit.
            self._flush_again = False
            self.begin_flush()
        if task.exception() is not None:
            # Not counted: the followers can still commit, and the next flush tries again.
            log.error("metadata log fsync failed: %s", task.exception())
            return
        if truncations == self._truncations:
            self._flushed = max(self._flushed, min(end, self.log.end_offset))
        self.on_flushed()

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        self.flush()

    def truncate_to(self, offset: int) -> None:
        self._truncations += 1
        self.log.truncate_to(offset)
        self._flushed = min(self._flushed, self.log.end_offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found, end = self.log.epoch_end_offset(epoch)
        if found >= 0:
            return OffsetAndEpoch(end, found)
        if self._snapshot is not None and self._snapshot.epoch <= epoch:
            return OffsetAndEpoch(self.log.start_offset, self._snapshot.epoch)
        return OffsetAndEpoch(self.log.start_offset, 0)

    def read(self, from_offset: int, max_bytes: int, up_to: int | None = None) -> bytes:
        return self.log.read(from_offset, max_bytes, up_to)

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        path = self.log.directory / SnapshotId(*snapshot).file_name
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                f.seek(position)
                return f.read(max_bytes), size
        except FileNotFoundError:
            return None

    def quorum_messages(self) -> list[tuple[int, Message]]:
        found: list[tuple[int, Message]] = []
        if self._snapshot is not None:
            path = self.log.directory / SnapshotId(*self._snapshot).file_name
            found.extend((IN_SNAPSHOT, message) for message in _snapshot_quorum_messages(path))
        for raw in self.log.control_batches():
            found.extend(quorum_messages(raw))
        return found

    def install_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        write_atomically(self.log.directory / SnapshotId(*snapshot).file_name, data)
        self._truncations += 1
        self.log.restart_at(snapshot.offset)
        self._snapshot = snapshot
        self._flushed = snapshot[0]
