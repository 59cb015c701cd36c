"""One Raft quorum of Kafka's controllers and kraftwire's (``controller.quorum.voters``).

Each node is formatted by its own storage tool with one cluster id, a Kafka broker is attached
and a console producer writes through it all the time. The leader is killed with kill -9 again
and again until leadership has passed between the two implementations at least three times;
after each failover a topic is created through the broker. In the end no acknowledged topic or
record is lost, and every voter's log holds the same batches, as each side's dump-log prints
them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.client import ConnectionClosed, KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from server.metalog.meta_properties import read_meta_properties
from tests.support.kafka import KafkaServer, Writer, kafka, run_tool
from tests.support.quorum import CONTROLLER_DEFAULTS, LIFETIME_S
from tools.controller_process import ROOT, ControllerProcess
from tools.kafka_dist import KAFKA_3_9, KAFKA_4, Distribution
from tools.processes import free_port, poll

KAFKA, KRAFTWIRE = "kafka", "kraftwire"
FIRST = 3000
RELEASE = "3.9-IV0"
WAIT_S = 120.0
MAX_KILLS = 12
BATCH_LINE = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: \d+ .*?partitionLeaderEpoch: (\d+) "
                        r".*?crc: (\d+)")
QUORUM_TIMINGS = {k: v for k, v in CONTROLLER_DEFAULTS.items() if k.startswith("controller.quorum.")}


class Voter:
    """A voter of either implementation, on a port fixed for its life."""

    def __init__(self, kind: str, node_id: int, port: int, workdir: Path, controllers: tuple[str, str],
                 cluster_id: str, dist: Distribution, dynamic: str | None = None, release: str = RELEASE) -> None:
        """``controllers``: controller.quorum.voters or controller.quorum.bootstrap.servers and
        its value; ``dynamic``: formatted "standalone", or as an "observer" that joins later."""
        self.kind = kind
        self.node_id = node_id
        self.dist = dist
        self.kafka: KafkaServer | None = None
        self.kraftwire: ControllerProcess | None = None
        if kind == KAFKA:
            self.kafka = KafkaServer(dist, workdir, node_id, controllers, QUORUM_TIMINGS, roles="controller",
                                     controller_port=port)
            flags = {None: [], "standalone": ["--standalone"], "observer": ["--no-initial-controllers"]}[dynamic]
            run_tool(dist, "kafka-storage", "format", "-c", str(self.kafka.config_path), "-t", cluster_id,
                     "--release-version", release, *flags)
        else:
            self.kraftwire = ControllerProcess(workdir, {
                "node.id": str(node_id), controllers[0]: controllers[1],
                "listeners": f"CONTROLLER://127.0.0.1:{port}", "log.dirs": str(workdir / "data"), **QUORUM_TIMINGS},
                release, lifetime_s=LIFETIME_S, start_timeout_s=60.0, port=port, cluster_id=cluster_id,
                dynamic=dynamic)
            self.kraftwire.prepare()

    @property
    def config_path(self) -> Path:
        path = self.kafka.config_path if self.kafka is not None else self.kraftwire.config_path  # type: ignore[union-attr]
        assert path is not None
        return path

    @property
    def metadata_dir(self) -> Path:
        return self.kafka.log_dir if self.kafka is not None else self.kraftwire.data_dir  # type: ignore[union-attr]

    @property
    def port(self) -> int:
        return self.kafka.controller_port if self.kafka is not None else self.kraftwire.port  # type: ignore[union-attr]

    @property
    def running(self) -> bool:
        return (self.kafka or self.kraftwire).running  # type: ignore[union-attr]

    def start(self) -> None:
        if self.kafka is not None:
            self.kafka.start()
        else:
            assert self.kraftwire is not None
            self.kraftwire.start()

    def kill9(self) -> None:
        (self.kafka or self.kraftwire).kill9()  # type: ignore[union-attr]

    def stop(self) -> None:
        (self.kafka or self.kraftwire).stop()  # type: ignore[union-attr]

    def batches(self) -> list[tuple[int, int, int, int]]:
        """(base offset, last offset, leader epoch, CRC) of every batch, as this voter's own
        implementation's dump-log prints its segments."""
        if self.kafka is not None:
            segments = sorted((self.kafka.log_dir / "__cluster_metadata-0").glob("*.log"))
            out = run_tool(self.dist, "kafka-dump-log", "--files", ",".join(map(str, segments))).stdout
        else:
            assert self.kraftwire is not None
            segments = sorted((self.kraftwire.data_dir / "__cluster_metadata-0").glob("*.log"))
            done = subprocess.run([sys.executable, "-m", "tools.dump_log", "--files", *map(str, segments)], cwd=ROOT,
                                  capture_output=True, text=True, timeout=WAIT_S)
            assert done.returncode == 0, done.stderr
            out = done.stdout
        return [tuple(map(int, m)) for m in BATCH_LINE.findall(out)]  # type: ignore[misc]


