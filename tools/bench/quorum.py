"""A three-controller quorum on loopback against a single voter of the same run.

Three lines, each against an anchor measured in the same run:

- ``quorum.commit``: committed writes per second through the leader of three voters, with the
  single voter as anchor (goal: ratio >= 0.5). A write is an AllocateProducerIds request (one
  ProducerIdsRecord, answered once committed), DEPTH of them in flight on one connection; the
  line also gives both sides' commit latency p50/p99.
- ``quorum.failover``: kill -9 of the leader to the first write committed by its successor, over
  KILLS kills (the leader killed each time is started again), with the quorum timing docs/quorum.md
  recommends on one machine; the anchor is the election timeout, so the ratio says how many
  election timeouts a failover takes.
- ``quorum.failover ..., 5 voters``: the same failover with five voters.
- ``quorum.failover_1m``: the same with 1,000,000 partitions loaded on every voter: a standby
  serves as it is, with nothing to reload. The anchor is the failover without them.
- ``quorum.add_voter``: a dynamic quorum (KIP-853) of one, holding the 1,000,000 partitions
  (``--add-partitions small``: none), while a writer commits on it: a controller formatted with
  --no-initial-controllers starts, fetches the snapshot and the log, and is added
  (AddRaftVoter, asked again while it is refused as not caught up). The line gives the seconds
  from its start to the AddRaftVoter answer against the 10 s goal, the writes acknowledged
  during the change, the worst write latency meanwhile, and whether the new voter holds every
  acknowledged write (its log end reaches the leader's high watermark after the writer stops).

    python -m tools.bench quorum
    python -m tools.bench.quorum --kills 10 --skip-1m
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from protocol.client import ConnectionClosed, KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages import ApiKey
from protocol.generated.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.generated.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.primitives import random_uuid
from tools.bench.report import emit, note
from tools.bench.server import broker_features
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.add_raft_voter_request import Listener as AddListener
from protocol.message import Message
from tools.controller_process import Controller, ControllerProcess, QuorumProcesses, free_port

DEPTH = 32
MEASURE_S = 3.0
KILLS = 10
# What docs/quorum.md recommends for voters on one machine or one rack.
TIMING = {"controller.quorum.election.timeout.ms": "300", "controller.quorum.fetch.timeout.ms": "600"}
# The writer's broker: none of the generated ones (the 1,000,000-partition dataset's 30, the
# 1,000 tools.bench.server registers).
BROKER_ID = 99_999
WRITE_TIMEOUT_S = 120
ALLOCATE_V = 0
REGISTER_V = 4


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _register(client: KafkaClient, cluster_id: str) -> int:
    response = client.request(BrokerRegistrationRequest(
        broker_id=BROKER_ID, cluster_id=cluster_id, incarnation_id=random_uuid(),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=29092)], features=broker_features(client),
        rack=None, log_dirs=[random_uuid()]), REGISTER_V)
    assert isinstance(response, BrokerRegistrationResponse)
    if response.error_code:
        raise RuntimeError(f"registration failed: {Error(response.error_code).name}")
    epoch: int = response.broker_epoch
    return epoch


def commit_rate(member: Controller, seconds: float = MEASURE_S, depth: int = DEPTH,
                connections: int = 1) -> dict[str, float]:
    """Closed loop of ``depth`` writes in flight, spread over ``connections`` connections:
    committed writes/s and latency in ms. Kafka's servers read a connection's next request only
    once they answered the last, so against them depth means connections."""
    assert member.cluster_id is not None
    clients = [KafkaClient(member.host, member.port, client_id="bench-quorum", timeout=30) for _ in range(connections)]
    try:
        epoch = _register(clients[0], member.cluster_id)
        request = AllocateProducerIdsRequest(broker_id=BROKER_ID, broker_epoch=epoch)
        # (client, correlation id, when sent), oldest first: answers come in order per connection.
        sent: deque[tuple[KafkaClient, int, float]] = deque()
        for i in range(depth):
            client = clients[i % connections]
            sent.append((client, client.send(request, ALLOCATE_V), time.perf_counter()))
        latencies: list[float] = []
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            client, cid, began = sent.popleft()
            response = client.receive(ApiKey.ALLOCATE_PRODUCER_IDS, ALLOCATE_V, cid)
            now = time.perf_counter()
            assert isinstance(response, AllocateProducerIdsResponse)
            if response.error_code:
                raise RuntimeError(f"a write failed: {Error(response.error_code).name}")
            latencies.append((now - began) * 1000)
            if now >= deadline:
                break
            sent.append((client, client.send(request, ALLOCATE_V), time.perf_counter()))
        elapsed = time.perf_counter() - start
        for client, cid, _ in sent:
            client.receive(ApiKey.ALLOCATE_PRODUCER_IDS, ALLOCATE_V, cid)
    finally:
        for client in clients:
            client.close()
    return {"rate": len(latencies) / elapsed, "p50_ms": _percentile(latencies, 0.5),
            "p99_ms": _percentile(latencies, 0.99)}


def _write_once(member: Controller, epochs: dict[int, int]) -> bool:
    """One committed write on ``member``; False while it is not (yet) the active controller."""
    assert member.cluster_id is not None
    try:
        with KafkaClient(member.host, member.port, client_id="bench-quorum", timeout=2) as client:
            if BROKER_ID not in epochs:
                epochs[BROKER_ID] = _register(client, member.cluster_id)
            response = client.request(AllocateProducerIdsRequest(broker_id=BROKER_ID,
                                                                  broker_epoch=epochs[BROKER_ID]), ALLOCATE_V)
    except (OSError, ConnectionClosed, RuntimeError):
        return False
    assert isinstance(response, AllocateProducerIdsResponse)
    if response.error_code not in (Error.NONE, Error.NOT_CONTROLLER):
        epochs.clear()  # the writer's broker was fenced meanwhile: register it again
    return response.error_code == Error.NONE


def write_until_committed(member: Controller, epochs: dict[int, int], timeout_s: float = WRITE_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not _write_once(member, epochs):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no write committed on {member.host}:{member.port} in {timeout_s} s")
        time.sleep(0.01)


def failovers(quorum: QuorumProcesses, kills: int) -> list[float]:
    """Seconds from kill -9 of the leader to the first write its successor commits."""
    epochs: dict[int, int] = {}
    times = []
    for _ in range(kills):
        leader = quorum.wait_for_leader()
        write_until_committed(quorum.members[leader], epochs)
        quorum.members[leader].kill9()
        killed = time.monotonic()
        others = [n for n in quorum.running()]
        done = False
        while not done:
            if time.monotonic() - killed > 60:
                raise RuntimeError("no write committed within 60 s of the kill")
            for node in others:
                if _write_once(quorum.members[node], epochs):
                    done = True
                    break
        times.append(time.monotonic() - killed)
        quorum.members[leader].start()
    return times


def _one_million_partitions(quorum: QuorumProcesses) -> None:
    """Every voter starts from the same snapshot of 1,000,000 partitions and log after it."""
    _load_million(list(quorum.members.values()))


def _load_million(members: list[ControllerProcess], quorum_records: list[tuple[Message, int]] | None = None) -> None:
    """Each member starts from a snapshot of 1,000,000 partitions (after ``quorum_records``, the
    kraft.version and voter set of a dynamic quorum) and the log after it."""
    from itertools import chain

    from server.metalog.segments import MetadataLog, segment_name
    from server.metalog.snapshots import SnapshotId, write_snapshot
    from server.metalog.commit_path import encode_records
    from tools.bench.metalog import Dataset, snapshot_record_count

    for member in members:
        member.prepare()
        data = Dataset()
        snapshot = SnapshotId(snapshot_record_count(), 1)
        partition_dir = member.data_dir / "__cluster_metadata-0"
        partition_dir.mkdir(parents=True, exist_ok=True)
        write_snapshot(partition_dir, snapshot, chain(quorum_records or [], data.snapshot_records()))
        (partition_dir / segment_name(snapshot.end_offset)).touch()
        log = MetadataLog.open(member.data_dir)
        for batch in data.suffix_batches():
            log.append([encode_records(batch, log.end_offset, 1, 1_700_000_000_000)])
        log.close()


def run(kills: int = KILLS, with_1m: bool = True, only_1m: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="kraftwire-bench-quorum-") as tmp:
        root = Path(tmp)
        election_s = int(TIMING["controller.quorum.election.timeout.ms"]) / 1000
        anchor = election_s
        if not only_1m:
            times = commit_and_failover(root, kills)
            anchor = statistics.median(times)
            five_voters_failover(root, kills)
        if with_1m or only_1m:
            million = failover_with_a_million_partitions(root)
            emit("quorum.failover_1m kill -9 to first committed write, 1,000,000 partitions",
                 statistics.median(million), anchor, "s",
                 anchor_is="the failover without partitions, same run" if not only_1m
                 else "controller.quorum.election.timeout.ms", kills=len(million),
                 max_s=round(max(million), 3), all_s=[round(t, 3) for t in million])


def commit_and_failover(root: Path, kills: int) -> list[float]:
    """Prints the commit and failover lines; returns the failover times."""
    single = ControllerProcess(root / "single").start()
    try:
        alone = commit_rate(single)
    finally:
        single.stop()
    quorum = QuorumProcesses(root / "three", 3, TIMING).start()
    try:
        three = commit_rate(quorum.members[quorum.wait_for_leader()])
        times = failovers(quorum, kills)
    finally:
        quorum.stop()
    emit("quorum.commit writes/s, 3 voters", three["rate"], alone["rate"], "writes/s",
         anchor_is="the single voter of the same run", depth=DEPTH,
         p50_ms=round(three["p50_ms"], 2), p99_ms=round(three["p99_ms"], 2),
         anchor_p50_ms=round(alone["p50_ms"], 2), anchor_p99_ms=round(alone["p99_ms"], 2))
    election_s = int(TIMING["controller.quorum.election.timeout.ms"]) / 1000
    emit("quorum.failover kill -9 to first committed write", statistics.median(times), election_s, "s",
         anchor_is="controller.quorum.election.timeout.ms", kills=kills,
         p50_s=round(statistics.median(times), 3), max_s=round(max(times), 3),
         all_s=[round(t, 3) for t in times])
    return times


def five_voters_failover(root: Path, kills: int) -> None:
    quorum = QuorumProcesses(root / "five", 5, TIMING).start()
    try:
        times = failovers(quorum, kills)
    finally:
        quorum.stop()
    election_s = int(TIMING["controller.quorum.election.timeout.ms"]) / 1000
    emit("quorum.failover kill -9 to first committed write, 5 voters", statistics.median(times), election_s, "s",
         anchor_is="controller.quorum.election.timeout.ms", kills=kills,
         p50_s=round(statistics.median(times), 3), max_s=round(max(times), 3),
         all_s=[round(t, 3) for t in times])


def failover_with_a_million_partitions(root: Path, kills: int = 3) -> list[float]:
    # The dataset's brokers never heartbeat here; a session longer than the run keeps the
    # leader from fencing them all (moving every partition's leadership) mid-measure.
    big = QuorumProcesses(root / "million", 3, {**TIMING, "broker.session.timeout.ms": "3600000"},
                          lifetime_s=1800, start_timeout_s=600)
    _one_million_partitions(big)
    note("starting three voters on 1,000,000 partitions each")
    big.start()
    try:
        leader = big.wait_for_leader(timeout=600)
        write_until_committed(big.members[leader], {})
        return failovers(big, kills)
    finally:
        big.stop()


def add_voter(root: Path, million: bool) -> None:
    from server.metalog.meta_properties import read_meta_properties
    from server.raft.types import ReplicaKey
    from server.raft.voters import KRAFT_VERSION_DYNAMIC, VoterNode, VoterSet
    from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
    from protocol.primitives import uuid_from_str

    ports = [free_port(), free_port()]
    common = {**TIMING, "controller.quorum.bootstrap.servers": f"127.0.0.1:{ports[0]}",
              "broker.session.timeout.ms": "3600000"}
    first = ControllerProcess(root / "add-1", {**common, "node.id": "1", "listeners": f"CONTROLLER://127.0.0.1:{ports[0]}"},
                              port=ports[0], dynamic="standalone", lifetime_s=1800, start_timeout_s=600)
    if million:
        first.prepare()
        meta = read_meta_properties(first.data_dir)
        assert meta.directory_id is not None
        voters = VoterSet.of([VoterNode(ReplicaKey(1, uuid_from_str(meta.directory_id)),
                                        (("CONTROLLER", "127.0.0.1", ports[0]),), (0, 1))])
        note("loading 1,000,000 partitions into a standalone controller")
        _load_million([first], [(KRaftVersionRecord(version=0, k_raft_version=KRAFT_VERSION_DYNAMIC), 0),
                                (voters.to_record(), 0)])
    first.start()
    second: ControllerProcess | None = None
    try:
        epochs: dict[int, int] = {}
        write_until_committed(first, epochs)
        second = ControllerProcess(root / "add-2", {**common, "node.id": "2",
                                                     "listeners": f"CONTROLLER://127.0.0.1:{ports[1]}"},
                                   port=ports[1], cluster_id=first.cluster_id, dynamic="observer",
                                   lifetime_s=1800, start_timeout_s=600)
        second.prepare()
        answered, refusals, latencies, caught_up = join(first, second, 2, epochs)
    finally:
        if second is not None:
            second.stop()
        first.stop()
    emit("quorum.add_voter start of the new controller to the AddRaftVoter answer"
         + (", 1,000,000 partitions" if million else ""), answered, 10.0, "s",
         anchor_is="the 10 s goal", refused_as_lagging=refusals, writes=len(latencies),
         worst_write_s=round(max(latencies), 3), holds_every_acknowledged_write=caught_up)


def join(first: Controller, second: Controller, node_id: int, epochs: dict[int, int],
         limit_s: float = 600) -> tuple[float, int, list[float], bool]:
    """Start ``second``, formatted to join ``first``'s dynamic quorum, and ask ``first`` to add
    it as voter ``node_id`` until it answers (it is refused while it catches up), one write
    committed on ``first`` between asks, then 20 more with two voters. Returns the seconds from
    the start to the answer, the refusals, the writes' latencies, and whether the new voter
    holds every acknowledged write."""
    from server.metalog.meta_properties import read_meta_properties
    from protocol.primitives import uuid_from_str

    joiner = read_meta_properties(second.data_dir)
    assert joiner.directory_id is not None
    request = AddRaftVoterRequest(cluster_id=first.cluster_id, timeout_ms=30_000, voter_id=node_id,
                                  voter_directory_id=uuid_from_str(joiner.directory_id),
                                  listeners=[AddListener(name="CONTROLLER", host="127.0.0.1", port=second.port)])
    latencies: list[float] = []
    began = time.monotonic()
    second.start()
    answered = None
    refusals = 0
    while answered is None:
        if time.monotonic() - began > limit_s:
            raise RuntimeError(f"the new controller was not added within {limit_s} s")
        sent = time.monotonic()
        if _write_once(first, epochs):
            latencies.append(time.monotonic() - sent)
        with KafkaClient(first.host, first.port, client_id="bench-quorum", timeout=60) as client:
            response = client.request(request, 0)
        code = getattr(response, "error_code")
        if code == Error.NONE:
            answered = time.monotonic() - began
        elif code == Error.REQUEST_TIMED_OUT:
            refusals += 1
        else:
            raise RuntimeError(f"AddRaftVoter failed: {Error(code).name}")
    for _ in range(20):  # writes go on with two voters
        sent = time.monotonic()
        write_until_committed(first, epochs)
        latencies.append(time.monotonic() - sent)
    return answered, refusals, latencies, _new_voter_caught_up(first, node_id)


def _new_voter_caught_up(leader: Controller, voter: int) -> bool:
    """Whether ``voter``'s log end reaches the leader's high watermark (within 60 s)."""
    from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with KafkaClient(leader.host, leader.port, client_id="bench-quorum", timeout=30) as client:
            response = client.request(DescribeQuorumRequest(topics=[TopicData(
                topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 2)
        part = getattr(response, "topics")[0].partitions[0]
        ends = {v.replica_id: v.log_end_offset for v in part.current_voters}
        if ends.get(voter, -1) >= part.high_watermark > 0:
            return True
        time.sleep(0.2)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.quorum")
    parser.add_argument("--kills", type=int, default=KILLS)
    parser.add_argument("--skip-1m", action="store_true", help="leave out the 1,000,000-partition failover")
    parser.add_argument("--only-1m", action="store_true", help="only the 1,000,000-partition failover")
    parser.add_argument("--add-partitions", choices=("1m", "small", "none"), default="1m",
                        help="the quorum the add-voter line adds to: 1,000,000 partitions, none, or no such line")
    args = parser.parse_args(argv)
    run(args.kills, not args.skip_1m, args.only_1m)
    if args.add_partitions != "none":
        with tempfile.TemporaryDirectory(prefix="kraftwire-bench-add-voter-") as tmp:
            add_voter(Path(tmp), args.add_partitions == "1m")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
