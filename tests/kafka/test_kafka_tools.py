"""Kafka's own tools at kraftwire controllers and on their directories, and kraftwire's tools and
controller on a directory that a Kafka controller wrote in the same test.

Online: kafka-metadata-quorum (describe, add-controller, remove-controller) and kafka-features
(describe, upgrade) at a dynamic kraftwire quorum, asked of any controller. Offline:
kafka-dump-log, kafka-metadata-shell and kafka-storage info on a kraftwire controller's files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.generated.messages.metadata_request import MetadataRequest
from server.metalog.snapshots import list_snapshots
from tests.support.kafka import KafkaServer, kafka, run_tool
from tests.support.processes import KafkaDirController
from tests.support.quorum import DYNAMIC, SINGLE, ControllerQuorum
from tests.support.wire import connect
from tools.controller_process import ROOT
from tools.kafka_dist import KAFKA_3_9, KAFKA_4
from tools.processes import poll

WAIT_S = 120.0
FEATURE_LINE = re.compile(r"Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (.+?)\s+"
                          r"FinalizedVersionLevel: (\S+)\s+Epoch: (\d+)")


def features(dist, address: str) -> dict[str, str]:
    """Feature -> finalized level, as kafka-features describe prints it."""
    out = run_tool(dist, "kafka-features", "--bootstrap-controller", address, "describe").stdout
    return {m[0]: m[3] for m in FEATURE_LINE.findall(out)}


def voters(quorum: ControllerQuorum, address: str) -> dict[int, str]:
    return {v["id"]: v["directoryId"] for v in json.loads(quorum.status(address)["CurrentVoters"])}


def test_quorum_and_feature_tools_at_a_dynamic_kraftwire_quorum(tmp_path: Path) -> None:
    dist = kafka(KAFKA_4)
    # Built with Kafka's add-controller; formatted at 3.9, the first release of kraft.version 1.
    quorum = ControllerQuorum(DYNAMIC, tmp_path, "3.9-IV0", dist).start()
    try:
        # Any controller answers for the quorum, a standby as well as the leader.
        leader = quorum.wait_for_leader(timeout=WAIT_S)
        for port in quorum.ports.values():
            status = quorum.status(f"127.0.0.1:{port}")
            assert int(status["LeaderId"]) == leader
        assert set(voters(quorum, quorum.bootstrap)) == set(quorum.members)
        assert all(voters(quorum, quorum.bootstrap).values())

        replication = run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller", quorum.bootstrap,
                               "describe", "--replication").stdout.splitlines()
        rows = {int(line.split()[0]): line.split()[-1] for line in replication[1:] if line.strip()}
        assert rows[leader] == "Leader" and sorted(rows) == sorted(quorum.members)
        assert {rows[n] for n in quorum.members if n != leader} == {"Follower"}

        finalized = features(dist, quorum.bootstrap)
        assert finalized["metadata.version"] == "3.9-IV0" and finalized["kraft.version"] == "1"
        run_tool(dist, "kafka-features", "--bootstrap-controller", quorum.bootstrap, "upgrade",
                 "--release-version", "4.0-IV3")
        poll(lambda: features(dist, quorum.bootstrap)["metadata.version"] == "4.0-IV3", WAIT_S, interval=1.0,
             message="metadata.version upgraded")

        removed = max(n for n in quorum.members if n != leader)
        directory = voters(quorum, quorum.bootstrap)[removed]
        done = run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller", quorum.bootstrap,
                        "remove-controller", "--controller-id", str(removed), "--controller-directory-id", directory)
        assert re.search(rf"Removed\s+KRaft controller {removed}\b", done.stdout), done.stdout
        poll(lambda: set(voters(quorum, quorum.bootstrap)) == set(quorum.members) - {removed}, WAIT_S,
             interval=1.0, message=f"controller {removed} removed")
    finally:
        quorum.stop()


@pytest.mark.parametrize("version", [KAFKA_4, KAFKA_3_9])
def test_kafka_offline_tools_read_a_kraftwire_directory(tmp_path: Path, version: str) -> None:
    dist = kafka(version)
    quorum = ControllerQuorum(SINGLE, tmp_path, "3.9-IV0", dist)
    controller = quorum.members[3000]
    # Kafka's tools find a controller's directories in log.dirs, as Kafka's quickstart sets them.
    controller.properties["log.dirs"] = str(controller.data_dir)
    broker = KafkaServer(dist, tmp_path / "broker", 1, quorum.for_brokers,
                         {"offsets.topic.replication.factor": "1"})
    try:
        quorum.start()
        broker.format(quorum.cluster_id)
        broker.start().wait_started()
        run_tool(dist, "kafka-topics", "--bootstrap-server", broker.address, "--create", "--topic", "offline",
                 "--partitions", "2", "--replication-factor", "1")
        partition = controller.data_dir / "__cluster_metadata-0"
        os.kill(controller.pid, signal.SIGUSR1)
        poll(lambda: list_snapshots(partition), WAIT_S, message="a snapshot")
        controller.wait_for_stderr(r"wrote snapshot", timeout=WAIT_S)
    finally:
        broker.kill9()
        quorum.stop()

    (segment,) = sorted(partition.glob("*.log"))
    (snapshot,) = sorted(partition.glob("*.checkpoint"))
    for path in (segment, snapshot):
        dumped = run_tool(dist, "kafka-dump-log", "--cluster-metadata-decoder", "--files", str(path)).stdout
        payloads = [json.loads(line.split("payload: ", 1)[1]) for line in dumped.splitlines() if "payload: {" in line]
        topics = [p["data"]["name"] for p in payloads if p.get("type") == "TOPIC_RECORD"]
        assert topics == ["offline"], dumped[-3000:]
        assert "Exception" not in dumped
        shown = run_tool(dist, "kafka-metadata-shell", "--snapshot", str(path), "ls", "/image/topics/byName").stdout
        assert shown.split() == ["offline"]

    assert controller.config_path is not None
    info = run_tool(dist, "kafka-storage", "info", "-c", str(controller.config_path)).stdout
    assert f"cluster.id={quorum.cluster_id}" in info and "node.id=3000" in info, info
    assert "Found problem" not in info, info


# A Kafka 4.3 cluster formatted at its own default (4.3-IV0) writes RegisterBrokerRecord v4,
# which kraftwire does not know: it refuses such a directory naming the record and its offset
# (docs/compatibility.md), so the 4.x controller here is formatted at kraftwire's newest level.
@pytest.mark.parametrize("version,release", [(KAFKA_3_9, None), (KAFKA_4, "4.2-IV1")])
def test_kraftwire_reads_the_directory_a_kafka_controller_wrote(tmp_path: Path, version: str,
                                                                release: str | None) -> None:
    dist = kafka(version)
    node = KafkaServer(dist, tmp_path / "kafka", 1, None)
    cluster_id = run_tool(dist, "kafka-storage", "random-uuid").stdout.strip()
    node.format(cluster_id, release)
    try:
        node.start().wait_started()
        run_tool(dist, "kafka-topics", "--bootstrap-server", node.address, "--create", "--topic", "from-kafka",
                 "--partitions", "3", "--replication-factor", "1")
    finally:
        node.stop()

    segments = sorted((node.metadata_dir / "__cluster_metadata-0").glob("*.log"))
    dumped = subprocess.run([sys.executable, "-m", "tools.dump_log", "--cluster-metadata-decoder",
                             "--files", *map(str, segments)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dumped.returncode == 0, dumped.stderr
    assert '"name":"from-kafka"' in dumped.stdout.replace(" ", "")
    shell = subprocess.run([sys.executable, "-m", "tools.metadata_shell", "-d", str(node.metadata_dir),
                            "ls", "/image/topics/byName"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0, shell.stderr
    assert "from-kafka" in shell.stdout.split()

    # A kraftwire controller goes on from the Kafka controller's directory.
    controller = KafkaDirController(tmp_path / "kraftwire", node.metadata_dir, [])
    try:
        controller.start()
        assert controller.cluster_id == cluster_id
        with connect(controller) as client:
            served = client.request(MetadataRequest(topics=None), 12)
        topics = {t.name: len(t.partitions) for t in served.topics}
        assert topics.get("from-kafka") == 3
    finally:
        controller.stop()
