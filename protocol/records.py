"""Record batches (magic v2) and the framing of metadata records inside them.

A batch is what the __cluster_metadata log stores on disk and what Fetch returns. Its CRC-32C
covers everything from the attributes to the end, so the CRC is checked before anything in
the batch is trusted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Iterator, Protocol, runtime_checkable

import crc32c

from protocol.errors import DecodeError
from protocol.message import Message, api_key_of
from protocol.primitives import (
    INT16, read_uvarint, read_varint, write_uvarint, write_varint)

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_PREFIX = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, record count
_BODY = struct.Struct(">hiqqqhii")
PREFIX_SIZE = _PREFIX.size  # 21
HEADER_SIZE = _PREFIX.size + _BODY.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede the counted length
CRC_START = _PREFIX.size  # the CRC covers attributes onwards

COMPRESSION_MASK = 0x07
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
NO_PRODUCER_ID = -1
# The only record batch format Kafka still writes (v2); errors report it as the version.
MAGIC = 2


class ControlType(IntEnum):
    """Types of control records (the key of a record in a control batch)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass
class Record:
    value: bytes | None
    key: bytes | None = None
    offset_delta: int = 0
    timestamp_delta: int = 0
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class RecordBatch:
    base_offset: int
    records: list[Record]
    partition_leader_epoch: int = 0
    attributes: int = 0
    base_timestamp: int = 0
    max_timestamp: int = 0
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    base_sequence: int = -1
    last_offset_delta: int = -1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def _encode_record(out: bytearray, rec: Record) -> None:
    body = bytearray(b"\x00")  # record attributes, unused
    write_varint(body, rec.timestamp_delta)
    write_varint(body, rec.offset_delta)
    for blob in (rec.key, rec.value):
        if blob is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(blob))
            body += blob
    write_varint(body, len(rec.headers))
    for name, value in rec.headers:
        raw = name.encode()
        write_varint(body, len(raw))
        body += raw
        if value is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(value))
            body += value
    write_varint(out, len(body))
    out += body


def encode_batch(batch: RecordBatch) -> bytes:
    """Serialise a batch, filling in the length, last offset delta and CRC-32C."""
    if batch.attributes & COMPRESSION_MASK:
        raise ValueError("kraftwire writes uncompressed batches only")
    records = bytearray()
    for i, rec in enumerate(batch.records):
        rec.offset_delta = i
        _encode_record(records, rec)
    batch.last_offset_delta = len(batch.records) - 1
    return _framed(records, len(batch.records), batch.base_offset, batch.partition_leader_epoch,
                   batch.base_timestamp, batch.max_timestamp, batch.attributes, batch.producer_id,
                   batch.producer_epoch, batch.base_sequence)


def encode_value_batch(values: list[bytes], base_offset: int, partition_leader_epoch: int,
                       timestamp: int) -> bytes:
    """A batch of records that hold a value only (no key, no headers, the batch's timestamp),
    as the metadata log's are: what ``encode_batch`` writes for them, without a Record each.
    Fencing a fleet writes a million of them."""
    records = bytearray()
    small = _SMALL_ZIGZAG
    for i, value in enumerate(values):
        n = len(value)
        # attributes, timestamp delta 0, offset delta, null key, value size, value, no headers
        if i < _SMALL and n < _SMALL:
            delta, size = small[i], small[n]
            length = 4 + len(delta) + len(size) + n
            if length < _SMALL:
                records += small[length]
            else:
                write_varint(records, length)
            records += b"\x00\x00"
            records += delta
            records.append(_NULL_LENGTH)
            records += size
            records += value
            records.append(0)
        else:
            _encode_record(records, Record(value, offset_delta=i))
    return _framed(records, len(values), base_offset, partition_leader_epoch, timestamp, timestamp)


