"""Fleets of test brokers in one process, with and without faults."""

from __future__ import annotations

import re
import signal

import pytest

from tests.support.observe import eligible_leaders, unfenced_brokers, wait_until
from tests.support.wire import connect

# The admin client is sent to the controller itself: with the default (brokers in Metadata) it
# would pick a broker that the faults may have just killed, and fail to connect.
FAULTY_CLUSTER = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                  "eligible.leader.replicas.enabled": "true", "min.insync.replicas": "2",
                  "kraftwire.metadata.nodes": "controller"}
FAULT_COUNTS = re.compile(r"faults kill (\d+), pause (\d+), restart (\d+), skipped (\d+)")


def test_a_fleet_of_200_becomes_active_and_shuts_down_cleanly(controller, broker_factory, tmp_path):
    fleet = broker_factory("--fleet", "200", "--base-id", "100", "--state-dir", str(tmp_path / "fleet"),
                           "--log-level", "WARNING")
    wait_until(lambda: "(ACTIVE 200;" in fleet.summary(), 60, "200 active brokers in the summary")
    line = fleet.summary()
    assert re.search(r"heartbeats sent \d+, answered \d+, errors 0", line), line
    assert re.search(r"heartbeat latency ms p50 [\d.]+ p99 [\d.]+ max [\d.]+", line), line
    with connect(controller) as admin:
        assert unfenced_brokers(admin) == list(range(100, 300))
    assert fleet.signal_and_wait(signal.SIGTERM, timeout=60) == 0, fleet.stderr()[-2000:]
    assert "(SHUTDOWN 200;" in fleet.stdout().splitlines()[-1]
    assert len(list((tmp_path / "fleet").glob("broker-*/.kafka_cleanshutdown"))) == 200
    with connect(controller) as admin:
        assert unfenced_brokers(admin) == []


@pytest.mark.controller_properties(FAULTY_CLUSTER)
def test_faults_kill_pause_and_restart_brokers_and_the_cluster_recovers(controller, broker_factory, tmp_path):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    fleet = broker_factory("--fleet", "9", "--state-dir", str(tmp_path / "fleet"), "--heartbeat-interval-ms",
                           "500", "--mean-catch-up-s", "0.5", "--faults", "3", "--fault-max-s", "5",
                           "--seed", "5")
    wait_until(lambda: sum(1 for i in range(1, 10) if fleet.state(i) is not None) == 9, 20, "9 brokers started")
    admin = KafkaAdminClient(bootstrap_servers=f"{controller.host}:{controller.port}", request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("events", 12, 3)])
    finally:
        admin.close()

    def struck() -> bool:
        counts = FAULT_COUNTS.search(fleet.summary())
        return counts is not None and min(int(counts[1]), int(counts[2]), int(counts[3])) >= 1

    wait_until(struck, 60, "at least one kill, pause and restart")
    controller.wait_for_stderr(r"fencing brokers \[", timeout=30)
    # Stop the faults: a controlled shutdown of whoever is up, then exit 0.
    assert fleet.signal_and_wait(signal.SIGTERM, timeout=60) == 0, fleet.stderr()[-3000:]
    assert "ISR [" in fleet.stderr()  # leaders shrank and grew ISRs through it all
    with connect(controller) as admin:
        # A broker killed just before the end keeps its lease until the session times out.
        wait_until(lambda: unfenced_brokers(admin) == [], 10, "every broker fenced")
        # Everyone shut down (or was killed): a partition left without a leader remembers who
        # may lead it again, in its eligible leader replicas or its last known ones.
        for leader, elr, last_known in eligible_leaders(admin, "events").values():
            assert leader != -1 or elr or last_known, (leader, elr, last_known)
