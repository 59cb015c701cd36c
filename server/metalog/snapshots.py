"""The snapshots of the metadata log: ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``.

The end offset is the offset of the first record *not* in the snapshot, so loading the
snapshot and then replaying the log from that offset gives the whole state.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from server.controller.result import VersionedRecord
from server.metalog.meta_properties import StorageError
from server.metalog.snapshot_file import read_snapshot_file, write_snapshot_file

log = logging.getLogger("kraftwire.snapshots")

_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True, order=True)
class SnapshotId:
    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}.checkpoint"


def list_snapshots(partition_dir: Path) -> list[SnapshotId]:
    found = []
    for path in partition_dir.glob("*.checkpoint"):
        m = _NAME.match(path.name)
        if m:
            found.append(SnapshotId(int(m.group(1)), int(m.group(2))))
    return sorted(found)


def write_snapshot(partition_dir: Path, snapshot: SnapshotId, records: Iterable[VersionedRecord]) -> int:
    size = write_snapshot_file(partition_dir / snapshot.file_name, records, snapshot.epoch)
    # Older snapshots are covered by the new one.
    for older in list_snapshots(partition_dir):
        if older < snapshot:
            (partition_dir / older.file_name).unlink(missing_ok=True)
    return size


def load_latest_snapshot(partition_dir: Path) -> tuple[SnapshotId, list[VersionedRecord]] | None:
    """The newest snapshot that reads back whole; a damaged newer one is reported and skipped
    only if an older valid one exists, never silently. None only when there is no snapshot:
    if every one is damaged, StorageError says why, since the log they covered may be gone."""
    problems = []
    for snapshot in reversed(list_snapshots(partition_dir)):
        try:
            return snapshot, read_snapshot_file(partition_dir / snapshot.file_name)
        except StorageError as exc:
            log.error("snapshot %s is unusable, trying an older one: %s", snapshot.file_name, exc)
            problems.append(str(exc))
    if problems:
        raise StorageError("no usable snapshot: " + "; ".join(problems))
    return None
