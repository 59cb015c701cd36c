"""The bootstrap checkpoint: the metadata a freshly formatted cluster starts from.

``<metadata.log.dir>/bootstrap.checkpoint`` has the layout of a KRaft snapshot: a control batch
holding a SnapshotHeaderRecord, one batch of framed metadata records (the FeatureLevelRecord for
metadata.version, at least), and a control batch holding a SnapshotFooterRecord.
"""

from __future__ import annotations

from pathlib import Path

from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.message import Message
from server.metalog.meta_properties import StorageError
from server.metalog.snapshot_file import read_snapshot_file, write_snapshot_file

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
METADATA_VERSION = "metadata.version"

RELEASE_VERSIONS: dict[str, int] = {
    "3.0-IV1": 1, "3.1-IV0": 2, "3.2-IV0": 3, "3.3-IV0": 4, "3.3-IV1": 5, "3.3-IV2": 6,
    "3.3-IV3": 7, "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12,
    "3.6-IV1": 13, "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18,
    "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21, "4.0-IV0": 22, "4.0-IV1": 23, "4.0-IV2": 24,
    "4.0-IV3": 25, "4.1-IV0": 26, "4.1-IV1": 27, "4.2-IV0": 28, "4.2-IV1": 29,
}
DEFAULT_RELEASE = "4.0-IV3"

# "3.7" means the newest IV of 3.7; the table is in ascending order, so the last one wins.
_SHORT_NAMES = {name.split("-")[0]: level for name, level in RELEASE_VERSIONS.items()}


def metadata_level(release: str) -> int:
    """The metadata.version feature level of a release name such as "3.7" or "3.7-IV4"."""
    level = RELEASE_VERSIONS.get(release, _SHORT_NAMES.get(release))
    if level is None:
        valid = ", ".join([*_SHORT_NAMES, *RELEASE_VERSIONS])
        raise ValueError(f"unknown release version {release!r}; valid names: {valid}")
    return level


def release_name(level: int) -> str | None:
    """The IV name of a metadata.version level, or None for a level this table lacks."""
    return next((name for name, lvl in RELEASE_VERSIONS.items() if lvl == level), None)


def bootstrap_records(release: str) -> list[tuple[Message, int]]:
    """The records ``format`` writes for a release: its metadata.version feature level."""
    return [(FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_level(release)), 0)]


def bootstrap_metadata_version(records: list[tuple[Message, int]]) -> int | None:
    """The metadata.version level among bootstrap records, if one is there."""
    for record, _ in records:
        if isinstance(record, FeatureLevelRecord) and record.name == METADATA_VERSION:
            return record.feature_level
    return None


def write_bootstrap(directory: Path, records: list[tuple[Message, int]]) -> None:
    """Write ``directory/bootstrap.checkpoint`` holding ``records`` (record, version) pairs."""
    write_snapshot_file(Path(directory) / BOOTSTRAP_CHECKPOINT, records)


def read_bootstrap(directory: Path) -> list[tuple[Message, int]]:
    """Read and CRC-check ``directory/bootstrap.checkpoint``; returns its metadata records."""
    path = Path(directory) / BOOTSTRAP_CHECKPOINT
    if not path.exists():
        raise StorageError(f"{path}: no bootstrap checkpoint; the directory is not formatted")
    return read_snapshot_file(path)
