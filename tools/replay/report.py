"""The summary of a validation run: plain-text tables for the terminal, and a self-contained
HTML page whose charts are drawn by Plotly, its script inlined (it opens offline, nothing is
fetched; the charts zoom and say their values on hover)."""
from __future__ import annotations

import datetime
import html
import importlib.resources
import json
from typing import Any, NamedTuple, Sequence

from tools.replay.rules import RULES

# The charts, in page order, with the id of the element each is drawn in.
CHARTS = ("rates", "latency")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned text columns under a rule; numbers right-aligned."""
    cells = [[_text(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [bool(rows) and all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in cells])


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def terminal(figures: dict[str, Any]) -> str:
    t = figures["totals"]
    parts = [
        f"{t['captures']} capture(s), {t['bytes'] / 1e6:.1f} MB: {t['flows']} TCP flows ({t['kafka_flows']} Kafka), "
        f"{t['frames']} frames ({t['requests']} requests), {t['violations']} violations "
        f"({t.get('error', 0)} errors, {t.get('warning', 0)} warnings, {t.get('info', 0)} info)"
        + (f", {t['gap_bytes']} bytes in gaps" if t["gap_bytes"] else "")
        + (f"; {figures['seconds']:.1f} s" if "seconds" in figures else ""),
        "",
        "Per capture",
        table(_CAPTURE_HEADERS, _capture_rows(figures)),
        "",
        "Frames per API and version",
        table(_API_HEADERS, _api_rows(figures)),
        "",
        "Violations per rule",
        table(["rule", "severity", "count", "example"],
              [(r["rule"], r["severity"], r["count"], _clip(r["example"], 90)) for r in figures["rules"]])
        if figures["rules"] else "none",
        "",
        "Latency per API (ms)",
        table(["api", "responses", "p50", "p90", "p99", "max"],
              [(r["api_name"], r["count"], r["p50"], r["p90"], r["p99"], r["max"]) for r in figures["latency"]]),
        "",
        "API versions per client id",
        table(["client id", "api versions"], _versions_per_client(figures["clients"])),
    ]
    if figures["problems"]:
        parts += ["", "Problems outside frames (first 50)",
                  table(["capture", "flow", "rule", "detail"],
                        [(p["capture"], p["flow"], p["rule"], _clip(p["detail"], 90)) for p in figures["problems"]])]
    return "\n".join(parts)


def _versions_per_client(clients: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    """One line per client id: "ApiVersions v3, Metadata v9,12, ..."."""
    spoken: dict[str | None, list[str]] = {}
    for c in clients:
        spoken.setdefault(c["client_id"], []).append(f"{c['api_name']} v{','.join(map(str, c['versions']))}")
    return [(client_id, ", ".join(apis)) for client_id, apis in spoken.items()]


def _clip(text: str | None, width: int) -> str | None:
    return text if text is None or len(text) <= width else text[: width - 1] + "…"


_CAPTURE_HEADERS = ["capture", "MB", "flows", "kafka flows", "frames", "requests", "unanswered", "errors", "warnings"]
_API_HEADERS = ["api", "key", "version", "requests", "responses", "unanswered"]


def _capture_rows(figures: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(c["capture"], None if c["bytes"] is None else round(c["bytes"] / 1e6, 1), c["flows"], c["kafka_flows"],
             c["frames"], c["requests"], c["unanswered"], c["errors"], c["warnings"]) for c in figures["captures"]]


def _api_rows(figures: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(a["api_name"], a["api_key"], a["api_version"], a["requests"], a["responses"], a["unanswered"])
            for a in figures["apis"]]


# --- HTML ------------------------------------------------------------------------------------------


def write_html(figures: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(html_page(figures))


def html_page(figures: dict[str, Any]) -> str:
    t = figures["totals"]
    sections = [
        f"<h1>Kafka capture validation</h1><p>{html.escape(_summary_line(t))}</p>",
        "<h2>Per capture</h2>" + _html_table(_CAPTURE_HEADERS, _capture_rows(figures)),
        "<h2>Requests per second per API</h2>" + _chart("rates", rates_chart(figures["timeline"])),
        "<h2>Latency distribution per API</h2>"
        "<p>Fetch answers wait up to the request's max_wait_ms when there is nothing new (a long poll): "
        "the latency axis is logarithmic so they sit apart from the quick answers.</p>"
        + _chart("latency", latency_chart(figures["latency_histogram"])),
        "<h2>Latency per API (ms)</h2>"
        + _html_table(["api", "responses", "p50", "p90", "p99", "max"],
                      [(r["api_name"], r["count"], r["p50"], r["p90"], r["p99"], r["max"]) for r in figures["latency"]]),
        "<h2>Frames per API and version</h2>" + _html_table(_API_HEADERS, _api_rows(figures)),
        "<h2>Violations per rule</h2>"
        + _html_table(["rule", "severity", "count", "meaning", "example"],
                      [(r["rule"], r["severity"], r["count"], RULES[r["rule"]].summary if r["rule"] in RULES else "",
                        r["example"]) for r in figures["rules"]]),
        "<h2>API versions per client id</h2>"
        + _html_table(["client id", "api", "versions"], [(c["client_id"], c["api_name"], c["versions"]) for c in figures["clients"]]),
        "<h2>Problems outside frames (first 50)</h2>"
        + _html_table(["capture", "flow", "rule", "severity", "detail"],
                      [(p["capture"], p["flow"], p["rule"], p["severity"], p["detail"]) for p in figures["problems"]]),
    ]
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:.5em 0}"
             "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}td.n{text-align:right}")
    # The library once, inline, ahead of the charts that use it.
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Kafka capture validation</title>"
            f"<style>{style}</style><script>{_plotly_js()}</script></head><body>{''.join(sections)}</body></html>\n")


def rates_chart(timeline: dict[str, Any]) -> Chart | None:
    """Requests per second per API against the capture's clock (UTC)."""
    if not timeline["series"]:
        return None
    bin_s = timeline["bin_ns"] / 1e9
    start = datetime.datetime.fromtimestamp(timeline["start_ns"] / 1e9, datetime.timezone.utc).replace(tzinfo=None)
    traces = []
    for name, rates in timeline["series"].items():
        times = [(start + datetime.timedelta(seconds=i * bin_s)).isoformat(sep=" ") for i in range(len(rates))]
        traces.append(dict(type="scatter", x=times, y=rates, mode="lines", name=name, line=dict(shape="hv")))
    return Chart(traces, dict(xaxis=dict(title=dict(text=f"capture time (UTC), {bin_s:g} s bins"), type="date"),
                              yaxis=dict(title=dict(text="requests per second")), hovermode="x unified"))


