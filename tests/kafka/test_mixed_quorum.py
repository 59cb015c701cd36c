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
from protocol.generated.messages.describe_quorum_response import PartitionData as QuorumPartition
from server.metalog.meta_properties import read_meta_properties
from tests.support.kafka import KafkaServer, Writer, kafka, run_tool
from tests.support.quorum import CONTROLLER_DEFAULTS, LIFETIME_S, METADATA
from tools.controller_process import ROOT, ControllerProcess
from tools.kafka_dist import KAFKA_3_9, KAFKA_4, Distribution
from tools.processes import free_port, poll

KAFKA, KRAFTWIRE = "kafka", "kraftwire"
FIRST = 3000
RELEASE = "3.9-IV0"
# Kafka 4.3 formats at a metadata.version kraftwire does not know: a 4.x quorum is formatted at
# kraftwire's newest.
RELEASE_4 = "4.2-IV1"
WAIT_S = 120.0
MAX_KILLS = 12
BATCH_LINE = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: \d+ .*?partitionLeaderEpoch: (\d+) "
                        r".*?crc: (\d+)")
QUORUM_TIMINGS = {k: v for k, v in CONTROLLER_DEFAULTS.items() if k.startswith("controller.quorum.")}


class Voter:
    """A voter of either implementation, on a port fixed for its life."""

    def __init__(self, kind: str, node_id: int, port: int, workdir: Path, controllers: tuple[str, str],
                 cluster_id: str, dist: Distribution, dynamic: str | None = None, release: str = RELEASE,
                 properties: dict[str, str] | None = None) -> None:
        """``controllers``: controller.quorum.voters or controller.quorum.bootstrap.servers and
        its value; ``dynamic``: formatted "standalone", or as an "observer" that joins later;
        ``properties``: settings of this implementation beyond the quorum timings."""
        self.kind = kind
        self.node_id = node_id
        self.dist = dist
        # What a client of either side reads (tools.bench.quorum's writer among them).
        self.host = "127.0.0.1"
        self.cluster_id = cluster_id
        self.kafka: KafkaServer | None = None
        self.kraftwire: ControllerProcess | None = None
        if kind == KAFKA:
            self.kafka = KafkaServer(dist, workdir, node_id, controllers, {**QUORUM_TIMINGS, **(properties or {})},
                                     roles="controller", controller_port=port)
            flags = {None: [], "standalone": ["--standalone"], "observer": ["--no-initial-controllers"]}[dynamic]
            run_tool(dist, "kafka-storage", "format", "-c", str(self.kafka.config_path), "-t", cluster_id,
                     "--release-version", release, *flags)
        else:
            self.kraftwire = ControllerProcess(workdir, {
                "node.id": str(node_id), controllers[0]: controllers[1],
                "listeners": f"CONTROLLER://127.0.0.1:{port}", "log.dirs": str(workdir / "data"), **QUORUM_TIMINGS,
                **(properties or {})},
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

    def log(self) -> str:
        """What this run of the voter logged."""
        return self.kafka.log() if self.kafka is not None else self.kraftwire.stderr_text()  # type: ignore[union-attr]

    def segment_bases(self) -> list[int]:
        """The base offsets of the metadata log's segments on disk, oldest first."""
        return sorted(int(p.stem) for p in (self.metadata_dir / f"{METADATA}-0").glob("*.log"))

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


def describe_quorum(voter: Voter) -> QuorumPartition | None:
    """The metadata partition's entry of the voter's DescribeQuorum answer; None from a voter
    that is down or answers with an error (a follower of Kafka's does: NOT_LEADER_OR_FOLLOWER)."""
    try:
        with KafkaClient("127.0.0.1", voter.port, client_id="mixed-quorum", timeout=5) as client:
            response = client.request(DescribeQuorumRequest(topics=[TopicData(
                topic_name=METADATA, partitions=[PartitionData(partition_index=0)])]), 1)
    except (OSError, ConnectionClosed):
        return None
    part = response.topics[0].partitions[0]
    return part if response.error_code == part.error_code == Error.NONE else None


def leader(voters: dict[int, Voter]) -> int | None:
    """The running voter that answers DescribeQuorum as its own leader, whichever side it is."""
    for node, voter in voters.items():
        if voter.running and (part := describe_quorum(voter)) is not None and part.leader_id == node:
            return node
    return None


# Kafka 4.x's voters pre-vote (Vote v2, KIP-996), 3.9's do not.
@pytest.mark.parametrize("version,release,kinds", [
    (KAFKA_3_9, RELEASE, (KAFKA, KAFKA, KRAFTWIRE)), (KAFKA_3_9, RELEASE, (KAFKA, KRAFTWIRE, KRAFTWIRE)),
    (KAFKA_4, RELEASE_4, (KAFKA, KAFKA, KRAFTWIRE))],
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


# Every voter snapshots after a few KiB of log and keeps its log in segments as small, so a
# minute of writes leaves the leader without the log a stopped voter ends at. Kafka moves its log
# start up to its newest snapshot only when the log and snapshots outgrow
# metadata.max.retention.bytes, at its Raft client's cleaning pass once a minute; 3.9 allows
# segments below 8 MiB once metadata.log.segment.min.bytes says so. kraftwire drops the log
# below its older kept snapshot as soon as the newer is written.
SEGMENT_BYTES = "16384"
SNAPSHOT_SETTINGS = {
    KAFKA: {"metadata.log.max.record.bytes.between.snapshots": "8192", "metadata.log.segment.bytes": SEGMENT_BYTES,
            "metadata.log.segment.min.bytes": SEGMENT_BYTES, "metadata.max.retention.bytes": "1"},
    KRAFTWIRE: {"metadata.log.max.record.bytes.between.snapshots": "8192", "metadata.log.segment.bytes": SEGMENT_BYTES},
}
# What each side logs as it loads a snapshot fetched from the leader, with its end offset (a
# Kafka controller also loads its own newest snapshot at start-up, below where it stopped).
SNAPSHOT_LOADED = {KAFKA: re.compile(r"Starting to load snapshot (\d{20})-\d{10}"),
                   KRAFTWIRE: re.compile(r"installed the leader's snapshot ending at offset (\d+)")}
# The leader's log start passes the stopped voter within two of Kafka's cleaning passes.
LOG_START_WAIT_S = 180.0


@pytest.mark.parametrize("kinds", [(KAFKA, KAFKA, KRAFTWIRE), (KRAFTWIRE, KRAFTWIRE, KAFKA)],
                         ids=["kafka-leads-kraftwire-catches-up", "kraftwire-leads-kafka-catches-up"])
def test_a_voter_behind_the_leaders_log_start_catches_up_through_fetch_snapshot(tmp_path: Path,
                                                                               kinds: tuple[str, ...]) -> None:
    """The last voter, of the other side, stops; the two left write until the leader has
    snapshotted and dropped its log past where the stopped voter ends. Started again from its
    own directory, it can only catch up by fetching the leader's snapshot (FetchSnapshot): it
    logs the load of a snapshot ending past its old log, holds that snapshot file, and its log
    now starts there."""
    from tools.bench.quorum import commit_rate

    dist = kafka(KAFKA_3_9)
    ports = {FIRST + i: free_port() for i in range(len(kinds))}
    voters_line = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items())
    cluster_id = run_tool(dist, "kafka-storage", "random-uuid").stdout.strip()
    voters = {n: Voter(kind, n, ports[n], tmp_path / f"voter-{n}", ("controller.quorum.voters", voters_line),
                       cluster_id, dist, properties=SNAPSHOT_SETTINGS[kind]) for n, kind in zip(ports, kinds)}
    behind = FIRST + len(kinds) - 1
    try:
        for voter in voters.values():
            voter.start()
        first = poll(lambda: leader(voters), WAIT_S, interval=0.5, message="a leader")
        assert isinstance(first, int)
        # The voter that stops has a log of its own to start from again.
        poll(lambda: (state := describe_quorum(voters[first])) is not None
             and any(v.replica_id == behind and v.log_end_offset > 0 for v in state.current_voters),
             WAIT_S, interval=0.5, message=f"voter {behind} to fetch")
        voters[behind].stop()
        head = poll(lambda: leader(voters), WAIT_S, interval=0.5, message="a leader of the two left")
        assert isinstance(head, int)
        state = describe_quorum(voters[head])
        assert state is not None
        # No more than the leader held as the voter stopped.
        stopped_at = max(v.log_end_offset for v in state.current_voters)

        def log_start_passed() -> bool:
            commit_rate(voters[head], seconds=1.0, depth=8, connections=8)  # type: ignore[arg-type]
            return voters[head].segment_bases()[0] > stopped_at
        poll(log_start_passed, LOG_START_WAIT_S, interval=1.0,
             message=f"the leader's log to start past offset {stopped_at}")
        state = describe_quorum(voters[head])
        assert state is not None
        target = state.high_watermark

        voters[behind].start()

        def caught_up() -> bool:
            now = describe_quorum(voters[head])
            return now is not None and any(v.replica_id == behind and v.log_end_offset >= target
                                           for v in now.current_voters)
        poll(caught_up, WAIT_S, interval=0.5, message=f"voter {behind} caught up to offset {target}")

        def loaded() -> int | None:
            offsets = map(int, SNAPSHOT_LOADED[voters[behind].kind].findall(voters[behind].log()))
            return next((offset for offset in offsets if offset > stopped_at), None)
        installed = poll(loaded, WAIT_S, interval=0.5,
                         message=f"voter {behind} to load a snapshot ending past offset {stopped_at}")
        assert isinstance(installed, int)
        assert list((voters[behind].metadata_dir / f"{METADATA}-0").glob(f"{installed:020d}-*.checkpoint"))
        assert voters[behind].segment_bases()[0] >= installed
    finally:
        for voter in voters.values():
            voter.stop()


def current_voters(voters: dict[int, Voter], dist: Distribution) -> set[int]:
    live = ",".join(f"127.0.0.1:{v.port}" for v in voters.values() if v.running)
    status = run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller", live, "describe", "--status").stdout
    found = re.search(r"CurrentVoters:\s+(\[.*\])", status)
    assert found, status
    return {v["id"] for v in json.loads(found[1])}


@pytest.mark.parametrize("version,release", [(KAFKA_3_9, RELEASE), (KAFKA_4, RELEASE_4)], ids=["3.9", "4.x"])
@pytest.mark.parametrize("first,joiner", [(KAFKA, KRAFTWIRE), (KRAFTWIRE, KAFKA)],
                         ids=["kraftwire-joins-kafka", "kafka-joins-kraftwire"])
def test_a_controller_of_the_other_side_joins_and_leaves_a_dynamic_quorum(tmp_path: Path, first: str, joiner: str,
                                                                           version: str, release: str) -> None:
    """KIP-853 across implementations: a controller formatted --no-initial-controllers joins a
    --standalone quorum of the other side through Kafka's add-controller, then one of them is
    removed with remove-controller: the joiner where Kafka leads, the leader itself where
    kraftwire leads, and the one left leads alone."""
    dist = kafka(version)
    ports = {FIRST: free_port(), FIRST + 1: free_port()}
    bootstrap = ("controller.quorum.bootstrap.servers", f"127.0.0.1:{ports[FIRST]}")
    cluster_id = run_tool(dist, "kafka-storage", "random-uuid").stdout.strip()
    voters = {FIRST: Voter(first, FIRST, ports[FIRST], tmp_path / "first", bootstrap, cluster_id, dist, "standalone",
                           release),
              FIRST + 1: Voter(joiner, FIRST + 1, ports[FIRST + 1], tmp_path / "joiner", bootstrap, cluster_id, dist,
                               "observer", release)}
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