def leader(voters: dict[int, Voter]) -> int | None:
    """The running voter that answers DescribeQuorum as its own leader, whichever side it is."""
    for node, voter in voters.items():
        if not voter.running:
            continue
        try:
            with KafkaClient("127.0.0.1", voter.port, client_id="mixed-quorum", timeout=5) as client:
                response = client.request(DescribeQuorumRequest(topics=[TopicData(
                    topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 1)
        except (OSError, ConnectionClosed):
            continue
        part = response.topics[0].partitions[0]
        if response.error_code == part.error_code == Error.NONE and part.leader_id == node:
            return node
    return None


# Kafka 4.x formats at 4.3-IV0 by default, whose records kraftwire does not know: its quorum is
# formatted at kraftwire's newest level. Its voters pre-vote (Vote v2, KIP-996), 3.9's do not.
@pytest.mark.parametrize("version,release,kinds", [
    (KAFKA_3_9, RELEASE, (KAFKA, KAFKA, KRAFTWIRE)), (KAFKA_3_9, RELEASE, (KAFKA, KRAFTWIRE, KRAFTWIRE)),
    (KAFKA_4, "4.2-IV1", (KAFKA, KAFKA, KRAFTWIRE))],
    ids=["3.9-two-kafka-one-kraftwire", "3.9-one-kafka-two-kraftwire", "4.x-two-kafka-one-kraftwire"])
def test_leadership_passes_between_kafka_and_kraftwire(tmp_path: Path, version: str, release: str,
                                                        kinds: tuple[str, ...]) -> None:
    dist = kafka(version)
    ports = {FIRST + i: free_port() for i in range(len(kinds))}
    voters_line = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items())
    cluster_id = run_tool(dist, "kafka-storage", "random-uuid").stdout.strip()
    voters = {n: Voter(kind, n, ports[n], tmp_path / f"voter-{n}", ("controller.quorum.voters", voters_line),
                       cluster_id, dist, release=release) for n, kind in zip(ports, kinds)}
    broker = KafkaServer(dist, tmp_path / "broker", 1, ("controller.quorum.voters", voters_line),
                         {"offsets.topic.replication.factor": "1"})
    writer: Writer | None = None
    created: list[str] = []
    try:
        for voter in voters.values():
            if voter.kafka is not None:
                voter.start()
        for voter in voters.values():
            if voter.kraftwire is not None:
                voter.start()
        broker.format(cluster_id, release)
        broker.start().wait_started()
        run_tool(dist, "kafka-topics", "--bootstrap-server", broker.address, "--create", "--topic", "stream",
                 "--partitions", "1", "--replication-factor", "1")
        writer = Writer(dist, broker.address, "stream")

        leaders: list[str] = []
        for round_ in range(MAX_KILLS):
            old = poll(lambda: leader(voters), WAIT_S, interval=0.5, message="a leader")
            assert isinstance(old, int)
            leaders.append(voters[old].kind)
            switches = sum(a != b for a, b in zip(leaders, leaders[1:]))
            if switches >= 3:
                break
            voters[old].kill9()
            new = poll(lambda: (n := leader(voters)) not in (None, old) and n, WAIT_S, interval=0.5,
                       message=f"a leader other than {old}")
            topic = f"after-kill-{round_}"
            run_tool(dist, "kafka-topics", "--bootstrap-server", broker.address, "--create", "--topic", topic,
                     "--partitions", "1", "--replication-factor", "1")
            created.append(topic)
            assert new in voters
            voters[old].start()
        assert switches >= 3, f"leadership went {leaders}"
        sent = writer.finish()
        writer = None

        listed = run_tool(dist, "kafka-topics", "--bootstrap-server", broker.address, "--list").stdout.split()
        assert set(created) <= set(listed)
        consumed = run_tool(dist, "kafka-console-consumer", "--bootstrap-server", broker.address, "--topic", "stream",
                            "--from-beginning", "--max-messages", str(sent), "--timeout-ms", "60000").stdout.split()
        assert sorted(consumed) == sorted(f"record-{i}" for i in range(sent))
        # Every voter caught up before they stop: their logs then hold the same batches.
        end = poll(lambda: (s := run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller",
                                          ",".join(f"127.0.0.1:{p}" for p in ports.values()), "describe",
                                          "--replication", check=False).stdout)
                   and all(line.split()[3] == "0" for line in s.splitlines()[1:] if line.strip()) and s,
                   WAIT_S, interval=1.0, message="every voter caught up")
        assert end
    finally:
        if writer is not None:
            writer.finish()
        broker.kill9()
        for voter in voters.values():
            voter.stop()

    logs = {n: v.batches() for n, v in voters.items()}
    shortest = min(len(batches) for batches in logs.values())
    assert shortest > len(created)
    prefixes = {n: batches[:shortest] for n, batches in logs.items()}
    first = prefixes[FIRST]
    assert all(p == first for p in prefixes.values()), {n: p[-3:] for n, p in prefixes.items()}
    # The epochs in the logs show every leader that wrote them.
    assert len({epoch for _, _, epoch, _ in first}) >= 4


def current_voters(voters: dict[int, Voter], dist: Distribution) -> set[int]:
    live = ",".join(f"127.0.0.1:{v.port}" for v in voters.values() if v.running)
    status = run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller", live, "describe", "--status").stdout
    found = re.search(r"CurrentVoters:\s+(\[.*\])", status)
    assert found, status
    return {v["id"] for v in json.loads(found[1])}


@pytest.mark.parametrize("first,joiner", [(KAFKA, KRAFTWIRE), (KRAFTWIRE, KAFKA)],
                         ids=["kraftwire-joins-kafka", "kafka-joins-kraftwire"])
def test_a_controller_of_the_other_side_joins_and_leaves_a_dynamic_quorum(tmp_path: Path, first: str,
                                                                           joiner: str) -> None:
    """KIP-853 across implementations: a controller formatted --no-initial-controllers joins a
    --standalone quorum of the other side through Kafka's add-controller, then one of them is
    removed with remove-controller: the joiner where Kafka leads, the leader itself where
    kraftwire leads, and the one left leads alone."""
    dist = kafka(KAFKA_3_9)
    ports = {FIRST: free_port(), FIRST + 1: free_port()}
    bootstrap = ("controller.quorum.bootstrap.servers", f"127.0.0.1:{ports[FIRST]}")
    cluster_id = run_tool(dist, "kafka-storage", "random-uuid").stdout.strip()
    voters = {FIRST: Voter(first, FIRST, ports[FIRST], tmp_path / "first", bootstrap, cluster_id, dist, "standalone"),
              FIRST + 1: Voter(joiner, FIRST + 1, ports[FIRST + 1], tmp_path / "joiner", bootstrap, cluster_id, dist,
                               "observer")}
    address = f"127.0.0.1:{ports[FIRST]}"
    try:
        for voter in voters.values():
            voter.start()
        assert poll(lambda: leader(voters), WAIT_S, interval=0.5, message="the standalone controller leads") == FIRST
        # Refused until the joiner has caught up: asked again, as an operator would.
        poll(lambda: run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller", address, "--command-config",
                              str(voters[FIRST + 1].config_path), "add-controller", check=False).returncode == 0,
             WAIT_S, interval=1.0, message=f"the {joiner} controller added")
        poll(lambda: current_voters(voters, dist) == {FIRST, FIRST + 1}, WAIT_S, interval=1.0, message="two voters")

        # Kafka leading removes the joiner; kraftwire leading removes itself.
        removed = FIRST + 1 if first == KAFKA else FIRST
        directory = read_meta_properties(voters[removed].metadata_dir).directory_id
        done = run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller",
                        ",".join(f"127.0.0.1:{p}" for p in ports.values()), "remove-controller",
                        "--controller-id", str(removed), "--controller-directory-id", str(directory))
        assert re.search(rf"Removed\s+KRaft controller {removed}\b", done.stdout), done.stdout
        remaining = FIRST + 1 if removed == FIRST else FIRST
        poll(lambda: leader(voters) == remaining, WAIT_S, interval=0.5, message=f"{remaining} leading alone")
        poll(lambda: current_voters(voters, dist) == {remaining}, WAIT_S, interval=1.0, message="one voter")
    finally:
        for voter in voters.values():
            voter.stop()
