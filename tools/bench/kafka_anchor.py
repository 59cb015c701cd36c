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

Kafka runs with its scripts' JVM options (G1, 1 GiB heap) and is warmed by a first measurement
that is not reported. Both quorums are formatted at metadata.version 4.0-IV3.

    python -m tools.bench kafka
    python -m tools.bench.kafka_anchor --version 4.3.1 --kills 5
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.bench.quorum import DEPTH, KILLS, TIMING, commit_rate, failovers
from tools.bench.report import emit, note
from tools.bench.server import BROKERS, ROUNDS, raise_fd_limit, check_heartbeats, drive, register_brokers
from tools.controller_process import ControllerProcess, QuorumProcesses
from tools.kafka_dist import KAFKA_4, DistributionError, fetch
from tools.kafka_dist.controllers import KafkaController, KafkaQuorum

RELEASE = "4.0-IV3"  # the same metadata.version on both sides
HEARTBEAT_CONNECTIONS = 200


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


def run(version: str = KAFKA_4, kills: int = KILLS) -> None:
    try:
        dist = fetch(version)
    except DistributionError as exc:
        note(f"kafka: skipped, Kafka {version} is not available: {exc}")
        return
    anchor_is = f"Apache Kafka {version}'s controllers, 3 voters, same run and work"
    with tempfile.TemporaryDirectory(prefix="kraftwire-bench-kafka-") as tmp:
        root = Path(tmp)
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
    args = parser.parse_args(argv)
    run(args.version, args.kills)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
