"""Snapshots written by a forked child: the state as it was at the fork, whatever the parent
does meanwhile, the child's failure reported to the parent, and no child left behind when the
parent is killed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from protocol.client import KafkaClient
from protocol.generated.messages.metadata_request import MetadataRequest
from server.config import EMBEDDED_NODE_ID, SNAPSHOT_WRITER_DELAY_KEY
from server.metalog.snapshot_file import read_snapshot_file
from server.metalog.snapshots import SnapshotId
from server.snapshot_writer import fork_snapshot
from tests.support.replication import Cluster
from tools.controller_process import ControllerProcess
from tools.processes import poll


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


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            # The command name in parentheses may hold spaces: the fields after it are fixed.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie that nobody reaped yet."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the writer in /proc")
def test_a_writer_dies_with_its_controller_and_frees_the_port(tmp_path: Path) -> None:
    """kill -9 of the controller while its snapshot writer is at work: the writer goes with it,
    so it never runs on as a second controller, and the controller starts again on its port."""
    controller = ControllerProcess(tmp_path, {SNAPSHOT_WRITER_DELAY_KEY: "600000"}).start()
    port = controller.port
    writers: list[int] = []
    try:
        os.kill(controller.pid, signal.SIGUSR1)
        writers = poll(lambda: children(controller.pid), 60, message="the forked snapshot writer")
        controller.kill9()
        poll(lambda: not any(alive(pid) for pid in writers), 60, message=f"the writers {writers} to end")
        controller.start()
        assert controller.port == port
        with KafkaClient(controller.host, controller.port, client_id="fork-test") as client:
            assert client.request(MetadataRequest(topics=None), 12).controller_id == EMBEDDED_NODE_ID
    finally:
        controller.stop()
        for pid in writers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
