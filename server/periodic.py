"""The active controller's own work, driven on the event loop a slice at a time.

The controller says what the next bounded slice of its work is (``next_slice``: what commands
left to write later, then fencing the brokers whose sessions expired);
this shell applies nothing itself: it hands each slice to the commit path and comes back for
the next one on a later turn of the loop, so that heartbeats and other requests are answered
between slices. At most IN_FLIGHT slices wait for their commit at any time: the memory held for
uncommitted work (records to write, changes that could be undone) stays bounded however much
work there is, and a response that waits for the state it saw waits for little.

Snapshots are built the same way, off the loop: a forked child writes the state as it was at
the fork.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterable, Iterator, NoReturn, Protocol

from protocol.generated.metadata.fence_broker_record import FenceBrokerRecord
from server.child_process import close_inherited_fds, die_with_parent
from server.controller.quorum_controller import QuorumController
from server.controller.result import SLICE_RECORDS, VersionedRecord
from server.leadership import Leadership
from server.metalog.commit_path import CommitFailed, CommitPath
from server.metalog.snapshots import SnapshotId, write_snapshot

log = logging.getLogger("kraftwire.server")

# Slices applied but not yet known to be committed, at most: while one is written the next is
# built, and what is held for them (records, undo entries) stays bounded. A deeper pipeline
# fenced no faster and made heartbeats, which wait for the state they saw, wait longer.
IN_FLIGHT = 2


class Shell(Protocol):
    """What the driver needs of the server; each is read anew, as an installed snapshot replaces
    the controller."""

    @property
    def controller(self) -> QuorumController: ...
    @property
    def committer(self) -> CommitPath: ...
    @property
    def leadership(self) -> Leadership: ...


class SlicedWork:
    """Writes the controller's own work as Kafka's periodic tasks do: started by the lease
    timer, and going on at once, slice after slice, while more remains."""

    def __init__(self, shell: Shell, slice_records: int = SLICE_RECORDS) -> None:
        self.shell = shell
        self.slice_records = slice_records
        self._task: asyncio.Task[None] | None = None

    def tick(self) -> None:
        """The lease timer fired: start writing unless it is already under way."""
        if self._task is None or self._task.done():
            if self.shell.leadership.active:
                self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        waiting: deque[int] = deque()  # last offsets of the slices not known to be committed
        while self.shell.leadership.active:
            applied = self.shell.controller.next_slice(self.slice_records)
            if applied is None:
                return
            last, _ = applied.records[-1]
            if isinstance(last, FenceBrokerRecord):
                # Worded as the README and operators' greps know it.
                log.info("fencing brokers [%d]: their sessions expired", last.id)
            committer = self.shell.committer
            committer.submit(applied.records, applied.base_offset)
            # Each slice leaves new long-lived state (partitions' new lists); counted by the
            # cyclic collector, a million of them made every full collection a pause of
            # hundreds of milliseconds. They move out of its sight, as what start-up loads
            # does; the price is that a reference cycle among them is never collected.
            gc.freeze()
            waiting.append(applied.last_offset)
            committed = committer.wait(waiting.popleft()) if len(waiting) >= IN_FLIGHT else None
            if committed is None:
                await asyncio.sleep(0)
                continue
            try:
                await committed
            except CommitFailed:
                return  # leadership was lost (or resigned after a failed write); the timer starts again

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


def fork_snapshot(partition_dir: Path, snapshot: SnapshotId,
                  records: Callable[[], Iterable[VersionedRecord]],
                  delay_s: float = 0.0) -> Callable[[], tuple[int, int]]:
    """Start writing a snapshot of the state as it is at this moment, without holding the loop
    while its records are built: a forked child sees the state copy-on-write, frozen at the
    fork, builds and writes the records and exits, while this process goes on changing its
    own. Returns the wait for the child, to run off the loop: (bytes, records) written, or
    OSError with the child's reason. ``delay_s``: the child waits this long before it starts
    (for tests that need a writer still at work)."""
    read_end, write_end = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            _snapshot_child(parent, write_end, partition_dir, snapshot, records, delay_s)
        finally:
            # Whatever escaped (a write to the pipe of a parent that died raises
            # BrokenPipeError): returning would run the copied event loop as a second controller.
            os._exit(1)
    os.close(write_end)

    def wait() -> tuple[int, int]:
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise OSError(message or f"the snapshot writer ended with status {status}")
        size, count = message.split()
        return int(size), int(count)
    return wait


def _snapshot_child(parent: int, write_end: int, partition_dir: Path, snapshot: SnapshotId,
                    records: Callable[[], Iterable[VersionedRecord]], delay_s: float) -> NoReturn:
    """The forked child's whole life: no loop, no logging, nothing but the file and the pipe
    to the parent, and it dies with the parent."""
    gc.disable()  # a collection would touch, and so copy, every page of the state
    die_with_parent(parent)
    close_inherited_fds(keep=write_end)
    status, message = 0, ""
    try:
        time.sleep(delay_s)
        counted = _Counted(records())
        message = f"{write_snapshot(partition_dir, snapshot, counted)} {counted.count}"
    except BaseException as exc:  # every failure goes to the parent, which logs it
        status, message = 1, f"{type(exc).__name__}: {exc}"
    os.write(write_end, message.encode())
    os._exit(status)


class _Counted:
    def __init__(self, records: Iterable[VersionedRecord]) -> None:
        self.records = records
        self.count = 0

    def __iter__(self) -> Iterator[VersionedRecord]:
        for record in self.records:
            self.count += 1
            yield record
