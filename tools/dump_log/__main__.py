"""``python -m tools.dump_log --cluster-metadata-decoder --files A,B``: kafka-dump-log.sh for
the metadata log (``python -m tools.dump_log FILES...`` decodes everything too)."""

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
                    "snapshots (.checkpoint, bootstrap.checkpoint) as kafka-dump-log.sh does. "
                    "Exits 1 if any file is damaged or unreadable, or if a segment's batches "
                    "leave a gap in the offsets.")
    parser.add_argument("paths", nargs="*", type=Path, metavar="FILE",
                        help="a segment or snapshot file; given this way, every record is decoded "
                             "as with --cluster-metadata-decoder")
    parser.add_argument("--files", metavar="FILE1,FILE2,...",
                        help="the comma-separated list of files to dump, as kafka-dump-log.sh takes them")
    parser.add_argument("--cluster-metadata-decoder", action="store_true",
                        help="decode the records as cluster metadata records (implies --print-data-log)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print each record's content (implies --deep-iteration)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="list the records of each batch, not only the batches")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="leave out each record's offset, sizes and headers")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object per record, with its batch's metadata in it")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    files = list(args.paths) + [Path(f) for f in (args.files or "").split(",") if f]
    if not files:
        parser.error("no file to dump: give --files FILE1,FILE2,... or the files themselves")
    if args.files is None:
        # Files given alone: the metadata log's whole content, as this tool always printed it.
        options = Options(json=args.json, skip_record_metadata=args.skip_record_metadata)
    else:
        print_data = args.print_data_log or args.cluster_metadata_decoder
        options = Options(json=args.json, skip_record_metadata=args.skip_record_metadata,
                          deep_iteration=args.deep_iteration or print_data, print_data_log=print_data)
    ok = True
    try:
        for path in files:
            ok = dump_file(path, options, sys.stdout, sys.stderr) and ok
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader (head, less) went away; stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
