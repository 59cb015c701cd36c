"""The figures of a validation run, for the terminal summary and the HTML report.

The tasks that write the tables tally what they wrote as they go (`Tally`), small whatever the
capture size: counts by API, version, client id and latency bin, violations by rule, flows by
capture, requests per timeline bin and a bounded sample of each API's latencies. The driver
adds the tallies up (`Tally.merge`) and turns them into figures (`figures`), so no table is
read again for the summary.
"""
from __future__ import annotations

import math
import os
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tools.replay import quantiles
from tools.replay.paths import local_path

# Brokers heartbeat every 2 s (Kafka's broker.heartbeat.interval.ms default): the timeline's
# bins are whole multiples of that, at most this many.
HEARTBEAT_NS = 2_000_000_000
TIMELINE_MAX_BINS = 300
# Latency histogram: bins of a quarter decade, from 1 µs to 100 s.
LATENCY_BINS_PER_DECADE = 4
LATENCY_MIN_MS = 1e-3
LATENCY_MAX_MS = 1e5
PERCENTILES = (0.5, 0.9, 0.99)
# Problems of whole captures or flows (violations that name no frame) listed in the summary.
PROBLEMS_SHOWN = 50
_NO_NAME = "(unmatched)"

# (capture, api key, API name, version, client id, latency bin) -> [frames, requests, Kafka bytes, first, last ns]
FrameKey = tuple[str, Any, str, Any, Any, Any]
# (capture, rule, severity) -> [count, an example's detail]
ViolationKey = tuple[str, str, str]
# (capture, flow, rule, severity, detail) of a violation naming no frame
Problem = tuple[str, Any, str, str, str]


def latency_edges() -> list[float]:
    decades = round(math.log10(LATENCY_MAX_MS / LATENCY_MIN_MS))
    return [LATENCY_MIN_MS * 10 ** (i / LATENCY_BINS_PER_DECADE) for i in range(decades * LATENCY_BINS_PER_DECADE + 1)]


def api_names(frames: pa.Table) -> pa.Array:
    """Each frame's API as the figures name it: its name, else its key, else unmatched."""
    by_key = pc.binary_join_element_wise("key ", pc.cast(frames["api_key"], pa.string()), "")
    return pc.coalesce(frames["api_name"], by_key, pa.scalar(_NO_NAME)).combine_chunks()


