"""Opening a metadata image from files: one snapshot, or a metadata log directory.

Nothing here writes: a controller may be running on the same directory, so segments are read
as they are (a batch still being written at the end is left out) and never recovered.
"""

from __future__ import annotations

from pathlib import Path

from protocol.errors import DecodeError
from protocol.records import HEADER_SIZE, read_batch_header
from server.controller.result import VersionedRecord
from server.image.image import MetadataImage
from server.image.loader import LoadError
from server.metalog.bootstrap import BOOTSTRAP_CHECKPOINT
from server.metalog.meta_properties import StorageError
from server.metalog.segments import PARTITION_DIR, SUFFIX
from server.metalog.snapshot_file import read_snapshot_file
from server.metalog.snapshots import SnapshotId, list_snapshots


def open_snapshot(path: Path) -> MetadataImage:
    """The state a snapshot file (or bootstrap.checkpoint) holds."""
    image = MetadataImage()
    snapshot = SnapshotId.from_file_name(path.name)
    # A file not named after its end offset (bootstrap.checkpoint) starts the log.
    if snapshot is None:
        image.load_snapshot(_read_snapshot(path), 0, str(path))
    else:
        image.load_snapshot(_read_snapshot(path), snapshot.end_offset, str(path), snapshot.epoch)
    return image


def open_directory(directory: Path) -> MetadataImage:
    """The state of a metadata log: its newest snapshot, then the segments after it.

    ``directory`` is the metadata.log.dir or its ``__cluster_metadata-0`` partition directory.
    A log that was formatted but never started holds only the bootstrap checkpoint. A damaged
    newest snapshot is reported, not skipped: finding such things is what the tools are for.
    """
    if not directory.is_dir():
        raise LoadError(f"{directory}: no such directory")
    partition = directory / PARTITION_DIR if (directory / PARTITION_DIR).is_dir() else directory
    segments = sorted(partition.glob("*" + SUFFIX))
    snapshots = list_snapshots(partition)
    if not segments and not snapshots:
        for bootstrap in (partition / BOOTSTRAP_CHECKPOINT, partition.parent / BOOTSTRAP_CHECKPOINT):
            if bootstrap.exists():
                return open_snapshot(bootstrap)
        raise LoadError(f"{directory}: no metadata log segments, snapshots or bootstrap checkpoint")
    image = MetadataImage()
    if snapshots:
        newest = partition / snapshots[-1].file_name
        image.load_snapshot(_read_snapshot(newest), snapshots[-1].end_offset, str(newest), snapshots[-1].epoch)
    for segment in segments:
        _replay_segment(segment, image)
    return image


def _read_snapshot(path: Path) -> list[VersionedRecord]:
    try:
        return read_snapshot_file(path)
    except StorageError as exc:
        raise LoadError(str(exc)) from None


def _replay_segment(path: Path, image: MetadataImage) -> None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LoadError(f"{path}: cannot read: {exc.strerror}") from None
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        try:
            size = read_batch_header(data, pos).size
        except DecodeError as exc:
            raise LoadError(f"{path}: corrupt data at byte {pos}: {exc.reason}") from None
        if pos + size > len(data):
            return  # a batch still being written
        image.replay_raw(data, pos, str(path))
        pos += size
