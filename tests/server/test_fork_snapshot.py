"""Snapshots written by a forked child: the state as it was at the fork, whatever the parent
does meanwhile, and the child's failure reported to the parent."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.metalog.snapshot_file import read_snapshot_file
from server.metalog.snapshots import SnapshotId
from server.periodic import fork_snapshot
from tests.server.test_replication import Cluster


def topic_names(path: Path) -> set[str]:
    return {r.name for r, _ in read_snapshot_file(path) if r.NAME == "TopicRecord"}


def test_the_child_writes_the_state_as_it_was_at_the_fork(tmp_path: Path) -> None:
    c = Cluster()
    c.brokers(1, 2)
    c.topic("before", [[1, 2]] * 3)
    snapshot = SnapshotId(c.qc.next_offset, 1)
    expected = list(c.qc.snapshot_records())
    wait = fork_snapshot(tmp_path, snapshot, c.qc.snapshot_records)
    c.topic("after", [[2, 1]])  # the parent goes on changing its state
    size, count = wait()
    path = tmp_path / snapshot.file_name
    assert size == path.stat().st_size and count == len(expected)
    assert topic_names(path) == {"before"}


def test_a_failing_child_is_reported(tmp_path: Path) -> None:
    def broken():
        raise ValueError("no records today")
        yield  # a generator, as snapshot_records is

    wait = fork_snapshot(tmp_path, SnapshotId(10, 1), broken)
    with pytest.raises(OSError, match="ValueError: no records today"):
        wait()
