"""A fleet of test brokers heartbeating against one controller: 1,000, 5,000 and 10,000 brokers.

For each size a fresh controller starts as a subprocess (the embedded default: session timeout
9 s) and the fleet runs in this process on one uvloop event loop, every broker on its own
connection, heartbeating every 2 s. Once every broker is unfenced and one more interval has
passed, the counters start; after MEASURE_S they are read:

    {"name": "fleet.heartbeats brokers=N", "ours": answered heartbeats/s,
     "anchor": N / 2 (the offered rate), "unit": "heartbeats/s", "ratio": achieved / offered,
     "p50_ms", "p99_ms", "max_ms", "controller_cpu_pct", "controller_rss_mb", "fleet_cpu_pct",
     "other_processes_cpu_pct", ...}

Then a fleet of 1,000 serving clients measures metadata propagation: for each of TOPICS topic
creations, committed at the controller (its CreateTopics answer is sent once the records are
durable), the time until every broker's client listener serves the topic in Metadata:

    {"name": "fleet.metadata_propagation brokers=1000", "ours": p99 ms, "anchor": p99 of the
     CreateTopics round trip, "unit": "ms", "p50_ms", "max_ms", "every_broker_checked_ms", ...}

The brokers of a fleet share one image, so each topic is served by all of them from the moment
that image replays its TopicRecord; that moment is what is timed, and afterwards one Metadata
request to every broker's listener checks that each really serves every topic (a Metadata
answer lists all 1,000 brokers, so polling them all continuously would time the polling).

Latency is measured in the fleet, from handing a heartbeat to the socket to decoding its
answer, so it includes the fleet's own event loop delays. CPU is a percentage of one core over
the window (from /proc/PID/stat); memory is VmRSS at the end of the window. Controller and
fleet share the machine's cores, so neither is measured alone, and whatever else runs on the
machine competes with both: ``other_processes_cpu_pct`` is the CPU the rest of the machine
used in the same window (from /proc/stat), to read the latencies against.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.create_topics_response import CreateTopicsResponse
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.generated.messages.metadata_response import MetadataResponse
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.message import Message
from server.client_connection import KafkaConnection
from server.config import EMBEDDED_NODE_ID
from tools.bench.report import emit, note
from tools.broker.__main__ import raise_fd_limit
from tools.broker.fleet import Fleet, FleetOptions, default_ramp_s
from tools.broker.lifecycle import State
from tools.controller_process import ControllerProcess

SIZES = (1000, 5000, 10000)
PROPAGATION_BROKERS = 1000
TOPICS = 20
INTERVAL_S = 2.0
MEASURE_S = 60.0
SETTLE_TIMEOUT_S = 180.0
CHILD_LIFETIME_S = 600
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14 and 15


def host_cpu_seconds() -> float:
    """CPU time spent by every process of the machine so far (all cores, from /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


def rss_mb(pid: int | str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def broker_ids(size: int) -> list[int]:
    """``size`` broker ids from 1 up, passing over the controller's own id (a controller voter's
    id is refused to a broker)."""
    return [i for i in range(1, size + 2) if i != EMBEDDED_NODE_ID][:size]


async def _measure(size: int, port: int, controller_pid: int, state_root: Path) -> dict:
    fleet = Fleet(FleetOptions(
        bootstrap=[("127.0.0.1", port)], node_ids=broker_ids(size),
        state_dir=lambda node_id: state_root / f"broker-{node_id}", heartbeat_interval_s=INTERVAL_S,
        ramp_s=default_ramp_s(size, INTERVAL_S), serve_clients=False))
    loop = asyncio.get_running_loop()
    try:
        began = loop.time()
        await fleet.start()
        while fleet.state_counts()[State.ACTIVE.value] < size:
            if loop.time() - began > SETTLE_TIMEOUT_S:
                raise RuntimeError(f"only {fleet.state_counts()} of {size} brokers active "
                                   f"after {SETTLE_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.2)
        settled = loop.time() - began
        await asyncio.sleep(INTERVAL_S)  # past the burst of first heartbeats after unfencing
        fleet.stats.reset()
        start, c0, f0, h0 = time.monotonic(), cpu_seconds(controller_pid), cpu_seconds("self"), host_cpu_seconds()
        await asyncio.sleep(MEASURE_S)
        elapsed = time.monotonic() - start
        c1, f1, h1 = cpu_seconds(controller_pid), cpu_seconds("self"), host_cpu_seconds()
        s = fleet.stats
        return {
            "answered_per_s": s.heartbeats_answered / elapsed, "elapsed": elapsed, "settle_s": settled,
            "p50": s.latency.percentile_ms(50), "p99": s.latency.percentile_ms(99),
            "max": s.latency.max_s * 1000, "errors": s.heartbeat_errors, "unanswered": s.heartbeats_unanswered,
            "controller_cpu": 100 * (c1 - c0) / elapsed, "fleet_cpu": 100 * (f1 - f0) / elapsed,
            # Whole ticks counted at slightly different moments: never below nothing.
            "other_cpu": max(0.0, 100 * ((h1 - h0) - (c1 - c0) - (f1 - f0)) / elapsed),
            "controller_rss": rss_mb(controller_pid), "fleet_rss": rss_mb("self"),
            "not_active": size - fleet.state_counts()[State.ACTIVE.value]}
    finally:
        fleet.close()


def run() -> None:
    import uvloop

    raise_fd_limit()
    note(f"fleet: {', '.join(map(str, SIZES))} brokers, heartbeat every {INTERVAL_S:.0f} s, "
         f"{MEASURE_S:.0f} s measured each; anchor = the offered rate N/{INTERVAL_S:.0f} per second; "
         f"fleet and controller share {os.cpu_count()} cores")
    for size in SIZES:
        with tempfile.TemporaryDirectory(prefix="kraftwire-bench-fleet-") as tmp:
            workdir = Path(tmp)
            controller = ControllerProcess(workdir / "controller", server_args=["--log-level", "WARNING"],
                                           lifetime_s=CHILD_LIFETIME_S, start_timeout_s=30).start()
            try:
                r = uvloop.run(_measure(size, controller.port, controller.pid, workdir / "brokers"))
            finally:
                controller.stop()
        emit(f"fleet.heartbeats brokers={size}", r["answered_per_s"], size / INTERVAL_S, "heartbeats/s",
             anchor_is=f"the offered rate: {size} brokers, one heartbeat each every {INTERVAL_S:.0f} s",
             p50_ms=round(r["p50"], 2), p99_ms=round(r["p99"], 2), max_ms=round(r["max"], 2),
             controller_cpu_pct=round(r["controller_cpu"], 1), controller_rss_mb=round(r["controller_rss"], 1),
             fleet_cpu_pct=round(r["fleet_cpu"], 1), fleet_rss_mb=round(r["fleet_rss"], 1),
             other_processes_cpu_pct=round(r["other_cpu"], 1),
             errors=r["errors"], unanswered=r["unanswered"], not_active_at_end=r["not_active"],
             seconds=round(r["elapsed"], 1), settle_s=round(r["settle_s"], 1))
    run_propagation()



def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


async def _every_broker_serves(conns: list[KafkaConnection], topics: list[str]) -> bool:
    async def serves(conn: KafkaConnection) -> bool:
        response = await conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topics]), 12, 60)
        assert isinstance(response, MetadataResponse)
        return all(t.error_code == 0 for t in response.topics)
    return all(await asyncio.gather(*(serves(c) for c in conns)))


