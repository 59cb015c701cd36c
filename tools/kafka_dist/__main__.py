"""``python -m tools.kafka_dist``: fetch Apache Kafka's jars, print a classpath, or run one of
Kafka's tools (``run 3.9.1 kafka-metadata-quorum --bootstrap-controller ... describe --status``)."""

from __future__ import annotations

import argparse
import os
import sys

from tools.kafka_dist import VERSIONS, DistributionError, distribution, fetch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kafka_dist", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    get = commands.add_parser("fetch", help="fetch Kafka versions into the cache (default: all the tests use)")
    get.add_argument("versions", nargs="*", metavar="VERSION", default=list(VERSIONS))
    get.add_argument("-v", "--verbose", action="store_true", help="show Maven's output")
    path = commands.add_parser("classpath", help="print a fetched version's classpath")
    path.add_argument("version", metavar="VERSION")
    run = commands.add_parser("run", help="run a Kafka tool of a fetched version (fetched first if need be)")
    run.add_argument("version", metavar="VERSION")
    run.add_argument("tool", metavar="TOOL", help="a script name of Kafka's bin/, e.g. kafka-metadata-quorum")
    run.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            for version in args.versions:
                dist = fetch(version, quiet=not args.verbose)
                print(f"Kafka {version}: {dist.home}")
        elif args.command == "classpath":
            print(distribution(args.version).classpath)
        else:
            command = fetch(args.version).command(args.tool, *args.args)
            os.execv(command[0], command)
    except DistributionError as exc:
        print(f"kafka_dist: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
