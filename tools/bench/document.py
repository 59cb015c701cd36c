"""The benchmark document: every line of one `make bench` run, with the machine it ran on.

The README quotes a few figures and points here; regenerating this file is how the figures
stay the output of one run on one stated machine rather than lines gathered over time.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any


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


def write(path: Path, suites: list[str], lines: list[dict[str, Any]], on: str | None = None) -> None:
    """``on``: the machine the lines were measured on, when not this one."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "# Benchmark figures\n",
        ("Written by `make bench` (`python -m tools.bench " + " ".join(suites) + f" --doc {path.name}`)"
         if on is None else
         "Written from the lines one run of `python -m tools.bench " + " ".join(suites) + "` printed on the "
         "machine named below (`--lines FILE --machine TEXT`)") + "; do not edit by hand. Every line sets kraftwire (`ours`) against an anchor measured in "
        "the same run (`anchor_is` says what); only the ratios compare across machines.\n",
        f"- run: {when}",
        f"- machine: {on or machine()}\n",
    ]
    for suite in suites:
        mine = [line for line in lines if str(line["name"]).startswith(suite + ".")]
        if not mine:
            continue
        parts.append(f"## {suite}\n")
        parts.append("| figure | ours | anchor | unit | ratio |")
        parts.append("| --- | --- | --- | --- | --- |")
        parts.extend(f"| {line['name']} | {line['ours']} | {line['anchor']} | {line['unit']} | {line['ratio']} |"
                     for line in mine)
        parts.append("\n```")
        parts.extend(json.dumps(line) for line in mine)
        parts.append("```\n")
    path.write_text("\n".join(parts))
