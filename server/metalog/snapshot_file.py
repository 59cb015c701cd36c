"""KRaft's snapshot file format, shared by snapshots and the bootstrap checkpoint.

A control batch with a SnapshotHeaderRecord, batches of framed metadata records, then a
control batch with a SnapshotFooterRecord. A file without its footer was never finished and
is not a snapshot.
"""

from __future__ import annotations

import gc
import itertools
import os
import time
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from protocol.errors import DecodeError
from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.generated.metadata.snapshot_footer_record import SnapshotFooterRecord
from protocol.generated.metadata.snapshot_header_record import SnapshotHeaderRecord
from protocol.generated.metadata.voters_record import VotersRecord
from protocol.records import (
    CONTROL_FLAG, ControlType, Record, RecordBatch, control_key, control_message_class, control_type_of,
    ControlMessage, check_batch, control_value, decode_batch, describe_undecodable, encode_batch, encode_value_batch, frame_metadata_record, parse_control_key,
    parse_control_value,
    parse_metadata_record, read_batch_header, record_values)
from server.controller.result import VersionedRecord
from server.metalog.durable import fsync_dir
from server.metalog.meta_properties import StorageError

RECORDS_PER_BATCH = 4096


def _control_batch(offset: int, now_ms: int, epoch: int, messages: Sequence[ControlMessage]) -> bytes:
    return encode_batch(RecordBatch(
        base_offset=offset, partition_leader_epoch=epoch, attributes=CONTROL_FLAG,
        base_timestamp=now_ms, max_timestamp=now_ms,
        records=[Record(key=control_key(control_type_of(m)), value=control_value(m)) for m in messages]))


def encode_snapshot(records: Iterable[VersionedRecord], epoch: int = 0,
                    now_ms: int | None = None) -> Iterator[bytes]:
    """The batches of a snapshot holding ``records``, header first and footer last.

    Control messages at the start of ``records`` (kraft.version, the voter set) go into the
    header's control batch, where Kafka puts them."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    header: list[ControlMessage] = [SnapshotHeaderRecord(version=0, last_contained_log_timestamp=now_ms)]
    records = iter(records)
    first = next(records, None)
    while first is not None and first[0].API_KEY is None:
        message = first[0]
        assert isinstance(message, ControlMessage), f"{message.NAME} is neither a metadata nor a control record"
        header.append(message)
        first = next(records, None)
    yield _control_batch(0, now_ms, epoch, header)
    offset = len(header)
    pending: list[bytes] = []
    for record, version in itertools.chain([first] if first is not None else [], records):
        if record.API_KEY is None:
            raise ValueError(f"{record.NAME} is a control message: it must come before every metadata record")
        pending.append(frame_metadata_record(record, version))
        if len(pending) == RECORDS_PER_BATCH:
            yield encode_value_batch(pending, offset, epoch, now_ms)
            offset += len(pending)
            pending = []
    if pending:
        yield encode_value_batch(pending, offset, epoch, now_ms)
        offset += len(pending)
    yield _control_batch(offset, now_ms, epoch, [SnapshotFooterRecord(version=0)])


def write_snapshot_file(path: Path, records: Iterable[VersionedRecord], epoch: int = 0) -> int:
    """Write to a temporary file, fsync, then rename: a crash never leaves half a snapshot
    under the final name. Returns the size written."""
    tmp = path.with_name(path.name + ".part")
    size = 0
    try:
        with open(tmp, "wb") as out:
            for batch in encode_snapshot(records, epoch):
                out.write(batch)
                size += len(batch)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        # A full disk or a failed fsync: nothing would ever read or remove the partial file.
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return size


def read_snapshot_file(path: Path) -> list[VersionedRecord]:
    """Every metadata record of a snapshot file, and the quorum control messages (kraft.version,
    voters) it carries, CRC-checked; StorageError names the byte."""
    # Decoding makes a few container objects per record and never a reference cycle. With
    # the cyclic collector running, each of its passes walks the ever larger heap of decoded
    # records: on a million partitions that took over half of the read.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return list(open_snapshot_file(path))
    finally:
        if collecting:
            gc.enable()


class SnapshotRecords:
    """A snapshot file checked whole (CRCs, header, footer, control records) whose metadata
    records are decoded only as they are read: replaying a large snapshot then never holds a
    million decoded records at once, only the file's bytes and the state built from them."""

    def __init__(self, path: Path, data: bytes, quorum_records: list[VersionedRecord],
                 data_batches: list[int], count: int) -> None:
        self.path = path
        self.quorum_records = quorum_records  # kraft.version and voters, from the header batch
        self._data = data
        self._data_batches = data_batches  # where each batch of metadata records starts
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[VersionedRecord]:
        yield from self.quorum_records
        for values in self.batches():
            for offset, value in values:
                try:
                    if value is None:
                        raise DecodeError("MetadataRecord", None, 0, "the record value is null")
                    yield parse_metadata_record(value)
                except DecodeError as exc:
                    raise StorageError(f"{self.path}: offset {offset}: {describe_undecodable(value, exc)}") from None

    def batches(self) -> Iterator[list[tuple[int, bytes | None]]]:
        """The (offset, framed metadata record) pairs of each batch in order; StorageError
        names a batch whose records cannot be told apart."""
        data = self._data
        for pos in self._data_batches:
            try:
                yield record_values(data, pos)[1]
            except DecodeError as exc:
                raise _batch_error(self.path, pos, exc) from None


