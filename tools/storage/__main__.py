"""``python -m tools.storage``: kafka-storage.sh for kraftwire (random-uuid, format, info)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from protocol.primitives import random_uuid, uuid_to_str
from server.config import ConfigError, ControllerConfig, load_config
from server.metalog.bootstrap import DEFAULT_RELEASE, RELEASE_VERSIONS
from server.metalog.meta_properties import StorageError, is_kafka_uuid
from server.metalog.formatting import InitialController, format_dirs, parse_initial_controllers, standalone
from tools.storage.info import describe_dirs


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # Usage mistakes exit 1 like every other failure of this tool, not argparse's 2.
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def _load(path: str) -> ControllerConfig:
    try:
        return load_config(path)
    except ConfigError as exc:
        where = "" if exc.key == path else f"{path}: "
        raise StorageError(f"invalid config {where}{exc}") from None


def _random_uuid(args: argparse.Namespace) -> int:
    print(uuid_to_str(random_uuid()))
    return 0


def _check_cluster_id(cluster_id: str) -> None:
    """Kafka's format reads the id with Uuid.fromString: no broker could join a cluster whose
    id is anything else, so it is refused before anything is written."""
    if not is_kafka_uuid(cluster_id):
        raise StorageError(f"invalid cluster id {cluster_id!r}: expected a base64url UUID (22 characters of "
                           f"A-Z a-z 0-9 - _ encoding 16 bytes), as printed by: python -m tools.storage random-uuid")


def _format(args: argparse.Namespace) -> int:
    _check_cluster_id(args.cluster_id)
    config = _load(args.config)
    initial: list[InitialController] | None = None
    if args.standalone:
        initial = standalone(config)
    elif args.initial_controllers is not None:
        initial = parse_initial_controllers(args.initial_controllers)
    elif args.no_initial_controllers:
        initial = []
    features: dict[str, int] = {}
    for item in args.feature or []:
        name, sep, level = item.partition("=")
        if not sep or not name.strip() or not level.strip().isdigit():
            raise StorageError(f"invalid --feature {item!r}: expected NAME=LEVEL, e.g. kraft.version=1")
        features[name.strip()] = int(level)
    done = format_dirs(config, args.cluster_id, args.release_version, args.ignore_formatted, initial, features)
    for directory in config.log_dirs:
        state = "formatted" if directory in done else "already formatted, left as it is"
        print(f"{directory}: {state}")
    return 0


def _info(args: argparse.Namespace) -> int:
    report = describe_dirs(_load(args.config))
    for line in report.lines:
        print(line)
    for problem in report.problems:
        print(f"problem: {problem}", file=sys.stderr)
    # As Kafka's info: a directory that is not formatted is a problem found.
    return 1 if report.problems or report.unformatted else 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m tools.storage",
        description="Format and inspect the log directories of a kraftwire controller.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    uuid_cmd = commands.add_parser("random-uuid", help="print a new random cluster id",
                                   description="Print a random UUID in Kafka's base64 form, "
                                               "for use as --cluster-id.")
    uuid_cmd.set_defaults(run=_random_uuid)

    fmt = commands.add_parser(
        "format", help="format the log directories named in the config",
        description="Write meta.properties (version 1) into every log directory and "
                    "bootstrap.checkpoint into the metadata log directory.")
    fmt.add_argument("-c", "--config", required=True, metavar="FILE",
                     help="the controller's server.properties")
    fmt.add_argument("-t", "--cluster-id", required=True, metavar="ID",
                     help="the cluster id, as printed by random-uuid")
    fmt.add_argument("-r", "--release-version", default=DEFAULT_RELEASE, metavar="V",
                     help=f"the release whose metadata.version to bootstrap, e.g. 3.7 or 3.7-IV4 "
                          f"(default {DEFAULT_RELEASE}; known {next(iter(RELEASE_VERSIONS))} to "
                          f"{next(reversed(RELEASE_VERSIONS))})")
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument("-s", "--standalone", action="store_true",
                        help="a dynamic quorum (kraft.version 1) whose only voter is this controller")
    quorum.add_argument("-I", "--initial-controllers", metavar="LIST",
                        help="a dynamic quorum of these voters: id@host:port:directory-id,... (this node's "
                             "entry gives its metadata directory's directory.id)")
    quorum.add_argument("-N", "--no-initial-controllers", action="store_true",
                        help="a controller of a dynamic quorum that joins later (add-controller)")
    fmt.add_argument("-f", "--feature", action="append", metavar="NAME=LEVEL",
                     help="a feature level to bootstrap, e.g. kraft.version=1 (repeatable)")
    fmt.add_argument("-g", "--ignore-formatted", action="store_true",
                     help="leave already formatted directories alone instead of failing")
    fmt.set_defaults(run=_format)

    info = commands.add_parser(
        "info", help="show the format state of the log directories named in the config",
        description="Show each log directory's meta.properties and bootstrap metadata.version.")
    info.add_argument("-c", "--config", required=True, metavar="FILE",
                      help="the controller's server.properties")
    info.set_defaults(run=_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
