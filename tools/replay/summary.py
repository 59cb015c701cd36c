"""The figures of a validation run, aggregated by Spark from its tables into plain Python
values (small whatever the capture size) for the terminal summary and the HTML report."""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from tools.replay.job import local_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from tools.replay.job import Tables

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
    from pyspark.sql import functions as F

    frames, violations, flows = tables.frames, tables.violations, tables.flows
    is_request = F.col("direction") == "request"
    name = F.coalesce("api_name", F.concat(F.lit("key "), F.col("api_key").cast("string")), F.lit(_NO_NAME))
    named = frames.withColumn("name", name)

    # A response carries its request's API, so what a version's requests lack in responses
    # went unanswered.
    apis = [
        dict(api_key=r.api_key, api_name=r.name, api_version=r.api_version, requests=r.requests, responses=r.responses,
             unanswered=max(0, r.requests - r.responses))
        for r in named.groupBy("api_key", "name", "api_version")
        .agg(F.sum(is_request.cast("int")).alias("requests"), F.sum((~is_request).cast("int")).alias("responses"))
        .orderBy(F.col("api_key").asc_nulls_last(), "api_version").collect()
    ]
    rules = [
        dict(rule=r.rule, severity=r.severity, count=r["count"], example=r.example)
        for r in violations.groupBy("rule", "severity")
        .agg(F.count("*").alias("count"), F.first("detail").alias("example"))
        .orderBy(F.desc("count")).collect()
    ]
    latency = [
        dict(api_name=r.name, count=r["count"], p50=r.p[0], p90=r.p[1], p99=r.p[2], max=r.max)
        for r in named.where(F.col("latency_ms").isNotNull()).groupBy("name")
        .agg(F.count("*").alias("count"), F.percentile_approx("latency_ms", [0.5, 0.9, 0.99], 10000).alias("p"),
             F.max("latency_ms").alias("max"))
        .orderBy("name").collect()
    ]
    clients = [
        dict(client_id=r.client_id, api_name=r.name, versions=sorted(r.versions))
        for r in named.where(is_request).groupBy("client_id", "name")
        .agg(F.collect_set("api_version").alias("versions"))
        .orderBy(F.col("client_id").asc_nulls_first(), "name").collect()
    ]
    problems = [
        dict(capture=r.capture, flow=r.flow, rule=r.rule, severity=r.severity, detail=r.detail)
        for r in violations.where(F.col("frame").isNull()).orderBy("capture", "flow").limit(50).collect()
    ]
    # An aggregate without grouping is one row, even over an empty table.
    (flow_totals,) = flows.agg(
        F.count("*").alias("flows"), F.sum(F.col("kafka").cast("int")).alias("kafka_flows"),
        F.sum("gap_bytes").alias("gap_bytes"), F.sum("unanswered").alias("unanswered")).collect()
    (frame_totals,) = frames.agg(
        F.count("*").alias("frames"), F.sum(is_request.cast("int")).alias("requests"),
        F.sum("size").alias("kafka_bytes"), F.min("timestamp_ns").alias("first"),
        F.max("timestamp_ns").alias("last")).collect()
    severities = {r.severity: r["count"] for r in violations.groupBy("severity").count().collect()}

    per_capture = _per_capture(tables, is_request)
    sizes = [(path, os.path.getsize(local) if os.path.exists(local := local_path(path)) else None) for path in captures]
    totals = dict(
        captures=len(captures), bytes=sum(size or 0 for _, size in sizes), frames=frame_totals.frames,
        requests=frame_totals.requests or 0, kafka_bytes=frame_totals.kafka_bytes or 0,
        flows=flow_totals.flows, kafka_flows=flow_totals.kafka_flows or 0, gap_bytes=flow_totals.gap_bytes or 0,
        unanswered=flow_totals.unanswered or 0, violations=sum(severities.values()), **severities,
    )
    return dict(
        captures=[dict(capture=path, bytes=size, **per_capture.get(path, _NOTHING)) for path, size in sizes], totals=totals, apis=apis, rules=rules,
        latency=latency, clients=clients, problems=problems,
        timeline=_timeline(named, is_request, frame_totals.first, frame_totals.last),
        latency_histogram=_latency_histogram(named),
    )


_NOTHING = dict(flows=0, kafka_flows=0, frames=0, requests=0, unanswered=0, errors=0, warnings=0)


def _per_capture(tables: Tables, is_request: Column) -> dict[str, dict[str, int]]:
    """Per capture: its flows, frames, requests left unanswered, and broken rules by severity."""
    from pyspark.sql import functions as F

    out: dict[str, dict[str, int]] = {}
    for r in tables.flows.groupBy("capture").agg(
            F.count("*").alias("flows"), F.sum(F.col("kafka").cast("int")).alias("kafka_flows"),
            F.sum("unanswered").alias("unanswered")).collect():
        out.setdefault(r.capture, dict(_NOTHING)).update(flows=r.flows, kafka_flows=r.kafka_flows or 0,
                                                          unanswered=r.unanswered or 0)
    for r in tables.frames.groupBy("capture").agg(
            F.count("*").alias("frames"), F.sum(is_request.cast("int")).alias("requests")).collect():
        out.setdefault(r.capture, dict(_NOTHING)).update(frames=r.frames, requests=r.requests or 0)
    for r in tables.violations.where(F.col("severity").isin("error", "warning")).groupBy("capture", "severity").count().collect():
        out.setdefault(r.capture, dict(_NOTHING))[f"{r.severity}s"] = r["count"]
    return out


def _timeline(named: DataFrame, is_request: Column, first: int | None, last: int | None) -> dict[str, Any]:
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
    for r in (named.where(is_request).groupBy("name", F.floor((F.col("timestamp_ns") - first) / bin_ns).alias("bin"))
              .count().collect()):
        series.setdefault(r.name, [0.0] * bins)[int(r.bin)] += r["count"] / (bin_ns / 1e9)
    return dict(start_ns=first, bin_ns=bin_ns, series=dict(sorted(series.items())))


def _latency_histogram(named: DataFrame) -> dict[str, Any]:
    """Responses per API in logarithmic latency bins (`latency_edges`)."""
    from pyspark.sql import functions as F

    edges = latency_edges()
    last = len(edges) - 2
    scaled = F.floor(F.log10(F.col("latency_ms") / LATENCY_MIN_MS) * LATENCY_BINS_PER_DECADE)
    bin_column = F.least(F.greatest(F.coalesce(scaled, F.lit(0)), F.lit(0)), F.lit(last)).alias("bin")
    series: dict[str, list[int]] = {}
    for r in named.where(F.col("latency_ms").isNotNull()).groupBy("name", bin_column).count().collect():
        series.setdefault(r.name, [0] * (last + 1))[int(r.bin)] += r["count"]
    return dict(edges_ms=edges, series=dict(sorted(series.items())))
