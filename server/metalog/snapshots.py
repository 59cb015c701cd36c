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
from server.metalog.durable import fsync_dir
from server.metalog.meta_properties import StorageError
from server.metalog.snapshot_file import SnapshotRecords, open_snapshot_file, write_snapshot_file

log = logging.getLogger("kraftwire.snapshots")

KEEP = 2  # snapshots kept on disk
UNUSABLE = ".unusable"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True, order=True)
class SnapshotId:
    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}.checkpoint"

    @classmethod
    def from_file_name(cls, name: str) -> "SnapshotId | None":
        m = _NAME.match(name)
        return cls(int(m.group(1)), int(m.group(2))) if m else None


def list_snapshots(partition_dir: Path) -> list[SnapshotId]:
    found = [SnapshotId.from_file_name(path.name) for path in partition_dir.glob("*.checkpoint")]
    return sorted(s for s in found if s is not None)


def write_snapshot(partition_dir: Path, snapshot: SnapshotId, records: Iterable[VersionedRecord]) -> int:
    """Write the snapshot, then delete all but the newest KEEP snapshots: the older kept one
    is what start-up falls back to if the newest turns out unreadable."""
    size = write_snapshot_file(partition_dir / snapshot.file_name, records, snapshot.epoch)
    for older in list_snapshots(partition_dir)[:-KEEP]:
        (partition_dir / older.file_name).unlink(missing_ok=True)
    return size


def oldest_kept(partition_dir: Path) -> SnapshotId | None:
    """The oldest snapshot kept; the log below its end offset is no longer needed."""
    kept = list_snapshots(partition_dir)[-KEEP:]
    return kept[0] if kept else None


def set_aside_newer(partition_dir: Path, loaded: SnapshotId | None) -> list[Path]:
    """Rename the snapshots newer than the one start-up loaded (all, if none) to
    ``<name>.unusable``: they could not be read, and counted among the kept snapshots they
    would let the log below the next older one be deleted. The bytes stay for inspection."""
    moved = []
    for snapshot in list_snapshots(partition_dir):
        if loaded is None or snapshot > loaded:
            path = partition_dir / snapshot.file_name
            target = path.with_name(path.name + UNUSABLE)
            path.rename(target)
            moved.append(target)
    if moved:
        fsync_dir(partition_dir)
    return moved


def load_latest_snapshot(partition_dir: Path, log_start_offset: int = 0
                         ) -> tuple[SnapshotId, SnapshotRecords] | None:
    """The newest snapshot that reads back whole and that the log continues.

    An unusable snapshot is reported and an older one tried. None when the log itself starts
    at offset 0 and no snapshot is usable: the log alone holds the whole state. A log that
    starts later with no usable snapshot at or above its start lost the records below it:
    StorageError names the directory, since starting would silently drop acknowledged data.
    """
    problems = []
    for snapshot in reversed(list_snapshots(partition_dir)):
        if snapshot.end_offset < log_start_offset:
            problems.append(f"{snapshot.file_name} ends at offset {snapshot.end_offset}, below the log's "
                            f"start at {log_start_offset}")
            continue
        try:
            return snapshot, open_snapshot_file(partition_dir / snapshot.file_name)
        except StorageError as exc:
            log.error("snapshot %s is unusable, trying an older one: %s", snapshot.file_name, exc)
            problems.append(str(exc))
    if log_start_offset == 0:
        if problems:
            log.error("no usable snapshot in %s; replaying the whole log from offset 0", partition_dir)
        return None
    found = "; ".join(problems) if problems else "there is none"
    raise StorageError(f"{partition_dir}: the metadata log starts at offset {log_start_offset} and no usable "
                       f"snapshot covers the offsets below it ({found})")
