"""When the controller snapshots its state: after enough bytes were appended to the log since
the last snapshot, or when asked (SIGUSR1), at a moment when the applied state is all
committed. The snapshot itself is written by a forked child (``server.snapshot_writer``), and
the log below the older kept snapshot is removed once it is written."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from server.controller.quorum_controller import QuorumController
from server.metalog.raft_log import DiskRaftLog
from server.metalog.segments import MetadataLog
from server.metalog.snapshots import SnapshotId, oldest_kept
from server.quorum import QuorumReplication
from server.snapshot_writer import fork_snapshot

log = logging.getLogger("kraftwire.server")

# A snapshot that could not be written is tried again after this, doubling up to the limit.
SNAPSHOT_RETRY_S = 1.0
SNAPSHOT_RETRY_MAX_S = 60.0


class Shell(Protocol):
    """What the scheduler needs of the server; read anew, as an installed snapshot replaces the
    controller."""

    @property
    def controller(self) -> QuorumController: ...
    @property
    def replication(self) -> QuorumReplication: ...


class SnapshotScheduler:
    def __init__(self, shell: Shell, log: MetadataLog, raft_log: DiskRaftLog, latest: SnapshotId | None,
                 bytes_between: int, writer_delay_s: float) -> None:
        """``latest``: the snapshot loaded at start-up; ``bytes_between``:
        metadata.log.max.record.bytes.between.snapshots."""
        self.shell = shell
        # The newest snapshot on disk: written here, loaded at start-up or installed from the
        # leader (the server sets it then); fetchers behind the log start are sent to it.
        self.latest = latest
        self.log = log
        self.raft_log = raft_log
        self.bytes_between = bytes_between
        self.writer_delay_s = writer_delay_s
        self._wanted = False
        self._writing = False
        # After a failed snapshot the next try waits, doubling up to a limit: a full disk
        # would otherwise be retried at every commit.
        self._failures = 0
        self._not_before = 0.0
        # Bytes already in the log past the snapshot count towards the next one.
        self._mark = -log.bytes_after(latest.end_offset if latest else 0)

    def request(self) -> None:
        """Take a snapshot at the next moment the applied state is all committed."""
        self._wanted = True
        self.committed(self.shell.replication.commits.committed_offset)

    def committed(self, committed: int) -> None:
        """The log committed up to ``committed``: snapshot now if it is time."""
        controller = self.shell.controller
        if self._writing or committed != controller.last_applied_offset:
            return
        if time.monotonic() < self._not_before:
            return
        since = self.log.appended_bytes - self._mark
        if not self._wanted and since < self.bytes_between:
            return
        self._wanted = False
        self._writing = True
        snapshot = SnapshotId(committed + 1, self._epoch_at(committed))
        # The child forked now sees exactly the committed state, however long it takes.
        wait = fork_snapshot(self.log.directory, snapshot, controller.snapshot_records, self.writer_delay_s)
        task = asyncio.get_running_loop().run_in_executor(None, wait)
        task.add_done_callback(lambda f: self._written(f, snapshot))

    def _epoch_at(self, offset: int) -> int:
        """The leader epoch of the batch holding ``offset``: a snapshot is named after the
        epoch of its last record, as Kafka names them."""
        i = self.log.entry_for(offset)
        return self.log.entries[i].epoch if i is not None else max(self.shell.replication.epoch, 0)

    def _written(self, task: asyncio.Future[tuple[int, int]], snapshot: SnapshotId) -> None:
        self._writing = False
        if task.exception() is not None:
            self._failures += 1
            backoff = min(SNAPSHOT_RETRY_MAX_S, SNAPSHOT_RETRY_S * 2 ** (self._failures - 1))
            self._not_before = time.monotonic() + backoff
            log.error("snapshot %s failed: %s; trying again in %.0f s", snapshot.file_name, task.exception(), backoff)
            return
        self._failures = 0
        self._mark = self.log.appended_bytes
        self.latest = snapshot
        self.raft_log.snapshot_taken(snapshot)
        # The log below the older kept snapshot goes: the newest can fall back to that one.
        kept = oldest_kept(self.log.directory)
        removed = self.log.delete_segments_before(kept.end_offset if kept else snapshot.end_offset)
        size, count = task.result()
        log.info("wrote snapshot %s (%d records, %d bytes); removed %d old segments",
                 snapshot.file_name, count, size, len(removed))