def latency_bins(latency_ms: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each response's bin of the latency histogram (null for requests): quarter decades from
    LATENCY_MIN_MS, the first and last bins taking what falls outside."""
    values = np.asarray(pc.fill_null(latency_ms, np.nan).to_numpy(zero_copy_only=False), np.float64)
    last_bin = len(latency_edges()) - 2
    scaled = np.zeros(len(values))
    positive = values > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled[positive] = np.floor(np.log10(values[positive] / LATENCY_MIN_MS) * LATENCY_BINS_PER_DECADE)
    return pa.array(np.clip(scaled, 0, last_bin).astype(np.int64), mask=np.isnan(values))


class Tally:
    """What a task wrote, added up; tallies merge by `merge`."""

    def __init__(self) -> None:
        self.frames: dict[FrameKey, list[int]] = {}
        self.violations: dict[ViolationKey, list[Any]] = {}
        self.problems: list[Problem] = []
        self.flows: dict[str, list[int]] = {}  # capture -> [flows, Kafka flows, gap bytes, unanswered]
        self.timeline: dict[tuple[str, int], int] = {}  # (API name, bin) -> requests
        self.latency: dict[str, tuple[int, float, quantiles.Sample]] = {}  # API name -> (answered, max, sample)

    def add_frames(self, frames: pa.Table) -> None:
        columns = pa.table({
            "capture": frames["capture"], "api_key": frames["api_key"], "name": api_names(frames),
            "api_version": frames["api_version"], "client_id": frames["client_id"],
            "latency_bin": latency_bins(frames["latency_ms"]),
            "request": pc.cast(pc.equal(frames["direction"], "request"), pa.int64()),
            "size": frames["size"], "timestamp_ns": frames["timestamp_ns"]})
        keys = ["capture", "api_key", "name", "api_version", "client_id", "latency_bin"]
        grouped = columns.group_by(keys, use_threads=False).aggregate([
            ("request", "count"), ("request", "sum"), ("size", "sum"), ("timestamp_ns", "min"), ("timestamp_ns", "max")])
        for row in zip(*(grouped[name].to_pylist() for name in
                         keys + ["request_count", "request_sum", "size_sum", "timestamp_ns_min", "timestamp_ns_max"])):
            _add_frames(self.frames, row[:6], list(row[6:]))

    def add_violations(self, violations: pa.Table) -> None:
        names = ("capture", "flow", "frame", "rule", "severity", "detail")
        for capture, flow, frame, rule, severity, detail in zip(*(violations[n].to_pylist() for n in names)):
            group = self.violations.setdefault((capture, rule, severity), [0, detail])
            group[0] += 1
            if frame is None:
                self.problems.append((capture, flow, rule, severity, detail))
        self.problems = _first_problems(self.problems)

    def add_flows(self, flows: pa.Table) -> None:
        names = ("capture", "kafka", "gap_bytes", "unanswered")
        for capture, kafka, gap_bytes, unanswered in zip(*(flows[n].to_pylist() for n in names)):
            _add(self.flows.setdefault(capture, [0, 0, 0, 0]), 1, int(kafka), gap_bytes, unanswered)

    def add_timeline(self, frames: pa.Table, first: int, bin_ns: int) -> None:
        """Requests per (API, timeline bin), bins of `bin_ns` from `first`; and the latency
        sample of each API's responses."""
        names = api_names(frames)
        requests = pc.equal(frames["direction"], "request")
        bins = pc.divide(pc.subtract(pc.filter(frames["timestamp_ns"], requests), first), bin_ns)
        counted = pa.table({"name": pc.filter(names, requests), "bin": bins}).group_by(
            ["name", "bin"], use_threads=False).aggregate([("bin", "count")])
        for name, bin_, count in zip(*(counted[n].to_pylist() for n in ("name", "bin", "bin_count"))):
            key = (name, bin_)
            self.timeline[key] = self.timeline.get(key, 0) + count
        answered = pc.is_valid(frames["latency_ms"])
        latencies = pa.table({"name": pc.filter(names, answered), "latency_ms": pc.filter(frames["latency_ms"], answered)})
        for name in pc.unique(latencies["name"]).to_pylist():
            values = pc.filter(latencies["latency_ms"], pc.equal(latencies["name"], name)).to_numpy()
            self._add_latency(name, len(values), float(values.max()), quantiles.sample(values))

    def merge(self, other: Tally) -> None:
        for key, sums in other.frames.items():
            _add_frames(self.frames, key, sums)
        for vkey, (count, example) in other.violations.items():
            self.violations.setdefault(vkey, [0, example])[0] += count
        self.problems = _first_problems(self.problems + other.problems)
        for capture, flow_sums in other.flows.items():
            _add(self.flows.setdefault(capture, [0, 0, 0, 0]), *flow_sums)
        for tkey, count in other.timeline.items():
            self.timeline[tkey] = self.timeline.get(tkey, 0) + count
        for name, (answered, most, part) in other.latency.items():
            self._add_latency(name, answered, most, part)

    def first_and_last_ns(self) -> tuple[int | None, int | None]:
        """The times of the first and last frames, or Nones without frames."""
        if not self.frames:
            return None, None
        return min(s[3] for s in self.frames.values()), max(s[4] for s in self.frames.values())

    def _add_latency(self, name: str, answered: int, most: float, part: quantiles.Sample) -> None:
        if name in self.latency:
            had, had_most, had_part = self.latency[name]
            answered, most, part = had + answered, max(had_most, most), quantiles.merge([had_part, part])
        self.latency[name] = (answered, most, part)


def merged(tallies: Iterable[Tally]) -> Tally:
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return total


def timeline_bins(first: int | None, last: int | None) -> int:
    """The timeline's bin width in ns: a whole number of heartbeat intervals, at most
    TIMELINE_MAX_BINS bins from the first frame to the last (0 without frames). A bin of any
    other width holds one heartbeat of a broker or two by turns, and the rate would zigzag with
    no change in the traffic."""
    if first is None or last is None:
        return 0
    return max(1, math.ceil((last - first + 1) / (HEARTBEAT_NS * TIMELINE_MAX_BINS))) * HEARTBEAT_NS


def figures(tally: Tally, captures: list[str]) -> dict[str, Any]:
    """The summary's figures from the run's whole tally. The few groups are ordered here."""
    edges = latency_edges()
    last_bin = len(edges) - 2
    by_api: dict[tuple[Any, ...], list[int]] = {}
    by_client: dict[tuple[Any, ...], set[int]] = {}
    by_capture: dict[str, list[int]] = {}
    histogram: dict[str, list[int]] = {}
    for (capture, api_key, name, api_version, client_id, latency_bin), (count, asked, *_) in tally.frames.items():
        _add(by_api.setdefault((api_key, name, api_version), [0, 0]), count, asked)
        _add(by_capture.setdefault(capture, [0, 0]), count, asked)
        if asked:
            versions = by_client.setdefault((client_id, name), set())
            if api_version is not None:
                versions.add(api_version)
        if latency_bin is not None:
            histogram.setdefault(name, [0] * (last_bin + 1))[int(latency_bin)] += count
    first, last = tally.first_and_last_ns()

    apis = [
        dict(api_key=api_key, api_name=name, api_version=api_version, requests=asked,
             responses=count - asked, unanswered=max(0, 2 * asked - count))
        for (api_key, name, api_version), (count, asked)
        in sorted(by_api.items(), key=lambda item: (_nulls_last(item[0][0]), _nulls_first(item[0][2])))
    ]
    latency = []
    for name, (answered, most, part) in sorted(tally.latency.items()):
        p50, p90, p99 = (quantiles.percentile(part, q) for q in PERCENTILES)
        latency.append(dict(api_name=name, count=answered, p50=p50, p90=p90, p99=p99, max=most))
    clients = [
        dict(client_id=client_id, api_name=name, versions=sorted(versions))
        for (client_id, name), versions in sorted(by_client.items(), key=lambda item: (_nulls_first(item[0][0]), item[0][1]))
    ]

    by_rule: dict[tuple[str, str], list[Any]] = {}
    severities: dict[str, int] = {}
    per_capture: dict[str, dict[str, int]] = {}
    for (capture, rule, severity), (count, example) in tally.violations.items():
        by_rule.setdefault((rule, severity), [0, example])[0] += count
        severities[severity] = severities.get(severity, 0) + count
        if severity in ("error", "warning"):
            counts = per_capture.setdefault(capture, dict(_NOTHING))
            counts[f"{severity}s"] += count
    rules = [dict(rule=rule, severity=severity, count=count, example=example)
             for (rule, severity), (count, example) in sorted(by_rule.items(), key=lambda item: -item[1][0])]
    problems = [dict(capture=capture, flow=flow, rule=rule, severity=severity, detail=detail)
                for capture, flow, rule, severity, detail in tally.problems]

    flow_totals = [0, 0, 0, 0]
    for capture, (count, kafka, gap_bytes, unanswered) in tally.flows.items():
        _add(flow_totals, count, kafka, gap_bytes, unanswered)
        per_capture.setdefault(capture, dict(_NOTHING)).update(flows=count, kafka_flows=kafka, unanswered=unanswered)
    for capture, (count, asked) in by_capture.items():
        per_capture.setdefault(capture, dict(_NOTHING)).update(frames=count, requests=asked)

    sizes = [(path, os.path.getsize(local) if os.path.exists(local := local_path(path)) else None) for path in captures]
    totals = dict(
        captures=len(captures), bytes=sum(size or 0 for _, size in sizes),
        frames=sum(count for count, _ in by_capture.values()), requests=sum(asked for _, asked in by_capture.values()),
        kafka_bytes=sum(sums[2] for sums in tally.frames.values()),
        flows=flow_totals[0], kafka_flows=flow_totals[1], gap_bytes=flow_totals[2], unanswered=flow_totals[3],
        violations=sum(severities.values()), **severities,
    )
    return dict(
        captures=[dict(capture=path, bytes=size, **per_capture.get(path, _NOTHING)) for path, size in sizes],
        totals=totals, apis=apis, rules=rules, latency=latency, clients=clients, problems=problems,
        timeline=_timeline(tally, first, last),
        latency_histogram=dict(edges_ms=edges, series=dict(sorted(histogram.items()))),
    )


_NOTHING = dict(flows=0, kafka_flows=0, frames=0, requests=0, unanswered=0, errors=0, warnings=0)


def _timeline(tally: Tally, first: int | None, last: int | None) -> dict[str, Any]:
    """Requests per second per API, in the bins of `timeline_bins`."""
    if first is None or last is None:
        return dict(start_ns=0, bin_ns=0, series={})
    bin_ns = timeline_bins(first, last)
    bins = (last - first) // bin_ns + 1
    series: dict[str, list[float]] = {}
    for (name, bin_), count in tally.timeline.items():
        series.setdefault(name, [0.0] * bins)[bin_] += count / (bin_ns / 1e9)
    return dict(start_ns=first, bin_ns=bin_ns, series=dict(sorted(series.items())))


def _add_frames(groups: dict[FrameKey, list[int]], key: FrameKey, sums: list[int]) -> None:
    had = groups.get(key)
    if had is None:
        groups[key] = list(sums)
    else:
        had[0] += sums[0]
        had[1] += sums[1]
        had[2] += sums[2]
        had[3] = min(had[3], sums[3])
        had[4] = max(had[4], sums[4])


def _first_problems(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p[0], _nulls_first(p[1])))[:PROBLEMS_SHOWN]


def _add(sums: list[int], *values: int) -> None:
    for i, value in enumerate(values):
        sums[i] += value


def _nulls_first(value: Any) -> tuple[bool, Any]:
    return value is not None, value if value is not None else 0


def _nulls_last(value: Any) -> tuple[bool, Any]:
    return value is None, value if value is not None else 0