def latency_chart(histogram: dict[str, Any]) -> Chart | None:
    """Responses per API in logarithmic latency bins, drawn at each bin's geometric middle."""
    if not histogram["series"]:
        return None
    edges = histogram["edges_ms"]
    middles = [(lo * hi) ** 0.5 for lo, hi in zip(edges, edges[1:])]
    traces = [dict(type="scatter", x=middles, y=counts, mode="lines+markers", name=name,
                   hovertemplate="%{x:.3g} ms: %{y} responses")
              for name, counts in histogram["series"].items()]
    return Chart(traces, dict(xaxis=dict(title=dict(text="latency (ms, log scale)"), type="log"),
                              yaxis=dict(title=dict(text="responses per bin"))))


class Chart(NamedTuple):
    """A Plotly chart as plotly.js takes it: its traces and its layout, plain JSON. Written as
    such rather than through plotly's Python figures, whose checking of every property costs
    seconds at the end of each run."""

    traces: list[dict[str, Any]]
    layout: dict[str, Any]


def _chart(element_id: str, chart: Chart | None) -> str:
    if chart is None:
        return f"<p id='{element_id}'>no data</p>"
    layout = dict(chart.layout, height=380, margin=dict(l=60, r=20, t=20, b=50))
    return (f"<div id='{element_id}'></div><script>Plotly.newPlot({json.dumps(element_id)}, "
            f"{json.dumps(chart.traces)}, {json.dumps(layout)}, {{responsive: true}});</script>")


def _plotly_js() -> str:
    """plotly.js as the plotly package ships it."""
    return (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def _summary_line(t: dict[str, Any]) -> str:
    return (f"{t['captures']} capture(s), {t['bytes']} bytes; {t['flows']} TCP flows, {t['kafka_flows']} Kafka; "
            f"{t['frames']} frames, {t['requests']} requests, {t['unanswered']} unanswered; {t['violations']} violations "
            f"({t.get('error', 0)} errors, {t.get('warning', 0)} warnings, {t.get('info', 0)} info)")


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(
            f"<td class='n'>{_text(v)}</td>" if isinstance(v, (int, float)) else f"<td>{html.escape(_text(v))}</td>"
            for v in row) + "</tr>"
        for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
