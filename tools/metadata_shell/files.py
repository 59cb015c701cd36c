"""Loading the metadata from files: one snapshot, or a metadata log directory.

Nothing here writes: the controller may be running on the same directory, so segments are
read as they are (a batch still being written at the end is left out) and never recovered.
"""

from __future__ import annotations

import re
from pathlib import Path

from protocol.errors import DecodeError
from protocol.records import iter_batches
from server.controller.result import VersionedRecord
from server.metalog.bootstrap import BOOTSTRAP_CHECKPOINT
from server.metalog.meta_properties import StorageError
from server.metalog.segments import PARTITION_DIR, SUFFIX
from server.metalog.snapshot_file import read_snapshot_file
from server.metalog.snapshots import list_snapshots
from tools.metadata_shell.replayer import LoadError, Replayer

_SNAPSHOT_NAME = re.compile(r"^(\d{20})-\d{10}\.checkpoint$")


def load_snapshot(path: Path) -> Replayer:
    """The state a snapshot file (or bootstrap.checkpoint) holds."""
    replayer = Replayer()
    m = _SNAPSHOT_NAME.match(path.name)
    # A file not named after its end offset (bootstrap.checkpoint) starts the log.
    replayer.snapshot(_read_snapshot(path), int(m.group(1)) if m else 0)
    return replayer


def load_directory(directory: Path) -> Replayer:
    """The state of a metadata log: its newest snapshot, then the segments after it.

    ``directory`` is the metadata.log.dir or its ``__cluster_metadata-0`` partition directory.
    A log that was formatted but never started holds only the bootstrap checkpoint.
    """
    if not directory.is_dir():
        raise LoadError(f"{directory}: no such directory")
    partition = directory / PARTITION_DIR if (directory / PARTITION_DIR).is_dir() else directory
    segments = sorted(partition.glob("*" + SUFFIX))
    snapshots = list_snapshots(partition)
    if not segments and not snapshots:
        for bootstrap in (partition / BOOTSTRAP_CHECKPOINT, partition.parent / BOOTSTRAP_CHECKPOINT):
            if bootstrap.exists():
                return load_snapshot(bootstrap)
        raise LoadError(f"{directory}: no metadata log segments, snapshots or bootstrap checkpoint")
    replayer = Replayer()
    if snapshots:
        # The controller would fall back to an older snapshot if the newest were damaged; the
        # shell reports the damage instead, since finding such things is what it is for.
        newest = snapshots[-1]
        replayer.snapshot(_read_snapshot(partition / newest.file_name), newest.end_offset)
    for segment in segments:
        _replay_segment(segment, replayer)
    return replayer


def _read_snapshot(path: Path) -> list[VersionedRecord]:
    try:
        return read_snapshot_file(path)
    except StorageError as exc:
        raise LoadError(str(exc)) from None


def _replay_segment(path: Path, replayer: Replayer) -> None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LoadError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        for batch, pos in iter_batches(data):
            try:
                replayer.batch(batch)
            except LoadError as exc:
                raise LoadError(f"{path}: batch at byte {pos}: {exc}") from None
    except DecodeError as exc:
        raise LoadError(f"{path}: corrupt data at byte {exc.offset}: {exc.reason}") from None
