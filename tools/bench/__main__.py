"""python -m tools.bench SUITE [SUITE ...] [--doc FILE]

Prints one JSON object per line: {"name", "ours", "anchor", "unit", "ratio"}; with --doc, also
writes every line of the run, with the machine it ran on, into FILE (what `make bench` does).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

SUITES = {
    "codec": "tools.bench.codec",
    "fleet": "tools.bench.fleet",
    "metadata": "tools.bench.metadata",
    "metalog": "tools.bench.metalog",
    "server": "tools.bench.server",
    "quorum": "tools.bench.quorum",
    "replay": "tools.bench.replay",
    "stalls": "tools.bench.stalls",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench")
    parser.add_argument("suites", nargs="*", choices=[*SUITES, "all"], default=["all"])
    parser.add_argument("--doc", type=Path, help="also write the run's lines into this markdown file")
    parser.add_argument("--lines", type=Path, help="with --doc: write the lines of this JSON-lines file, printed by "
                                                   "an earlier run, instead of running the suites")
    parser.add_argument("--machine", help="with --lines: the machine those lines were measured on")
    args, options = parser.parse_known_args(argv)
    names = list(SUITES) if "all" in args.suites else args.suites
    if args.lines is not None:
        if args.doc is None:
            parser.error("--lines needs --doc")
        from tools.bench import document

        lines = [json.loads(line) for line in args.lines.read_text().splitlines() if line.startswith("{")]
        document.write(args.doc, names, lines, on=args.machine)
        return 0
    if options:
        # A suite's own options (replay --sizes ...) go to that one suite's command line.
        if len(names) != 1:
            parser.error(f"options {' '.join(options)} need exactly one suite")
        suite = importlib.import_module(SUITES[names[0]])
        if not hasattr(suite, "main"):
            parser.error(f"{names[0]} takes no options")
        return int(suite.main(options))
    for name in names:
        importlib.import_module(SUITES[name]).run()
    if args.doc is not None:
        from tools.bench import document, report

        document.write(args.doc, names, report.EMITTED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
