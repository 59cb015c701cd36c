"""What a standby of a real three-voter quorum shows, with test brokers heartbeating to the
active controller: its metrics mean what Kafka's mean, and the metadata shell pointed at it
alone finds the leader and reads the log."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from typing import Iterator

import pytest

from protocol.error_codes import Error
from tests.support.processes import BrokerProcess
from tests.support.quorum import create_topic
from tests.support.scrape import KC, Samples, gauge, scrape
from tools.controller_process import ROOT, ControllerProcess, QuorumProcesses
from tools.processes import poll

BROKERS = [1, 2]
METRICS_LINE = re.compile(r"Prometheus metrics at: http://[^:]+:(\d+)/metrics")


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    workdir = tmp_path_factory.mktemp("standby-views")
    q = QuorumProcesses(workdir / "quorum", 3, {
        "controller.quorum.election.timeout.ms": "300", "controller.quorum.fetch.timeout.ms": "600",
        "kraftwire.metrics.port": "0", "kraftwire.metadata.nodes": "controller"}, lifetime_s=240).start()
    fleet = None
    try:
        fleet = BrokerProcess(workdir / "brokers", [
            "--controller", q.bootstrap, "--fleet", str(len(BROKERS)), "--base-id", str(BROKERS[0]),
            "--no-clients", "--heartbeat-interval-ms", "300", "--state-dir", str(workdir / "broker-state")]).start()
        for broker in BROKERS:
            fleet.wait_for_state(broker, "ACTIVE", timeout=30)
        leader = q.members[q.wait_for_leader()]
        poll(lambda: create_topic(leader, "first") in (Error.NONE, Error.TOPIC_ALREADY_EXISTS), 30, interval=0.1,
             message="the leader to accept a topic")
        yield q
    finally:
        if fleet is not None:
            fleet.signal_and_wait(signal.SIGTERM)
        q.stop()


def metrics_port(member: ControllerProcess) -> int:
    match = METRICS_LINE.findall(member.stdout_path.read_text())
    assert match, "the voter printed no metrics endpoint"
    return int(match[-1])


def leader_and_standby(quorum: QuorumProcesses) -> tuple[ControllerProcess, ControllerProcess]:
    leader = quorum.wait_for_leader()
    standby = next(n for n in sorted(quorum.members) if n != leader)
    return quorum.members[leader], quorum.members[standby]


def test_a_standby_reports_its_own_replay(quorum: QuorumProcesses) -> None:
    leader, standby = leader_and_standby(quorum)
    written_after_ms = time.time() * 1000
    assert create_topic(leader, "second") == Error.NONE
    committed = gauge(scrape(metrics_port(leader)), "LastCommittedRecordOffset")

    def caught_up() -> Samples | None:
        samples = scrape(metrics_port(standby))
        return samples if gauge(samples, "LastAppliedRecordOffset") >= committed else None

    samples = poll(caught_up, 60, interval=0.1, message=f"the standby to replay up to offset {committed}")
    assert gauge(samples, "ActiveControllerCount") == 0
    # What the quorum committed and this standby has not replayed yet, whatever the brokers
    # (who heartbeat to the leader alone) last reported.
    assert gauge(samples, "MetadataLag") == max(
        0, gauge(samples, "LastCommittedRecordOffset") - gauge(samples, "LastAppliedRecordOffset"))
    # The append time the leader gave the last batch the standby replayed.
    assert written_after_ms - 1000 <= gauge(samples, "LastAppliedRecordTimestamp") <= time.time() * 1000
    # Commit latency is the active controller's: a standby proposed nothing.
    assert samples[(KC + "metadatacommitlatencyms_count", ())] == 0
    active = scrape(metrics_port(leader))
    assert active[(KC + "metadatacommitlatencyms_count", ())] > 0
    assert active[(KC + "metadatacommitlatencyms_sum", ())] > 0


def shell(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.metadata_shell", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_metadata_shell_given_one_standby_reads_from_the_leader(quorum: QuorumProcesses) -> None:
    _, standby = leader_and_standby(quorum)
    result = shell("--controllers", f"{standby.host}:{standby.port}", "ls", "/image/topics/byName")
    assert result.returncode == 0, result.stderr
    assert "first" in result.stdout.split()
