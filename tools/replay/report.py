"""The summary of a validation run: plain-text tables for the terminal, and a self-contained
HTML page whose plots are inline SVG (it opens offline, nothing is fetched)."""
from __future__ import annotations

import datetime
import html
from typing import Any, Sequence

from tools.replay.rules import RULES

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")


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
        "Frames per API and version",
        table(["api", "key", "version", "requests", "responses"],
              [(a["api_name"], a["api_key"], a["api_version"], a["requests"], a["responses"]) for a in figures["apis"]]),
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


# --- HTML ------------------------------------------------------------------------------------------


def write_html(figures: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(html_page(figures))


def html_page(figures: dict[str, Any]) -> str:
    t = figures["totals"]
    timeline = figures["timeline"]
    start = datetime.datetime.fromtimestamp(timeline["start_ns"] / 1e9, datetime.timezone.utc) if timeline["series"] else None
    bin_s = timeline["bin_ns"] / 1e9
    hist = figures["latency_histogram"]
    edges = hist["edges_ms"]
    sections = [
        f"<h1>Kafka capture validation</h1><p>{html.escape(_summary_line(t))}</p>",
        "<h2>Captures</h2>" + _html_table(["capture", "bytes"], [(c["capture"], c["bytes"]) for c in figures["captures"]]),
        "<h2>Requests over time per API</h2>"
        + (f"<p>from {start:%Y-%m-%d %H:%M:%S.%f} UTC, {bin_s:.3g} s per point</p>" if start else "")
        + line_chart(timeline["series"], [f"{i * bin_s:.3g}s" for i in range(len(next(iter(timeline["series"].values()), [])))],
                     "requests per interval"),
        "<h2>Latency distribution per API</h2>"
        + line_chart(hist["series"], [_ms(e) for e in edges[:-1]], "responses", log_x_labels=True),
        "<h2>Latency per API (ms)</h2>"
        + _html_table(["api", "responses", "p50", "p90", "p99", "max"],
                      [(r["api_name"], r["count"], r["p50"], r["p90"], r["p99"], r["max"]) for r in figures["latency"]]),
        "<h2>Frames per API and version</h2>"
        + _html_table(["api", "key", "version", "requests", "responses"],
                      [(a["api_name"], a["api_key"], a["api_version"], a["requests"], a["responses"]) for a in figures["apis"]]),
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
             "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}td.n{text-align:right}"
             "svg text{font-size:11px;font-family:sans-serif}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Kafka capture validation</title>"
            f"<style>{style}</style></head><body>{''.join(sections)}</body></html>\n")


def _summary_line(t: dict[str, Any]) -> str:
    return (f"{t['captures']} capture(s), {t['bytes']} bytes; {t['flows']} TCP flows, {t['kafka_flows']} Kafka; "
            f"{t['frames']} frames, {t['requests']} requests; {t['violations']} violations "
            f"({t.get('error', 0)} errors, {t.get('warning', 0)} warnings, {t.get('info', 0)} info)")


def _ms(value: float) -> str:
    return f"{value * 1000:.3g}µs" if value < 1 else f"{value:.3g}ms" if value < 1000 else f"{value / 1000:.3g}s"


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


def line_chart(series: dict[str, list[int]], labels: list[str], y_title: str, width: int = 900, height: int = 300,
               log_x_labels: bool = False) -> str:
    """One polyline per series over shared x positions, with a legend; inline SVG."""
    if not series or not labels:
        return "<p>no data</p>"
    left, right, top, bottom = 60, 170, 10, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(labels)
    peak = max(max(values) for values in series.values()) or 1

    def x(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / peak

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>",
             f"<rect x='{left}' y='{top}' width='{plot_w}' height='{plot_h}' fill='none' stroke='#999'/>"]
    for frac in (0, 0.5, 1):
        parts.append(f"<text x='{left - 5}' y='{y(peak * frac) + 4:.1f}' text-anchor='end'>{peak * frac:.4g}</text>")
    step = max(1, n // (8 if log_x_labels else 10))
    for i in range(0, n, step):
        parts.append(f"<text x='{x(i):.1f}' y='{height - bottom + 15}' text-anchor='middle'>{html.escape(labels[i])}</text>")
    parts.append(f"<text x='12' y='{top + plot_h / 2}' transform='rotate(-90 12 {top + plot_h / 2})' "
                 f"text-anchor='middle'>{html.escape(y_title)}</text>")
    for k, (name, values) in enumerate(series.items()):
        color = _PALETTE[k % len(_PALETTE)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='1.5' points='{points}'/>")
        ly = top + 14 * k + 8
        parts.append(f"<rect x='{width - right + 10}' y='{ly - 8}' width='10' height='10' fill='{color}'/>"
                     f"<text x='{width - right + 25}' y='{ly + 1}'>{html.escape(name)}</text>")
    parts.append("</svg>")
    return "".join(parts)
