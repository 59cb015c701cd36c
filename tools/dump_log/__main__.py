"""``python -m tools.dump_log FILES...``: kafka-dump-log.sh with the cluster metadata decoder."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tools.dump_log.dump import Options, dump_file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.dump_log",
        description="Print the record batches of __cluster_metadata log segments (.log) and "
                    "snapshots (.checkpoint, bootstrap.checkpoint), with every metadata and "
                    "control record decoded. Exits 1 if any file is damaged or unreadable.")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="a segment or snapshot file")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object per record, with its batch's metadata in it")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="print the batches only, not their records")
    # Kafka needs this flag to decode metadata records; here it is always on.
    parser.add_argument("--cluster-metadata-decoder", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    options = Options(json=args.json, skip_record_metadata=args.skip_record_metadata)
    ok = True
    try:
        for path in args.files:
            ok = dump_file(path, options, sys.stdout, sys.stderr) and ok
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader (head, less) went away; stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
