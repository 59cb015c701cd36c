"""Apache Kafka's own controllers as the anchor: the same work against three of Kafka's voters
and three of kraftwire's, in the same run, on the same machine, with the same
``controller.quorum.*`` timings (docs/quorum.md's, for voters on one machine).

- ``kafka.commit``: committed writes per second through the leader at the same pipeline depth,
  with p50/p99 latency (a write is an AllocateProducerIds request from one registered broker,
  answered once committed: ``tools.bench.quorum``'s load generator, which both serve). Kafka's
  servers take a connection's next request only once they answered its last, so the DEPTH
  writes in flight go over DEPTH connections, one each, on both sides.
- ``kafka.failover``: kill -9 of the leader to the first write committed by its successor, over
  KILLS kills (each killed voter started again).
- ``kafka.heartbeats``: broker heartbeats answered per second by a single voter, BROKERS
  registered brokers, from ``tools.bench.server``'s load generator with the same frames, over
  HEARTBEAT_CONNECTIONS connections with one heartbeat in flight each (as a Kafka broker sends
  them; Kafka's servers take no second request on a connection before answering the first).

- ``kafka.scale_*``: PARTITIONS partitions (topics of 100, replication factor 3) on
  SCALE_BROKERS registered brokers, on a dynamic quorum of one (``--standalone``) of each side:
  the seconds to create them with CreateTopics of 1,000 partitions each, one request at a time
  (``tools.bench.metadata``'s creation, after ``tools.bench.server``'s registration), the
  controller's resident memory then, the seconds from starting it again to its first committed
  write, and the seconds from starting a controller formatted ``--no-initial-controllers`` to
  the AddRaftVoter answer that makes it a voter (``tools.bench.quorum``'s join, writes going on
  meanwhile). ``--partitions`` sets the scale, for machines where a million does not fit.

Kafka runs with its scripts' JVM options (G1; a 1 GiB heap, SCALE_HEAP for the scale lines) and
is warmed by a first measurement that is not reported. Both sides are formatted at
metadata.version 4.0-IV3, and log at WARN while the scale lines are measured (Kafka's INFO
lines per record would otherwise be measured too).

    python -m tools.bench kafka
    python -m tools.bench.kafka_anchor --version 4.3.1 --kills 5 --partitions 100000
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from protocol.client import KafkaClient
from tools.bench.metadata import BATCH, PARTITIONS as PARTITIONS_PER_TOPIC, create_topics, rss_bytes
from tools.bench.quorum import DEPTH, KILLS, TIMING, commit_rate, failovers, join, write_until_committed
from tools.bench.report import emit, note
from tools.bench.server import BROKERS, ROUNDS, raise_fd_limit, check_heartbeats, drive, register_brokers
from tools.controller_process import Controller, ControllerProcess, QuorumProcesses
from tools.kafka_dist import KAFKA_4, Distribution, DistributionError, fetch
from tools.kafka_dist.controllers import KafkaController, KafkaQuorum
from tools.processes import free_port

RELEASE = "4.0-IV3"  # the same metadata.version on both sides
HEARTBEAT_CONNECTIONS = 200
PARTITIONS = 1_000_000
SCALE_BROKERS = 1000
# Kafka's heap for the scale lines: a million partitions need several GiB of it.
SCALE_HEAP = "6g"
# Loading, creating or catching up on a million partitions on a small machine.
SCALE_TIMEOUT_S = 1800
# Nobody is fenced while the machine is busy with the scale lines.
SCALE_SETTINGS = {**TIMING, "broker.session.timeout.ms": "3600000"}
# The two controllers' node ids, apart from the brokers' 1 to SCALE_BROKERS.
SCALE_VOTERS = (3000, 3001)


def measure(quorum: QuorumProcesses, kills: int, warm: bool) -> tuple[dict[str, float], list[float]]:
    quorum.start()
    try:
        leader = quorum.members[quorum.wait_for_leader(timeout=120)]
        if warm:
            commit_rate(leader, connections=DEPTH)  # the JIT's first pass, not reported
        rate = commit_rate(leader, connections=DEPTH)
        return rate, failovers(quorum, kills)
    finally:
        quorum.stop()


def heartbeats(controller: ControllerProcess | KafkaController, workdir: Path, warm: bool) -> dict[str, Any]:
    """The best of ROUNDS runs of the load generator against a started single voter."""
    assert controller.cluster_id is not None
    frames = register_brokers(controller.port, controller.cluster_id, BROKERS)
    if warm:
        drive(workdir, controller.port, frames, HEARTBEAT_CONNECTIONS, 1, 4, True)
    runs = [drive(workdir, controller.port, frames, HEARTBEAT_CONNECTIONS, 1, 4, True) for _ in range(ROUNDS)]
    check_heartbeats(controller.port, frames)
    return max(runs, key=lambda r: r["rps"])


def at_scale(first: Controller, joiner: Callable[[], Controller], partitions: int) -> dict[str, Any]:
    """The scale lines' work on ``first``, the only voter of a dynamic quorum; ``joiner``
    makes the controller that joins it."""
    epochs: dict[int, int] = {}
    second: Controller | None = None
    first.start()
    try:
        write_until_committed(first, epochs, SCALE_TIMEOUT_S)
        assert first.cluster_id is not None
        register_brokers(first.port, first.cluster_id, SCALE_BROKERS)
        with KafkaClient(first.host, first.port, client_id="bench-kafka", timeout=SCALE_TIMEOUT_S) as client:
            created_s = create_topics(client, partitions // PARTITIONS_PER_TOPIC, PARTITIONS_PER_TOPIC, BATCH)
        rss = rss_bytes(first.pid)
        first.stop()
        began = time.monotonic()
        first.start()
        listening_s = time.monotonic() - began
        write_until_committed(first, epochs, SCALE_TIMEOUT_S)
        restarted_s = time.monotonic() - began
        second = joiner()
        added_s, refusals, latencies, caught_up = join(first, second, SCALE_VOTERS[1], epochs, SCALE_TIMEOUT_S)
    finally:
        if second is not None:
            second.stop()
        first.stop()
    return {"created_s": created_s, "rss_mb": rss / 2**20, "restarted_s": restarted_s, "listening_s": listening_s,
            "added_s": added_s,
            "refusals": refusals, "worst_write_s": max(latencies), "caught_up": caught_up}


def kraftwire_at_scale(root: Path, partitions: int) -> dict[str, Any]:
    ports = dict(zip(SCALE_VOTERS, (free_port(), free_port())))
    common = {**SCALE_SETTINGS, "controller.quorum.bootstrap.servers": f"127.0.0.1:{ports[SCALE_VOTERS[0]]}"}

    def controller(node: int, dynamic: str, cluster_id: str | None) -> ControllerProcess:
        port = ports[node]
        made = ControllerProcess(root / f"kraftwire-{node}", {**common, "node.id": str(node),
                                                               "listeners": f"CONTROLLER://127.0.0.1:{port}"},
                                 RELEASE, server_args=["--log-level", "WARNING"], lifetime_s=SCALE_TIMEOUT_S * 2,
                                 start_timeout_s=SCALE_TIMEOUT_S, port=port, cluster_id=cluster_id, dynamic=dynamic)
        made.prepare()
        return made

    first = controller(SCALE_VOTERS[0], "standalone", None)
    return at_scale(first, lambda: controller(SCALE_VOTERS[1], "observer", first.cluster_id), partitions)


def kafka_at_scale(dist: Distribution, root: Path, partitions: int, heap: str) -> dict[str, Any]:
    ports = dict(zip(SCALE_VOTERS, (free_port(), free_port())))
    bootstrap = ("controller.quorum.bootstrap.servers", f"127.0.0.1:{ports[SCALE_VOTERS[0]]}")
    cluster_id = subprocess.run(dist.command("kafka-storage", "random-uuid"), capture_output=True, text=True,
                                check=True, timeout=120).stdout.strip()

    def controller(node: int, flag: str) -> KafkaController:
        return KafkaController(dist, root / f"kafka-{node}", node, ports[node], bootstrap, cluster_id, RELEASE,
                               SCALE_SETTINGS, (flag,), heap=heap, level="WARN")

    first = controller(SCALE_VOTERS[0], "--standalone")
    return at_scale(first, lambda: controller(SCALE_VOTERS[1], "--no-initial-controllers"), partitions)


def emit_scale(ours: dict[str, Any], theirs: dict[str, Any], partitions: int, version: str, heap: str) -> None:
    scale = f"{partitions:,} partitions on {SCALE_BROKERS:,} brokers"
    anchor_is = f"Apache Kafka {version}'s controller (heap {heap}), a dynamic quorum of one, same run and work"
    emit(f"kafka.scale_create {scale}", ours["created_s"], theirs["created_s"], "s", anchor_is=anchor_is,
         partitions=partitions, brokers=SCALE_BROKERS, partitions_per_request=BATCH * PARTITIONS_PER_TOPIC,
         replication_factor=3)
    emit(f"kafka.scale_rss resident memory, {scale}", ours["rss_mb"], theirs["rss_mb"], "MiB", anchor_is=anchor_is,
         partitions=partitions)
    emit(f"kafka.scale_restart start to first committed write, {scale}", ours["restarted_s"], theirs["restarted_s"],
         "s", anchor_is=anchor_is, partitions=partitions, listening_s=round(ours["listening_s"], 3),
         anchor_listening_s=round(theirs["listening_s"], 3))
    emit(f"kafka.scale_add_voter start of the new controller to the AddRaftVoter answer, {scale}", ours["added_s"],
         theirs["added_s"], "s", anchor_is=anchor_is, partitions=partitions, refused_as_lagging=ours["refusals"],
         anchor_refused_as_lagging=theirs["refusals"], worst_write_s=round(ours["worst_write_s"], 3),
         anchor_worst_write_s=round(theirs["worst_write_s"], 3),
         holds_every_acknowledged_write=ours["caught_up"], anchor_holds_every_acknowledged_write=theirs["caught_up"])


def run(version: str = KAFKA_4, kills: int = KILLS, partitions: int = PARTITIONS, heap: str = SCALE_HEAP,
        only_scale: bool = False) -> None:
    try:
        dist = fetch(version)
    except DistributionError as exc:
        note(f"kafka: skipped, Kafka {version} is not available: {exc}")
        return
    with tempfile.TemporaryDirectory(prefix="kraftwire-bench-kafka-") as tmp:
        root = Path(tmp)
        if not only_scale:
            small(dist, root, version, kills)
        if partitions:
            note(f"kafka: {partitions:,} partitions on {SCALE_BROKERS:,} brokers, kraftwire then Kafka")
            our_scale = kraftwire_at_scale(root / "scale", partitions)
            their_scale = kafka_at_scale(dist, root / "scale", partitions, heap)
            emit_scale(our_scale, their_scale, partitions, version, heap)


def small(dist: Distribution, root: Path, version: str, kills: int) -> None:
    """The commit, failover and heartbeat lines."""
    anchor_is = f"Apache Kafka {version}'s controllers, 3 voters, same run and work"
    ours, our_times = measure(QuorumProcesses(root / "kraftwire", 3, TIMING), kills, warm=False)
    theirs, their_times = measure(KafkaQuorum(dist, root / "kafka", 3, RELEASE, TIMING), kills, warm=True)
    raise_fd_limit()  # inherited by the load generator
    single = ControllerProcess(root / "single", {"broker.session.timeout.ms": "120000"}, RELEASE,
                               server_args=["--log-level", "WARNING"]).start()
    try:
        our_beats = heartbeats(single, root, warm=False)
    finally:
        single.stop()
    kafka_single = KafkaQuorum(dist, root / "kafka-single", 1, RELEASE, {"broker.session.timeout.ms": "120000"})
    kafka_single.start()
    try:
        their_beats = heartbeats(kafka_single.members[3000], root, warm=True)
    finally:
        kafka_single.stop()
    emit("kafka.commit writes/s, 3 voters", ours["rate"], theirs["rate"], "writes/s", anchor_is=anchor_is,
         depth=DEPTH, p50_ms=round(ours["p50_ms"], 2), p99_ms=round(ours["p99_ms"], 2),
         anchor_p50_ms=round(theirs["p50_ms"], 2), anchor_p99_ms=round(theirs["p99_ms"], 2))
    emit("kafka.failover kill -9 to first committed write", statistics.median(our_times),
         statistics.median(their_times), "s", anchor_is=anchor_is, kills=kills,
         max_s=round(max(our_times), 3), anchor_max_s=round(max(their_times), 3))
    emit("kafka.heartbeats answered/s, 1 voter", our_beats["rps"], their_beats["rps"], "heartbeats/s",
         anchor_is=anchor_is.replace("3 voters", "1 voter"), brokers=BROKERS, connections=HEARTBEAT_CONNECTIONS,
         p50_ms=round(our_beats["p50_ms"], 3), p99_ms=round(our_beats["p99_ms"], 3),
         anchor_p50_ms=round(their_beats["p50_ms"], 3), anchor_p99_ms=round(their_beats["p99_ms"], 3))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.kafka_anchor")
    parser.add_argument("--version", default=KAFKA_4, help="the Kafka version whose controllers are the anchor")
    parser.add_argument("--kills", type=int, default=KILLS)
    parser.add_argument("--partitions", type=int, default=PARTITIONS,
                        help="the scale lines' partitions, a multiple of 1,000 (0: no scale lines)")
    parser.add_argument("--heap", default=SCALE_HEAP, help="Kafka's heap for the scale lines")
    parser.add_argument("--only-scale", action="store_true", help="only the scale lines")
    args = parser.parse_args(argv)
    run(args.version, args.kills, args.partitions, args.heap, args.only_scale)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
