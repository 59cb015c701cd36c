"""A fleet of test brokers heartbeating against one controller: 1,000, 5,000 and 10,000 brokers.

For each size a fresh controller starts as a subprocess (the embedded default: session timeout
9 s) and the fleet runs in this process on one uvloop event loop, every broker on its own
connection, heartbeating every 2 s. Once every broker is unfenced and one more interval has
passed, the counters start; after MEASURE_S they are read:

    {"name": "fleet.heartbeats brokers=N", "ours": answered heartbeats/s,
     "anchor": N / 2 (the offered rate), "unit": "heartbeats/s", "ratio": achieved / offered,
     "p50_ms", "p99_ms", "max_ms", "controller_cpu_pct", "controller_rss_mb", "fleet_cpu_pct",
     "other_processes_cpu_pct", ...}

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

from server.config import EMBEDDED_NODE_ID
from tools.bench.report import emit, note
from tools.broker.__main__ import raise_fd_limit
from tools.broker.fleet import Fleet, FleetOptions, default_ramp_s
from tools.broker.lifecycle import State
from tools.controller_process import ControllerProcess

SIZES = (1000, 5000, 10000)
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
        ramp_s=default_ramp_s(size, INTERVAL_S)))
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