def _batch_error(path: Path, pos: int, exc: DecodeError) -> StorageError:
    if exc.message_name in ("RecordBatch", "Record"):
        return StorageError(f"{path}: corrupt record batch at byte {exc.offset}: {exc.reason}")
    return StorageError(f"{path}: bad record in the batch at byte {pos}: {exc}")


def open_snapshot_file(path: Path) -> SnapshotRecords:
    """Check a snapshot file whole and return its records, decoded as they are read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StorageError(f"{path}: no such snapshot") from None
    except OSError as exc:
        raise StorageError(f"{path}: cannot read: {exc.strerror}") from None
    quorum_records: list[VersionedRecord] = []
    data_batches: list[int] = []
    count = 0
    seen_header = seen_footer = False
    pos = 0
    while pos < len(data):
        if seen_footer:
            raise StorageError(f"{path}: data after the snapshot footer at byte {pos}")
        try:
            header = read_batch_header(data, pos)
            if header.is_control:
                batch, end = decode_batch(data, pos)
                for rec in batch.records:
                    # A missing key is refused as a short one.
                    control_type = parse_control_key(rec.key or b"")
                    if control_type == ControlType.SNAPSHOT_HEADER:
                        parse_control_value(rec.value, SnapshotHeaderRecord)
                        seen_header = True
                    elif control_type == ControlType.SNAPSHOT_FOOTER:
                        parse_control_value(rec.value, SnapshotFooterRecord)
                        seen_footer = True
                    elif control_type in (ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS):
                        cls = control_message_class(control_type)
                        message = parse_control_value(rec.value, cls) if cls is not None else None
                        if not isinstance(message, (KRaftVersionRecord, VotersRecord)):
                            raise DecodeError("ControlRecord", None, 0,
                                              f"no class for control record type {control_type}")
                        quorum_records.append((message, message.version))
                    else:
                        raise DecodeError("ControlRecord", None, 0,
                                          f"control record type {control_type} has no place in a snapshot")
            else:
                # The records are framed and decoded when they are read; their CRC is checked
                # here, so that a damaged file is refused before anything is replayed.
                check_batch(data, pos)
                end = pos + header.size
                data_batches.append(pos)
                count += header.record_count
        except DecodeError as exc:
            raise _batch_error(path, pos, exc) from None
        if not seen_header:
            raise StorageError(f"{path}: the batch at byte {pos} is not a snapshot header")
        pos = end
    if not seen_footer:
        raise StorageError(f"{path}: no snapshot footer; the file is truncated at byte {len(data)}")
    return SnapshotRecords(path, data, quorum_records, data_batches, count + len(quorum_records))
