"""Three kraftwire controllers on loopback form one quorum, with test brokers and a writer.

The leader is killed (SIGKILL) five times in a row, then frozen (SIGSTOP): every write a
leader acknowledged is still there on every voter, the brokers are never fenced, and a new
leader serves writes within the election timeout. Standbys refuse writes (NOT_CONTROLLER)
and name the leader, so the brokers and clients find it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Iterator

import pytest

from protocol.error_codes import Error
from tests.support.observe import unfenced_brokers
from tests.support.processes import BrokerProcess
from tests.support.quorum import TIMEOUT_S, create_topic, describe_quorum, metadata, topic_names
from tests.support.wire import connect
from tools.controller_process import QuorumProcesses
from tools.processes import poll

# Fast elections for the test; docs/quorum.md gives the same advice for production loopback.
QUORUM_TIMING = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "broker.session.timeout.ms": "6000",
    # The brokers here serve no clients: Metadata names the voters' leader as the controller.
    "kraftwire.metadata.nodes": "controller",
}
BROKERS = [1, 2, 3]


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[QuorumProcesses]:
    q = QuorumProcesses(tmp_path / "quorum", 3, QUORUM_TIMING, lifetime_s=240).start()
    try:
        yield q
    finally:
        for member in q.members.values():
            if member.proc is not None and member.proc.poll() is None:
                os.kill(member.pid, signal.SIGCONT)
        q.stop()


@pytest.fixture
def brokers(quorum: QuorumProcesses, tmp_path: Path) -> Iterator[BrokerProcess]:
    fleet = BrokerProcess(tmp_path / "brokers", [
        "--controller", quorum.bootstrap, "--fleet", str(len(BROKERS)), "--base-id", str(BROKERS[0]), "--no-clients",
        "--heartbeat-interval-ms", "500", "--state-dir", str(tmp_path / "broker-state")]).start()
    try:
        for broker in BROKERS:
            fleet.wait_for_state(broker, "ACTIVE", timeout=30)
        yield fleet
    finally:
        fleet.signal_and_wait(signal.SIGTERM)


def unfenced(member) -> list[int]:
    with connect(member, timeout=TIMEOUT_S) as c:
        return unfenced_brokers(c)


def write_once(member, name: str) -> None:
    """Create a topic on a voter that has just been elected: it answers NOT_CONTROLLER until
    its first record of the epoch is committed, as a client sees it."""
    # An attempt cut off after its commit leaves the topic there for the next one.
    done = (Error.NONE, Error.TOPIC_ALREADY_EXISTS)
    poll(lambda: create_topic(member, name) in done or None, 10, interval=0.05,
         message=f"the new leader to accept {name}")


def test_one_leader_is_elected_and_standbys_point_at_it(quorum, brokers):
    leader = quorum.wait_for_leader()
    write_once(quorum.members[leader], "first")
    for node, member in quorum.members.items():
        if node == leader:
            continue
        # A standby refuses a write and leaves nothing behind ...
        assert create_topic(member, "refused") == Error.NOT_CONTROLLER
        # ... names the leader, and serves what the quorum committed.
        assert describe_quorum(member).error_code == Error.NOT_LEADER_OR_FOLLOWER
        assert describe_quorum(member).leader_id == leader
        poll(lambda: "first" in topic_names(member), 10, message=f"voter {node} to replay the topic")
        assert metadata(member).controller_id == leader
        assert "refused" not in topic_names(member)
    voters = {v.replica_id: v.log_end_offset for v in describe_quorum(quorum.members[leader]).current_voters}
    assert sorted(voters) == sorted(quorum.members) and all(end > 0 for end in voters.values())


def test_no_acknowledged_write_is_lost_when_the_leader_is_killed_or_frozen(quorum, brokers):
    acked: list[str] = []

    def write_through(leader: int, prefix: str, count: int) -> None:
        for i in range(count):
            name = f"{prefix}-{i}"
            if create_topic(quorum.members[leader], name) == Error.NONE:
                acked.append(name)

    for round_ in range(5):
        leader = quorum.wait_for_leader()
        write_through(leader, f"round{round_}", 5)
        quorum.members[leader].kill9()
        successor = quorum.wait_for_leader(frozenset({leader}))
        write_once(quorum.members[successor], f"after-kill-{round_}")
        acked.append(f"after-kill-{round_}")
        quorum.members[leader].start()

    # Frozen rather than killed: the others elect a leader; the frozen one, woken, follows.
    leader = quorum.wait_for_leader()
    frozen = quorum.members[leader]
    os.kill(frozen.pid, signal.SIGSTOP)
    successor = quorum.wait_for_leader(frozenset({leader}))
    write_once(quorum.members[successor], "while-frozen")
    acked.append("while-frozen")
    # The time passing is what is tested: frozen for longer than its check-quorum time (1.5 fetch
    # timeouts), whatever the election took.
    time.sleep(1.5 * int(QUORUM_TIMING["controller.quorum.fetch.timeout.ms"]) / 1000)
    os.kill(frozen.pid, signal.SIGCONT)
    # Woken, it has not heard from a majority within the fetch timeout: it resigns before it
    # answers, and no longer names itself as the controller (check quorum).
    assert metadata(frozen).controller_id != leader
    poll(lambda: describe_quorum(frozen).leader_id == successor or None, 10, message="the woken voter to follow")
    assert create_topic(frozen, "to-the-old-leader") == Error.NOT_CONTROLLER

    for node, member in quorum.members.items():
        poll(lambda: set(acked) <= topic_names(member) or None, 20,
             message=f"voter {node} to hold every acknowledged topic")
    assert unfenced(quorum.members[quorum.wait_for_leader()]) == BROKERS
    # The brokers went from FENCED to ACTIVE once, at their registration, and never back.
    for broker in BROKERS:
        assert [t[2] for t in brokers.transitions(broker)] == ["FENCED", "ACTIVE"], brokers.stderr()[-2000:]


SNAPSHOTTING = {**QUORUM_TIMING, "metadata.log.segment.bytes": "4096",
                "metadata.log.max.record.bytes.between.snapshots": "4096"}


def test_a_voter_behind_the_leaders_log_start_catches_up_from_its_snapshot(tmp_path):
    q = QuorumProcesses(tmp_path / "quorum", 3, SNAPSHOTTING, lifetime_s=240).start()
    fleet = BrokerProcess(tmp_path / "brokers", [
        "--controller", q.bootstrap, "--fleet", "3", "--base-id", "1", "--no-clients", "--heartbeat-interval-ms", "500",
        "--state-dir", str(tmp_path / "broker-state")]).start()
    try:
        for broker in BROKERS:
            fleet.wait_for_state(broker, "ACTIVE", timeout=30)
        leader = q.wait_for_leader()
        behind = next(node for node in q.members if node != leader)
        q.members[behind].stop()
        # Enough writes for the others to snapshot twice and delete the segments below.
        for i in range(60):
            write_once(q.members[q.wait_for_leader(frozenset({behind}))], f"while-away-{i}")
        leader = q.wait_for_leader(frozenset({behind}))
        partition_dir = q.members[leader].data_dir / "__cluster_metadata-0"
        poll(lambda: not (partition_dir / "00000000000000000000.log").exists() or None, 20,
             message="the leader to delete its first segment after snapshots")
        q.members[behind].start()
        poll(lambda: {f"while-away-{i}" for i in range(60)} <= topic_names(q.members[behind]) or None, 30,
             message="the voter that was away to catch up")
        assert "installed the leader's snapshot" in q.members[behind].stderr_text()
    finally:
        fleet.signal_and_wait(signal.SIGTERM)
        q.stop()


def _scrape(member) -> dict[str, float]:
    import re
    import urllib.request

    url = re.search(r"Prometheus metrics at: (\S+)", member.stdout_path.read_text())[1]
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(r"^(\w+) (\S+)$", text, re.M)}


def test_metrics_tell_the_active_controller_and_the_quorums_leader(tmp_path):
    q = QuorumProcesses(tmp_path / "quorum", 3, {**QUORUM_TIMING, "kraftwire.metrics.port": "0"},
                        lifetime_s=120).start()
    try:
        leader = q.wait_for_leader()
        for node, member in q.members.items():
            # A follower hears of the leader (BeginQuorumEpoch) before its first fetch brings the
            # high watermark.
            values = poll(lambda: (v := _scrape(member))["kafka_server_raft_metrics_current_leader"] == leader
                          and v["kafka_server_raft_metrics_high_watermark"] > 0 and v or None, 60,
                          message=f"voter {node}'s metrics to name the leader and a high watermark")
            assert values["kafka_controller_kafkacontroller_activecontrollercount"] == (node == leader)
            assert values["kafka_server_raft_metrics_current_epoch"] >= 1
    finally:
        q.stop()