def _framed(records: bytearray, count: int, base_offset: int, partition_leader_epoch: int,
            base_timestamp: int, max_timestamp: int, attributes: int = 0,
            producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """The encoded ``records`` behind a batch header, with the length and the CRC-32C."""
    body = _BODY.pack(attributes, count - 1, base_timestamp, max_timestamp, producer_id,
                      producer_epoch, base_sequence, count) + records
    crc = crc32c.crc32c(body)
    length = len(body) + PREFIX_SIZE - LOG_OVERHEAD
    return _PREFIX.pack(base_offset, length, partition_leader_epoch, MAGIC, crc) + body


def _zigzag(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


# Zigzag varints of the offset deltas and value sizes most records have, and of a null length.
_SMALL = 2048
_SMALL_ZIGZAG = [_zigzag(v) for v in range(_SMALL)]
_NULL_LENGTH = _zigzag(-1)[0]


@dataclass(frozen=True)
class BatchHeader:
    """The fixed part of a batch, enough to walk a log without decoding records."""

    base_offset: int
    length: int  # bytes after the length field
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)


def read_batch_header(buf: bytes, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; raises DecodeError if it is cut short or not magic 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise DecodeError("RecordBatch", MAGIC, pos, "batch header is cut short")
    prefix = _PREFIX.unpack_from(buf, pos)
    if prefix[3] != MAGIC:
        raise DecodeError("RecordBatch", prefix[3], pos + 16, f"unsupported magic {prefix[3]}")
    if prefix[1] < HEADER_SIZE - LOG_OVERHEAD:
        raise DecodeError("RecordBatch", MAGIC, pos + 8, f"batch length {prefix[1]} is too small")
    return BatchHeader(*prefix, *_BODY.unpack_from(buf, pos + PREFIX_SIZE))


def batch_crc_ok(buf: bytes, pos: int, header: BatchHeader) -> bool:
    end = pos + header.size
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START:end]) == header.crc


def decode_batch(buf: bytes, pos: int = 0) -> tuple[RecordBatch, int]:
    """Decode and CRC-check the batch at ``pos``; returns it and the offset after it."""
    header = read_batch_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise DecodeError("RecordBatch", MAGIC, pos, f"batch of {header.size} bytes is cut short")
    if not batch_crc_ok(buf, pos, header):
        raise DecodeError("RecordBatch", MAGIC, pos, "CRC-32C mismatch")
    if header.attributes & COMPRESSION_MASK:
        raise DecodeError("RecordBatch", MAGIC, pos + PREFIX_SIZE,
                          f"compression type {header.attributes & COMPRESSION_MASK} is not supported")
    records = []
    p = pos + HEADER_SIZE
    try:
        for _ in range(header.record_count):
            rec, p = _decode_record(buf, p, end)
            records.append(rec)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise DecodeError("Record", MAGIC, p, str(exc)) from None
    if p != end:
        raise DecodeError("RecordBatch", MAGIC, p, f"{end - p} bytes left after the last record")
    batch = RecordBatch(
        base_offset=header.base_offset, records=records,
        partition_leader_epoch=header.partition_leader_epoch, attributes=header.attributes,
        base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, last_offset_delta=header.last_offset_delta)
    return batch, end


def _decode_record(buf: bytes, pos: int, end: int) -> tuple[Record, int]:
    length, pos = read_varint(buf, pos)
    stop = pos + length
    if length < 0 or stop > end:
        raise ValueError(f"record length {length} runs past the batch")
    pos += 1  # attributes
    ts_delta, pos = read_varint(buf, pos)
    off_delta, pos = read_varint(buf, pos)
    key, pos = _read_blob(buf, pos, stop)
    value, pos = _read_blob(buf, pos, stop)
    count, pos = read_varint(buf, pos)
    headers = []
    for _ in range(count):
        name, pos = _read_blob(buf, pos, stop)
        if name is None:
            raise ValueError("null record header key")
        hval, pos = _read_blob(buf, pos, stop)
        headers.append((name.decode(), hval))
    if pos != stop:
        raise ValueError("record length does not match its fields")
    return Record(value, key, off_delta, ts_delta, headers), pos


