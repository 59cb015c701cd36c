"""Snapshots written off the event loop: a forked child writes the state as it was at the fork
(``server.child_process`` keeps such a child from outliving, or standing in for, its parent).
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, NoReturn

from server.child_process import close_inherited_fds, die_with_parent
from server.controller.result import VersionedRecord
from server.metalog.snapshots import SnapshotId, write_snapshot


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
