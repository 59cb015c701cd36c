"""The figures of a validation run, aggregated by Spark from its tables into plain Python
values (small whatever the capture size) for the terminal summary and the HTML report."""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from tools.replay.tables import Tables, local_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Brokers heartbeat every 2 s (Kafka's broker.heartbeat.interval.ms default): the timeline's
# bins are whole multiples of that, at most this many.
HEARTBEAT_NS = 2_000_000_000
TIMELINE_MAX_BINS = 300
# Latency histogram: bins of a quarter decade, from 1 µs to 100 s.
LATENCY_BINS_PER_DECADE = 4
LATENCY_MIN_MS = 1e-3
LATENCY_MAX_MS = 1e5
_NO_NAME = "(unmatched)"


def latency_edges() -> list[float]:
    decades = round(math.log10(LATENCY_MAX_MS / LATENCY_MIN_MS))
    return [LATENCY_MIN_MS * 10 ** (i / LATENCY_BINS_PER_DECADE) for i in range(decades * LATENCY_BINS_PER_DECADE + 1)]


def collect(tables: Tables, captures: list[str]) -> dict[str, Any]:
    """Each table is read by one aggregation pass (the frames' latency percentiles per API by
    a second, their timeline, binned from the first frame's time, by a third): every extra
    Spark job costs about as much as a small table's whole pass. The few rows come back
    unsorted and are ordered here, since a sorted collect costs Spark a sampling job of its own."""
    from pyspark.sql import functions as F

    frames, violations, flows = tables.frames, tables.violations, tables.flows
    is_request = (F.col("direction") == "request").cast("int")
    name = F.coalesce("api_name", F.concat(F.lit("key "), F.col("api_key").cast("string")), F.lit(_NO_NAME))
    edges = latency_edges()
    last_bin = len(edges) - 2
    scaled = F.floor(F.log10(F.col("latency_ms") / LATENCY_MIN_MS) * LATENCY_BINS_PER_DECADE)
    latency_bin = F.least(F.greatest(F.coalesce(scaled, F.lit(0)), F.lit(0)), F.lit(last_bin))
    named = frames.select(
        "capture", "api_key", name.alias("name"), "api_version", "client_id", is_request.alias("request"), "size",
        "timestamp_ns", "latency_ms",
        F.when(F.col("latency_ms").isNotNull(), latency_bin).alias("latency_bin"))

    # One plain grouping by every key a figure needs, small whatever the capture size (APIs,
    # versions, client ids, latency bins), added up here into each figure's own grouping.
    frame_rows = named.groupBy("capture", "api_key", "name", "api_version", "client_id", "latency_bin").agg(
        F.count("*").alias("frames"), F.sum("request").alias("requests"), F.sum("size").alias("kafka_bytes"),
        F.min("timestamp_ns").alias("first"), F.max("timestamp_ns").alias("last")).collect()
    # Percentiles are wanted per API only: computed in every group above, their sketches
    # would cost more than all the other aggregates together.
    latency_rows = named.where(F.col("latency_ms").isNotNull()).groupBy("name").agg(
        F.count("latency_ms").alias("answered"), F.max("latency_ms").alias("max"),
        F.percentile_approx("latency_ms", [0.5, 0.9, 0.99], 10000).alias("p")).collect()

    by_api: dict[tuple[Any, ...], list[int]] = {}
    by_client: dict[tuple[Any, ...], set[int]] = {}
    by_capture: dict[str, list[int]] = {}
    histogram: dict[str, list[int]] = {}
    for r in frame_rows:
        _add(by_api.setdefault((r.api_key, r.name, r.api_version), [0, 0]), r.frames, r.requests)
        _add(by_capture.setdefault(r.capture, [0, 0]), r.frames, r.requests)
        if r.requests:
            versions = by_client.setdefault((r.client_id, r.name), set())
            if r.api_version is not None:
                versions.add(r.api_version)
        if r.latency_bin is not None:
            histogram.setdefault(r.name, [0] * (last_bin + 1))[int(r.latency_bin)] += r.frames
    frame_totals = dict(frames=sum(r.frames for r in frame_rows), requests=sum(r.requests for r in frame_rows),
                        kafka_bytes=sum(r.kafka_bytes for r in frame_rows),
                        first=min((r.first for r in frame_rows), default=None),
                        last=max((r.last for r in frame_rows), default=None))

    apis = [
        dict(api_key=api_key, api_name=name, api_version=api_version, requests=asked,
             responses=count - asked, unanswered=max(0, 2 * asked - count))
        for (api_key, name, api_version), (count, asked)
        in sorted(by_api.items(), key=lambda item: (_nulls_last(item[0][0]), _nulls_first(item[0][2])))
    ]
    latency = [
        dict(api_name=r.name, count=r.answered, p50=r.p[0], p90=r.p[1], p99=r.p[2], max=r.max)
        for r in sorted(latency_rows, key=lambda r: r.name)
    ]
    clients = [
        dict(client_id=client_id, api_name=name, versions=sorted(versions))
        for (client_id, name), versions in sorted(by_client.items(), key=lambda item: (_nulls_first(item[0][0]), item[0][1]))
    ]

    violation_sets = [["rule", "severity"], ["severity"], ["capture", "severity"]]
    rule_set, severity_set, capture_severity_set = range(3)
    violation_rows: dict[int, list[Any]] = {}
    for r in violations.groupingSets(violation_sets, "rule", "severity", "capture").agg(
            F.count("*").alias("count"), F.first("detail").alias("example"),
            _grouping(violation_sets, ["rule", "severity", "capture"]).alias("set")).collect():
        violation_rows.setdefault(r.set, []).append(r)
    rules = [
        dict(rule=r.rule, severity=r.severity, count=r["count"], example=r.example)
        for r in sorted(violation_rows.get(rule_set, []), key=lambda r: -r["count"])
    ]
    severities = {r.severity: r["count"] for r in violation_rows.get(severity_set, [])}
    problems = [
        dict(capture=r.capture, flow=r.flow, rule=r.rule, severity=r.severity, detail=r.detail)
        for r in violations.where(F.col("frame").isNull()).orderBy("capture", "flow").limit(50).collect()
    ]

    flow_sets: list[list[str]] = [[], ["capture"]]
    flow_rows: dict[int, list[Any]] = {}
    for r in flows.groupingSets(flow_sets, "capture").agg(
            F.count("*").alias("flows"), F.sum(F.col("kafka").cast("int")).alias("kafka_flows"),
            F.sum("gap_bytes").alias("gap_bytes"), F.sum("unanswered").alias("unanswered"),
            _grouping(flow_sets, ["capture"]).alias("set")).collect():
        flow_rows.setdefault(r.set, []).append(r)
    flow_totals = flow_rows[0][0].asDict() if 0 in flow_rows else dict(flows=0)

    per_capture: dict[str, dict[str, int]] = {}
    for r in flow_rows.get(1, []):
        per_capture.setdefault(r.capture, dict(_NOTHING)).update(
            flows=r.flows, kafka_flows=r.kafka_flows or 0, unanswered=r.unanswered or 0)
    for capture, (count, asked) in by_capture.items():
        per_capture.setdefault(capture, dict(_NOTHING)).update(frames=count, requests=asked)
    for r in violation_rows.get(capture_severity_set, []):
        if r.severity in ("error", "warning"):
            per_capture.setdefault(r.capture, dict(_NOTHING))[f"{r.severity}s"] = r["count"]

    sizes = [(path, os.path.getsize(local) if os.path.exists(local := local_path(path)) else None) for path in captures]
    totals = dict(
        captures=len(captures), bytes=sum(size or 0 for _, size in sizes), frames=frame_totals["frames"],
        requests=frame_totals["requests"], kafka_bytes=frame_totals["kafka_bytes"],
        flows=flow_totals["flows"], kafka_flows=flow_totals.get("kafka_flows") or 0,
        gap_bytes=flow_totals.get("gap_bytes") or 0, unanswered=flow_totals.get("unanswered") or 0, violations=sum(severities.values()), **severities,
    )
    return dict(
        captures=[dict(capture=path, bytes=size, **per_capture.get(path, _NOTHING)) for path, size in sizes],
        totals=totals, apis=apis, rules=rules, latency=latency, clients=clients, problems=problems,
        timeline=_timeline(named, frame_totals["first"], frame_totals["last"]),
        latency_histogram=dict(edges_ms=edges, series=dict(sorted(histogram.items()))),
    )


_NOTHING = dict(flows=0, kafka_flows=0, frames=0, requests=0, unanswered=0, errors=0, warnings=0)


def _timeline(named: DataFrame, first: int | None, last: int | None) -> dict[str, Any]:
    """Requests per second per API, in bins of a whole number of heartbeat intervals: a bin
    of any other width holds one heartbeat of a broker or two by turns, and the rate would
    zigzag with no change in the traffic."""
    from pyspark.sql import functions as F

    if first is None or last is None:  # no frames: both or neither
        return dict(start_ns=0, bin_ns=0, series={})
    beats = max(1, math.ceil((last - first + 1) / (HEARTBEAT_NS * TIMELINE_MAX_BINS)))
    bin_ns = beats * HEARTBEAT_NS
    bins = (last - first) // bin_ns + 1
    series: dict[str, list[float]] = {}
    for r in (named.where(F.col("request") == 1).groupBy("name", F.floor((F.col("timestamp_ns") - first) / bin_ns).alias("bin"))
              .count().collect()):
        series.setdefault(r.name, [0.0] * bins)[int(r.bin)] += r["count"] / (bin_ns / 1e9)
    return dict(start_ns=first, bin_ns=bin_ns, series=dict(sorted(series.items())))


def _add(sums: list[int], *values: int) -> None:
    for i, value in enumerate(values):
        sums[i] += value


def _grouping(sets: list[list[str]], columns: list[str]) -> Column:
    """Which of `sets` a row of `groupingSets(sets, *columns)` aggregates: its index."""
    from pyspark.sql import functions as F

    # grouping_id() sets a bit, the first column's the highest, for each column left out of the set.
    ids = [sum(1 << (len(columns) - 1 - i) for i, c in enumerate(columns) if c not in group) for group in sets]
    index = F.lit(None).cast("int")
    for i, gid in enumerate(ids):
        index = F.when(F.grouping_id() == gid, F.lit(i)).otherwise(index)
    return index


def _nulls_first(value: Any) -> tuple[bool, Any]:
    return value is not None, value if value is not None else 0


def _nulls_last(value: Any) -> tuple[bool, Any]:
    return value is None, value if value is not None else 0
