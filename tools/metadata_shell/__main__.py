"""``python -m tools.metadata_shell``: kafka-metadata-shell.sh for kraftwire."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from server.client_connection import PLAINTEXT
from server.config import ConfigError, parse_properties
from server.image.files import open_directory, open_snapshot
from server.image.image import MetadataImage
from server.image.loader import LoadError
from server.security.client import ClientSecurity, ClientSettingsError, client_security_from_properties
from tools.metadata_shell.interactive import interact
from tools.metadata_shell.remote import load_controllers
from tools.metadata_shell.shell import CommandError, Shell
from tools.metadata_shell.tree import Dir, build_tree


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.metadata_shell",
        description="Browse the cluster metadata as a tree, built by replaying the metadata log "
                    "with the controller's own replay code. Without a command it is interactive.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-s", "--snapshot", type=Path, metavar="FILE",
                        help="a snapshot (.checkpoint) or bootstrap.checkpoint file")
    source.add_argument("-d", "--directory", type=Path, metavar="DIR",
                        help="a metadata log directory (metadata.log.dir or its __cluster_metadata-0)")
    source.add_argument("-C", "--controllers", metavar="HOST:PORT[,...]",
                        help="controllers to read the committed log from, as an observer; the active one "
                             "is found from any of them")
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="Kafka client properties for --controllers: security.protocol, ssl.*, "
                             "sasl.mechanism, sasl.jaas.config")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="commands to run instead of the interactive shell: one as words "
                             "(ls /image/topics/byName), or one or more as arguments each holding a "
                             "command line ('ls /image/topics/byName' 'cat /image/provenance'); "
                             "; separates commands within a line")
    return parser


def _load(args: argparse.Namespace) -> tuple[MetadataImage, str]:
    if args.snapshot is not None:
        return open_snapshot(args.snapshot), str(args.snapshot)
    if args.directory is not None:
        return open_directory(args.directory), str(args.directory)
    return load_controllers(args.controllers, _command_config(args.command_config)), args.controllers


def _command_config(path: Path | None) -> ClientSecurity:
    if path is None:
        return PLAINTEXT
    try:
        return client_security_from_properties(parse_properties(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise LoadError(f"--command-config: cannot read {path}: {exc.strerror}") from None
    except (ConfigError, ClientSettingsError) as exc:
        raise LoadError(f"--command-config {path}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command_config is not None and args.controllers is None:
        parser.error("--command-config is for --controllers")
    try:
        image, source = _load(args)
    except LoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    shell = Shell(build_tree(image), sys.stdout, sys.stderr, lambda: _reload(args), image.offset)
    if args.command and any(c.isspace() for c in args.command[0]):
        # Arguments that each hold a whole command line ("ls /image" "cat /image/provenance"):
        # a command's name has no space in it, so the first one tells.
        return 0 if all([shell.run_line(line) for line in args.command]) else 1
    if len(args.command) == 1:
        return 0 if shell.run_line(args.command[0]) else 1
    if args.command:
        shell.history.append(" ".join(args.command))
        return 0 if shell.run(args.command) else 1
    interact(shell, f"kraftwire metadata shell: {source} up to offset {image.offset}. "
                    f"Type refresh to read what was written since, help for the commands.")
    return 0


def _reload(args: argparse.Namespace) -> tuple[Dir, int]:
    try:
        image, _ = _load(args)
    except LoadError as exc:
        raise CommandError(str(exc)) from None
    return build_tree(image), image.offset


if __name__ == "__main__":
    sys.exit(main())