def _read_blob(buf: bytes, pos: int, stop: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > stop:
        raise ValueError("record field runs past the record")
    return buf[pos:pos + n], pos + n


def check_batch(buf: bytes, pos: int = 0) -> BatchHeader:
    """The header of the batch at ``pos`` once the batch is known whole, CRC-correct and
    uncompressed: everything about it but its records."""
    header = read_batch_header(buf, pos)
    if pos + header.size > len(buf):
        raise DecodeError("RecordBatch", MAGIC, pos, f"batch of {header.size} bytes is cut short")
    if not batch_crc_ok(buf, pos, header):
        raise DecodeError("RecordBatch", MAGIC, pos, "CRC-32C mismatch")
    if header.attributes & COMPRESSION_MASK:
        raise DecodeError("RecordBatch", MAGIC, pos + PREFIX_SIZE,
                          f"compression type {header.attributes & COMPRESSION_MASK} is not supported")
    return header


def record_values(buf: bytes, pos: int = 0) -> tuple[BatchHeader, list[tuple[int, bytes | None]]]:
    """CRC-check the batch at ``pos`` and return its header and (offset, value) pairs.

    Replaying a metadata log needs only the values; skipping the Record objects and taking
    one- and two-byte varints inline makes loading a large log several times faster.
    """
    header = check_batch(buf, pos)
    end = pos + header.size
    base = header.base_offset
    values = []
    p = pos + HEADER_SIZE
    try:
        for _ in range(header.record_count):
            start = p
            b = buf[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif buf[p + 1] < 0x80:
                b = (b & 0x7F) | (buf[p + 1] << 7)
                length = (b >> 1) ^ -(b & 1)
                p += 2
            else:
                length, p = read_varint(buf, p)
            stop = p + length
            # attributes and a zero timestamp delta (one byte each), the offset delta, and a
            # null key: the shape of every metadata record; anything else takes the slow path.
            if buf[p + 1] != 0:
                rec, p = _decode_record(buf, start, end)
                values.append((base + rec.offset_delta, rec.value))
                continue
            p += 2
            b = buf[p]
            if b < 0x80:
                offset = base + ((b >> 1) ^ -(b & 1))
                p += 1
            elif buf[p + 1] < 0x80:
                b = (b & 0x7F) | (buf[p + 1] << 7)
                offset = base + ((b >> 1) ^ -(b & 1))
                p += 2
            else:
                delta, p = read_varint(buf, p)
                offset = base + delta
            if buf[p] != 1:
                rec, p = _decode_record(buf, start, end)
                values.append((base + rec.offset_delta, rec.value))
                continue
            p += 1
            b = buf[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            elif buf[p + 1] < 0x80:
                b = (b & 0x7F) | (buf[p + 1] << 7)
                n = (b >> 1) ^ -(b & 1)
                p += 2
            else:
                n, p = read_varint(buf, p)
            if n < 0:
                value = None
            else:
                value = buf[p:p + n]
                p += n
            if p >= stop or buf[p] != 0 or p + 1 != stop or stop > end:
                rec, p = _decode_record(buf, start, end)
                values.append((base + rec.offset_delta, rec.value))
                continue
            p = stop
            values.append((offset, value))
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise DecodeError("Record", MAGIC, p, str(exc)) from None
    if p != end:
        raise DecodeError("RecordBatch", MAGIC, p, f"{end - p} bytes left after the last record")
    return header, values


def iter_batches(buf: bytes, pos: int = 0) -> Iterator[tuple[RecordBatch, int]]:
    """Every whole batch in ``buf`` with its start offset; a partial batch at the end is left."""
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        header = read_batch_header(buf, pos)
        if pos + header.size > n:
            return
        batch, end = decode_batch(buf, pos)
        yield batch, pos
        pos = end


# --- metadata record framing ------------------------------------------------------------------
# The value of a metadata record is: frame version, API key and record version as unsigned
# varints, then the record's own encoding.

METADATA_FRAME_VERSION = 1


def frame_metadata_record(record: Message, version: int) -> bytes:
    api_key = api_key_of(record)
    if api_key < 0x80 and 0 <= version < 0x80:
        # Every record type and version today: the frame is three bytes.
        out = bytearray((METADATA_FRAME_VERSION, api_key, version))
    else:
        out = bytearray()
        write_uvarint(out, METADATA_FRAME_VERSION)
        write_uvarint(out, api_key)
        write_uvarint(out, version)
    record.encode_into(out, version)
    return bytes(out)


def parse_metadata_record(value: bytes) -> tuple[Message, int]:
    """Decode a framed metadata record; returns the record and its version."""
    try:
        if value[0] == METADATA_FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:
            frame_version, api_key, version, pos = METADATA_FRAME_VERSION, value[1], value[2], 3
        else:
            frame_version, pos = read_uvarint(value, 0)
            api_key, pos = read_uvarint(value, pos)
            version, pos = read_uvarint(value, pos)
    except (IndexError, ValueError, TypeError) as exc:
        raise DecodeError("MetadataRecord", None, 0, f"bad frame: {exc}") from None
    if frame_version != METADATA_FRAME_VERSION:
        raise DecodeError("MetadataRecord", None, 0, f"unknown frame version {frame_version}")
    cls = record_class(api_key)
    if cls is None:
        raise DecodeError("MetadataRecord", version, 0, f"unknown metadata record type {api_key}")
    record, end = cls.decode(value, version, pos)
    if end != len(value):
        raise DecodeError(cls.NAME, version, end, f"{len(value) - end} trailing bytes")
    return record, version


def describe_undecodable(value: bytes | None, exc: DecodeError) -> str:
    """Why a framed metadata record cannot be read, naming its type and version when the frame
    says them: a record type or version newer than this code knows is the usual cause."""
    if value is None or len(value) < 3:
        return f"cannot decode the record: {exc}"
    try:
        _, pos = read_uvarint(value, 0)
        api_key, pos = read_uvarint(value, pos)
        version, _ = read_uvarint(value, pos)
    except (IndexError, ValueError):
        return f"cannot decode the record: {exc}"
    cls = record_class(api_key)
    if cls is None:
        return f"unknown metadata record type {api_key} (version {version}); this kraftwire does not know it"
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        return (f"{cls.NAME} version {version} is newer than this kraftwire reads "
                f"(versions {lo}-{hi})")
    return f"cannot decode {cls.NAME} v{version}: {exc.reason} (byte {exc.offset})"


_RECORD_CLASSES: dict[int, type[Message]] = {}


def record_class(api_key: int) -> type[Message] | None:
    """The metadata record class of an API key, or None for a type this code does not know."""
    return _record_classes().get(api_key)


def _record_classes() -> dict[int, type[Message]]:
    """Metadata record classes by API key (imported late: the generated package is large)."""
    if not _RECORD_CLASSES:
        from protocol.generated.metadata import BY_API_KEY

        _RECORD_CLASSES.update({key: cls for (kind, key), cls in BY_API_KEY.items() if kind == "metadata"})
    return _RECORD_CLASSES


# --- control records ---------------------------------------------------------------------------

def control_key(control_type: int) -> bytes:
    return INT16.pack(0) + INT16.pack(control_type)


@runtime_checkable
class ControlMessage(Protocol):
    """A KRaft control message (LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters)."""

    NAME: str
    version: int

    def encode_into(self, out: bytearray, version: int) -> None: ...


def control_value(message: ControlMessage) -> bytes:
    """A control record's value: the control message alone, at the version its own leading
    ``Version`` field names (Kafka puts nothing before it)."""
    out = bytearray()
    message.encode_into(out, message.version)
    return bytes(out)


def parse_control_value(value: bytes | None, cls: type[Message]) -> Message:
    """Decode a control message, reading its version from the message's first field."""
    if value is None or len(value) < INT16.size:
        raise DecodeError(cls.NAME, None, 0, "the control record value is missing or short")
    (version,) = INT16.unpack_from(value)
    message, end = cls.decode(value, version, 0)
    if end != len(value):
        raise DecodeError(cls.NAME, version, end, f"{len(value) - end} trailing bytes")
    return message


_CONTROL_CLASSES: dict[int, type[Message]] = {}


def control_message_class(control_type: int) -> type[Message] | None:
    """The message class of a KRaft control record type; None for transaction markers and
    types this code does not know."""
    return _control_classes().get(control_type)


def control_type_of(message: ControlMessage) -> int:
    """The control record type that carries ``message``."""
    for control_type, cls in _control_classes().items():
        if type(message) is cls:
            return control_type
    raise ValueError(f"{message.NAME} is not a KRaft control message")


def _control_classes() -> dict[int, type[Message]]:
    """Control message classes by control type (imported late, as the record classes are)."""
    if not _CONTROL_CLASSES:
        from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
        from protocol.generated.metadata.leader_change_message import LeaderChangeMessage
        from protocol.generated.metadata.snapshot_footer_record import SnapshotFooterRecord
        from protocol.generated.metadata.snapshot_header_record import SnapshotHeaderRecord
        from protocol.generated.metadata.voters_record import VotersRecord

        _CONTROL_CLASSES.update({
            ControlType.LEADER_CHANGE: LeaderChangeMessage, ControlType.SNAPSHOT_HEADER: SnapshotHeaderRecord,
            ControlType.SNAPSHOT_FOOTER: SnapshotFooterRecord, ControlType.KRAFT_VERSION: KRaftVersionRecord,
            ControlType.KRAFT_VOTERS: VotersRecord})
    return _CONTROL_CLASSES


def parse_control_key(key: bytes) -> int:
    if key is None or len(key) < 4:
        raise DecodeError("ControlRecordKey", None, 0, "control record key is missing or short")
    return INT16.unpack_from(key, 2)[0]