async def _propagation(port: int, state_root: Path) -> dict:
    size = PROPAGATION_BROKERS
    fleet = Fleet(FleetOptions(
        bootstrap=[("127.0.0.1", port)], node_ids=list(range(1, size + 1)),
        state_dir=lambda node_id: state_root / f"broker-{node_id}", heartbeat_interval_s=INTERVAL_S,
        ramp_s=default_ramp_s(size, INTERVAL_S), client_port=lambda node_id: 0))
    loop = asyncio.get_running_loop()
    replayed: dict[str, asyncio.Future[float]] = {}

    def on_record(record: Message, offset: int) -> None:
        # Every broker of the fleet answers Metadata from this image: from here on, all serve it.
        if isinstance(record, TopicRecord) and record.name in replayed and not replayed[record.name].done():
            replayed[record.name].set_result(time.perf_counter())

    fleet.image.listeners.append(on_record)
    conns: list[KafkaConnection] = []
    try:
        began = loop.time()
        await fleet.start()
        while fleet.state_counts()[State.ACTIVE.value] < size:
            if loop.time() - began > SETTLE_TIMEOUT_S:
                raise RuntimeError(f"only {fleet.state_counts()} of {size} brokers active")
            await asyncio.sleep(0.2)
        admin = await KafkaConnection.open("127.0.0.1", port, "bench-propagation-admin", 10)
        delays: list[float] = []
        round_trips: list[float] = []
        topics = [f"propagation-{i}" for i in range(TOPICS)]
        for topic in topics:
            replayed[topic] = loop.create_future()
            sent = time.perf_counter()
            created = await admin.request(CreateTopicsRequest(topics=[CreatableTopic(
                name=topic, num_partitions=1, replication_factor=3)], timeout_ms=30000), 7, 30)
            committed = time.perf_counter()  # the answer leaves the controller once it is durable
            assert isinstance(created, CreateTopicsResponse) and created.topics[0].error_code == 0
            round_trips.append(committed - sent)
            # The fetch answer may overtake the CreateTopics answer: then the delay is negative.
            delays.append(await asyncio.wait_for(replayed[topic], 30) - committed)
        admin.close()
        # Over each broker's own listener, as a client sees it.
        conns = [await KafkaConnection.open("127.0.0.1", b.port, "bench-propagation", 10)
                 for b in fleet.brokers.values()]
        swept = time.perf_counter()
        if not await _every_broker_serves(conns, topics):
            raise RuntimeError("a broker does not serve a topic its image holds")
        return {"p50": _percentile(delays, 50) * 1000, "p99": _percentile(delays, 99) * 1000,
                "max": max(delays) * 1000, "create_p99": _percentile(round_trips, 99) * 1000,
                "create_p50": _percentile(round_trips, 50) * 1000, "sweep": (time.perf_counter() - swept) * 1000}
    finally:
        for conn in conns:
            conn.close()
        fleet.close()


def run_propagation() -> None:
    import uvloop

    raise_fd_limit()
    note(f"fleet metadata propagation: {PROPAGATION_BROKERS} brokers serving clients from one shared image, "
         f"{TOPICS} topic creations; anchor = the CreateTopics round trip at the controller")
    with tempfile.TemporaryDirectory(prefix="kraftwire-bench-propagation-") as tmp:
        workdir = Path(tmp)
        controller = ControllerProcess(workdir / "controller", server_args=["--log-level", "WARNING"],
                                       lifetime_s=CHILD_LIFETIME_S, start_timeout_s=30).start()
        try:
            r = uvloop.run(_propagation(controller.port, workdir / "brokers"))
        finally:
            controller.stop()
    emit(f"fleet.metadata_propagation brokers={PROPAGATION_BROKERS}", r["p99"], r["create_p99"], "ms",
         p50_ms=round(r["p50"], 2), p99_ms=round(r["p99"], 2), max_ms=round(r["max"], 2),
         create_p50_ms=round(r["create_p50"], 2), create_p99_ms=round(r["create_p99"], 2), topics=TOPICS,
         every_broker_checked_ms=round(r["sweep"], 1))
