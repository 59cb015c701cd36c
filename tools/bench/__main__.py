"""python -m tools.bench SUITE [SUITE ...]

Prints one JSON object per line: {"name", "ours", "anchor", "unit", "ratio"}.
"""

from __future__ import annotations

import argparse
import importlib
import sys

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
    args, options = parser.parse_known_args(argv)
    names = list(SUITES) if "all" in args.suites else args.suites
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
