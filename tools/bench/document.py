"""The benchmark document: the lines of the last run of each suite, with the machine each ran on.

The README quotes a few figures and points here; regenerating this file is how the figures
stay the output of stated runs on stated machines rather than lines gathered over time. A run
replaces the sections of the suites it ran and keeps the others as they were, each section
naming its own run, machine and command, since not every machine can run every suite (Kafka's
jars, for one, come from Maven Central, which some machines cannot reach).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

TITLE = "# Benchmark figures\n"
INTRO = ("Written by `python -m tools.bench SUITE ... --doc BENCHMARKS.md` (`make bench` runs every suite), or "
         "from the lines a run printed on another machine (`--lines FILE --machine TEXT`); do not edit by hand. "
         "A run replaces the sections of its suites and keeps the others; each section names the run, machine "
         "and command its lines came from. Every line sets kraftwire (`ours`) against an anchor measured in "
         "the same run (`anchor_is` says what); only the ratios compare across machines.\n")
# What a section says of where its lines came from, before its table.
PROVENANCE = ("- run:", "- machine:", "- command:")


def machine() -> str:
    """Cores, processor, Python and the load when the run ended: what a reader needs to
    judge the figures."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} cores ({model}), Python {platform.python_version()} on "
            f"{platform.system()} {platform.release()}; load average at the end: {load}")


def sections(text: str) -> dict[str, str]:
    """The sections of an existing document by suite, each body beginning with its own run
    and machine (a document written as one run keeps them once, above the first section)."""
    head, *blocks = re.split(r"^## ", text, flags=re.M)
    shared = [line for line in head.splitlines() if line.startswith(PROVENANCE)]
    found = {}
    for block in blocks:
        name, _, body = block.partition("\n")
        body = body.strip("\n")
        if not body.startswith(PROVENANCE):
            body = "\n".join([*shared, "", body])
        found[name.strip()] = body
    return found


def section(suites: list[str], suite: str, lines: list[dict[str, Any]], when: str, on: str | None) -> str | None:
    mine = [line for line in lines if str(line["name"]).startswith(suite + ".")]
    if not mine:
        return None
    parts = [f"- run: {when}", f"- machine: {on or machine()}",
             f"- command: `python -m tools.bench {' '.join(suites)}`", "",
             "| figure | ours | anchor | unit | ratio |", "| --- | --- | --- | --- | --- |"]
    parts.extend(f"| {line['name']} | {line['ours']} | {line['anchor']} | {line['unit']} | {line['ratio']} |"
                 for line in mine)
    parts.append("\n```")
    parts.extend(json.dumps(line) for line in mine)
    parts.append("```")
    return "\n".join(parts)


def write(path: Path, suites: list[str], lines: list[dict[str, Any]], on: str | None = None) -> None:
    """``on``: the machine the lines were measured on, when not this one. The sections of
    other suites already in ``path`` stay as they are."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    merged = sections(path.read_text(encoding="utf-8")) if path.exists() else {}
    for suite in suites:
        body = section(suites, suite, lines, when, on)
        if body is not None:
            merged[suite] = body
    parts = [TITLE, INTRO]
    parts.extend(f"## {name}\n\n{body}\n" for name, body in merged.items())
    path.write_text("\n".join(parts), encoding="utf-8")
