"""python -m tools.bench SUITE [SUITE ...] [--doc FILE]

Prints one JSON object per line: {"name", "ours", "anchor", "unit", "ratio"}; with --doc, also
writes every line of the run, with the machine it ran on, into FILE (what `make bench` does).
A suite named alone takes its own options; `python -m tools.bench SUITE --help` lists them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path

SUITES = {
    "codec": "tools.bench.codec",
    "fleet": "tools.bench.fleet",
    "kafka": "tools.bench.kafka_anchor",
    "metadata": "tools.bench.metadata",
    "metalog": "tools.bench.metalog",
    "server": "tools.bench.server",
    "quorum": "tools.bench.quorum",
    "replay": "tools.bench.replay",
    "stalls": "tools.bench.stalls",
}


def main(argv: list[str] | None = None) -> int:
    with_options = sorted(name for name, module in SUITES.items() if _has_main(module))
    # Its own -h is left out: "SUITE --help" goes to that suite's parser.
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench", add_help=False,
        epilog=f"A suite named alone takes its own options ({', '.join(with_options)}): "
               "python -m tools.bench SUITE --help lists them.")
    parser.add_argument("-h", "--help", action="store_true", help="show this help message and exit")
    # Checked below rather than with choices=: this Python's argparse checks an empty list
    # against the choices as one value, and refuses it.
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help=f"{', '.join(SUITES)} or all (the default)")
    parser.add_argument("--doc", type=Path, help="also write the run's lines into this markdown file")
    parser.add_argument("--lines", type=Path, help="with --doc: write the lines of this JSON-lines file, printed by "
                                                   "an earlier run, instead of running the suites")
    parser.add_argument("--machine", help="with --lines: the machine those lines were measured on")
    args, options = parser.parse_known_args(argv)
    if unknown := [name for name in args.suites if name not in SUITES and name != "all"]:
        parser.error(f"no suite {', '.join(unknown)}; the suites are {', '.join(SUITES)} and all")
    names = list(SUITES) if not args.suites or "all" in args.suites else args.suites
    if args.help:
        if len(names) == 1 and names[0] in with_options:
            options.append("--help")
        else:
            parser.print_help()
            return 0
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
        if names[0] not in with_options:
            parser.error(f"{names[0]} takes no options")
        return int(importlib.import_module(SUITES[names[0]]).main(options))
    for name in names:
        importlib.import_module(SUITES[name]).run()
    if args.doc is not None:
        from tools.bench import document, report

        document.write(args.doc, names, report.EMITTED)
    return 0


def _has_main(module: str) -> bool:
    """Whether a suite reads options of its own, without importing it (some suites import
    Spark or the server at import time)."""
    spec = importlib.util.find_spec(module)
    return spec is not None and spec.origin is not None and "\ndef main(" in Path(spec.origin).read_text()


if __name__ == "__main__":
    sys.exit(main())
