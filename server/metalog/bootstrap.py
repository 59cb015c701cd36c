"""The bootstrap checkpoint: the metadata a freshly formatted cluster starts from.

``<metadata.log.dir>/bootstrap.checkpoint`` has the layout of a KRaft snapshot: a control batch
holding a SnapshotHeaderRecord, one batch of framed metadata records (the FeatureLevelRecord for
metadata.version, at least), and a control batch holding a SnapshotFooterRecord.
"""

from __future__ import annotations

import time
from pathlib import Path

from protocol.errors import DecodeError
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.generated.metadata.snapshot_footer_record import SnapshotFooterRecord
from protocol.generated.metadata.snapshot_header_record import SnapshotHeaderRecord
from protocol.message import Message
from protocol.primitives import INT16
from protocol.records import (
    CONTROL_FLAG, ControlType, Record, RecordBatch, control_key, control_value, decode_batch,
    encode_batch, frame_metadata_record, parse_control_key, parse_metadata_record)
from server.metalog.meta_properties import StorageError, write_atomically

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
METADATA_VERSION = "metadata.version"

RELEASE_VERSIONS: dict[str, int] = {
    "3.0-IV1": 1, "3.1-IV0": 2, "3.2-IV0": 3, "3.3-IV0": 4, "3.3-IV1": 5, "3.3-IV2": 6,
    "3.3-IV3": 7, "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12,
    "3.6-IV1": 13, "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18,
    "3.7-IV4": 19, "3.8-IV0": 20, "3.9-IV0": 21, "4.0-IV0": 22, "4.0-IV1": 23, "4.0-IV2": 24,
    "4.0-IV3": 25,
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
    now_ms = int(time.time() * 1000)
    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=now_ms)
    batches = [_control_batch(0, now_ms, ControlType.SNAPSHOT_HEADER, header)]
    offset = 1
    if records:
        batches.append(RecordBatch(
            base_offset=offset, base_timestamp=now_ms, max_timestamp=now_ms,
            records=[Record(value=frame_metadata_record(rec, version))
                     for rec, version in records]))
        offset += len(records)
    batches.append(_control_batch(offset, now_ms, ControlType.SNAPSHOT_FOOTER,
                                  SnapshotFooterRecord(version=0)))
    data = b"".join(encode_batch(batch) for batch in batches)
    write_atomically(Path(directory) / BOOTSTRAP_CHECKPOINT, data)


def _control_batch(offset: int, now_ms: int, control_type: int, message: Message) -> RecordBatch:
    return RecordBatch(
        base_offset=offset, attributes=CONTROL_FLAG, base_timestamp=now_ms, max_timestamp=now_ms,
        records=[Record(key=control_key(control_type), value=control_value(message, 0))])


def read_bootstrap(directory: Path) -> list[tuple[Message, int]]:
    """Read and CRC-check ``directory/bootstrap.checkpoint``; returns its metadata records."""
    path = Path(directory) / BOOTSTRAP_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StorageError(f"{path}: no bootstrap checkpoint; the directory is not formatted") \
            from None
    except OSError as exc:
        raise StorageError(f"{path}: cannot read: {exc.strerror}") from None

    records: list[tuple[Message, int]] = []
    seen_header = seen_footer = False
    pos = 0
    while pos < len(data):
        if seen_footer:
            raise StorageError(f"{path}: data after the snapshot footer at byte {pos}")
        try:
            batch, end = decode_batch(data, pos)
        except DecodeError as exc:
            raise StorageError(f"{path}: corrupt record batch at byte {exc.offset}: "
                               f"{exc.reason}") from None
        try:
            if batch.is_control:
                for rec in batch.records:
                    control_type = parse_control_key(rec.key)
                    if control_type == ControlType.SNAPSHOT_HEADER:
                        _decode_control(rec.value, SnapshotHeaderRecord)
                        seen_header = True
                    elif control_type == ControlType.SNAPSHOT_FOOTER:
                        _decode_control(rec.value, SnapshotFooterRecord)
                        seen_footer = True
                    # KRaft version and voter records may follow the header; they are not
                    # bootstrap metadata.
            else:
                for rec in batch.records:
                    if rec.value is None:
                        raise DecodeError("MetadataRecord", None, 0, "the record value is null")
                    records.append(parse_metadata_record(rec.value))
        except DecodeError as exc:
            raise StorageError(f"{path}: bad record in the batch at byte {pos}: {exc}") from None
        if not seen_header:
            raise StorageError(f"{path}: the batch at byte {pos} is not a snapshot header")
        pos = end
    if not seen_footer:
        raise StorageError(f"{path}: no snapshot footer; the file is truncated at byte {len(data)}")
    return records


def _decode_control(value: bytes | None, cls: type[Message]) -> None:
    if value is None or len(value) < INT16.size:
        raise DecodeError(cls.NAME, None, 0, "control record value is missing")
    cls.decode(value, INT16.unpack_from(value)[0], INT16.size)
