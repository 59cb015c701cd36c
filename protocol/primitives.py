"""Kafka wire primitives shared by the generated codecs and the hand-written runtime.

Generated code inlines the common one-byte fast paths and calls these helpers for the rest.
Every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``; every writer appends to a
``bytearray``. Readers raise ``ValueError``/``IndexError`` on bad bytes; the generated decoders
turn those into ``protocol.errors.DecodeError`` with the message name and offset.
"""

from __future__ import annotations

import base64
import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, TypeVar

from protocol.errors import EncodeError

T = TypeVar("T")

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

# Kafka's UUIDs travel as 16 raw bytes; the codecs keep them as ``bytes`` because building
# ``uuid.UUID`` objects would dominate decoding of partition-heavy messages.
ZERO_UUID = bytes(16)
# Kafka reserves this id for the __cluster_metadata topic (most significant bits 0, least 1).
METADATA_TOPIC_ID = bytes(15) + b"\x01"


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned 32-bit varint (at most 5 bytes), as used for compact lengths and tags."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ValueError("unsigned varint is longer than 5 bytes")


def read_uvarlong(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned 64-bit varint (at most 10 bytes)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("unsigned varlong is longer than 10 bytes")


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed varint (record fields)."""
    if buf[pos] < 0x80:
        v = buf[pos]
        return (v >> 1) ^ -(v & 1), pos + 1
    v, pos = read_uvarlong(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:  # nearly every count, tag and size: one byte, no loop
        out.append(value)
        return
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Zigzag-encode a signed 64-bit value."""
    write_uvarint(out, (value << 1) ^ (value >> 63))


def uuid_to_str(value: bytes) -> str:
    """Kafka's textual UUID form: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(value).decode("ascii").rstrip("=")


def uuid_from_str(text: str) -> bytes:
    """Parse Kafka's base64 UUID form; raises ValueError on anything but 16 bytes."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a Kafka UUID: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"not a Kafka UUID: {text!r}")
    return raw


def random_uuid() -> bytes:
    """A random version-4 UUID that is neither reserved nor starts with '-' in text form.

    Kafka refuses ids whose base64 form begins with '-' because command-line tools would read
    them as options.
    """
    while True:
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        value = bytes(raw)
        if value not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_str(value).startswith("-"):
            return value


# --- strings and bytes ----------------------------------------------------------------------
# Classic encodings carry an int16 (strings) or int32 (bytes) length with -1 for null; compact
# ones carry an unsigned varint of length + 1 with 0 for null. A length that runs past the end
# of the buffer is an error: slicing would silently truncate.

# Kafka caps every string at an int16 length, compact ones included.
MAX_STRING_LENGTH = 0x7FFF


def _take(buf: bytes, pos: int, n: int) -> tuple[bytes, int]:
    end = pos + n
    if end > len(buf):
        raise ValueError(f"length {n} runs past the end ({len(buf) - pos} bytes remain)")
    return buf[pos:end], end


def read_nullable_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = INT16.unpack_from(buf, pos)
    if n < 0:
        return None, pos + 2
    raw, pos = _take(buf, pos + 2, n)
    return raw.decode(), pos


def read_string(buf: bytes, pos: int) -> tuple[str, int]:
    value, end = read_nullable_string(buf, pos)
    if value is None:
        raise ValueError("null string where a value is required")
    return value, end


def read_compact_nullable_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    if n > MAX_STRING_LENGTH + 1:
        raise ValueError(f"string length {n - 1} exceeds Kafka's limit of {MAX_STRING_LENGTH}")
    raw, pos = _take(buf, pos, n - 1)
    return raw.decode(), pos


def read_compact_string(buf: bytes, pos: int) -> tuple[str, int]:
    value, end = read_compact_nullable_string(buf, pos)
    if value is None:
        raise ValueError("null string where a value is required")
    return value, end


def read_nullable_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    if n < 0:
        return None, pos + 4
    return _take(buf, pos + 4, n)


def read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    value, end = read_nullable_bytes(buf, pos)
    if value is None:
        raise ValueError("null bytes where a value is required")
    return value, end


def read_compact_nullable_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return _take(buf, pos, n - 1)


def read_compact_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    value, end = read_compact_nullable_bytes(buf, pos)
    if value is None:
        raise ValueError("null bytes where a value is required")
    return value, end


# The non-null writers take ``None`` too, and refuse it: a field nullable in some versions holds
# ``str | None`` and the version being written decides whether null is allowed.
def _require(value: object, what: str) -> None:
    if value is None:
        raise EncodeError(f"{what} cannot be null here")


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    raw = value.encode()
    out += INT16.pack(len(raw))
    out += raw


def write_string(out: bytearray, value: str | None) -> None:
    _require(value, "string")
    write_nullable_string(out, value)


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    raw = value.encode()
    n = len(raw) + 1
    if n > MAX_STRING_LENGTH + 1:
        raise EncodeError(f"string of {n - 1} bytes exceeds Kafka's limit of {MAX_STRING_LENGTH}")
    if n < 0x80:
        out.append(n)
    else:
        write_uvarint(out, n)
    out += raw


def write_compact_string(out: bytearray, value: str | None) -> None:
    _require(value, "string")
    write_compact_nullable_string(out, value)


def write_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))
    out += value


def write_bytes(out: bytearray, value: bytes | None) -> None:
    _require(value, "bytes")
    write_nullable_bytes(out, value)


def write_compact_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


def write_compact_bytes(out: bytearray, value: bytes | None) -> None:
    _require(value, "bytes")
    write_compact_nullable_bytes(out, value)


# --- arrays of fixed-width values and tagged fields ----------------------------------------

class _ArrayStructs(dict):
    """``table[n]`` is a ``struct.Struct`` for ``n`` big-endian values of one fixed type,
    after a one-byte count when ``counted`` (a compact array of up to 126 items, written in
    one call).

    Callers bound ``n`` by the bytes that remain before indexing, so a hostile count never
    reaches this point; only modest counts are kept so the cache stays small.
    """

    def __init__(self, code: str, counted: bool = False) -> None:
        super().__init__()
        self.code = code
        self.prefix = ">B" if counted else ">"

    def __missing__(self, n: int) -> struct.Struct:
        s = struct.Struct(f"{self.prefix}{n}{self.code}")
        if n <= 4096:
            self[n] = s
        return s


BOOL_ARRAYS = _ArrayStructs("?")
INT8_ARRAYS = _ArrayStructs("b")
INT16_ARRAYS = _ArrayStructs("h")
UINT16_ARRAYS = _ArrayStructs("H")
INT32_ARRAYS = _ArrayStructs("i")
UINT32_ARRAYS = _ArrayStructs("I")
INT64_ARRAYS = _ArrayStructs("q")
FLOAT64_ARRAYS = _ArrayStructs("d")
COUNTED_BOOL_ARRAYS = _ArrayStructs("?", counted=True)
COUNTED_INT8_ARRAYS = _ArrayStructs("b", counted=True)
COUNTED_INT16_ARRAYS = _ArrayStructs("h", counted=True)
COUNTED_UINT16_ARRAYS = _ArrayStructs("H", counted=True)
COUNTED_INT32_ARRAYS = _ArrayStructs("i", counted=True)
COUNTED_UINT32_ARRAYS = _ArrayStructs("I", counted=True)
COUNTED_INT64_ARRAYS = _ArrayStructs("q", counted=True)
COUNTED_FLOAT64_ARRAYS = _ArrayStructs("d", counted=True)
# The largest count a compact array's one-byte length holds (it stores count + 1 below 0x80).
MAX_ONE_BYTE_COUNT = 126


def write_tagged_fields(out: bytearray, known: Sequence[tuple[int, bytes | bytearray]],
                        unknown: dict[int, bytes] | None) -> None:
    """A tagged-field section: count, then (tag, size, payload) in ascending tag order."""
    fields: list[tuple[int, bytes | bytearray]] = list(known)
    if unknown:
        taken = {tag for tag, _ in fields}
        fields.extend((tag, raw) for tag, raw in unknown.items() if tag not in taken)
        fields.sort(key=lambda item: item[0])
    write_uvarint(out, len(fields))
    for tag, payload in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(payload))
        out += payload


# --- arrays of structs that all share one layout --------------------------------------------

# What uniform_columns works out once per layout met, by (prefix, arrays, length bytes): the
# row struct, each array's slice of a row, and the (offset in a row, byte) of every length
# byte. Bounded because a layout comes from the bytes.
_LAYOUTS: dict[tuple[struct.Struct, tuple[tuple[str, bool], ...], tuple[int, ...]],
               tuple[struct.Struct, list[slice], list[tuple[int, int]]]] = {}
_MAX_LAYOUTS = 1024
_ITEM_SIZES = {code: struct.calcsize(">" + code) for code in "?bhHiIqd"}
# The slice of a row a null array has: told apart from an empty one by identity.
NULL_ITEMS = slice(0, 0)


def uniform_columns(buf: bytes, pos: int, count: int, prefix: struct.Struct, prefix_values: int,
                    arrays: tuple[tuple[str, bool], ...]) -> tuple[list[Iterable[Any]], int] | None:
    """``count`` flexible structs at ``buf[pos:]`` read column by column with one ``struct``
    call, when they all have the layout of the first: ``prefix_values`` fixed-width fields
    read by ``prefix``, then one compact array per ``arrays`` entry (item format, nullable)
    whose length fits one byte, then no tagged fields.

    Partitions in a response nearly always look alike (same replication factor, full ISR), so
    the whole array is checked with one strided comparison per length byte, unpacked at once
    and cut into columns by strided slices: what is left per struct is building the object.
    Returns one iterable per field with its value in every struct (a fresh list per struct
    for an array, None for a null one) and the end offset; None when the structs differ, so
    that the caller reads them one by one.
    """
    blen = len(buf)
    at = pos + prefix.size
    lengths = []
    for code, nullable in arrays:
        if at >= blen:
            return None
        byte = buf[at]
        if byte > MAX_ONE_BYTE_COUNT + 1 or (byte == 0 and not nullable):
            return None
        lengths.append(byte)
        at += 1 + (byte - 1) * _ITEM_SIZES[code] if byte > 1 else 1
    key = (prefix, arrays, tuple(lengths))
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _layout(prefix, prefix_values, arrays, lengths)
        if len(_LAYOUTS) < _MAX_LAYOUTS:
            _LAYOUTS[key] = layout
    row, slices, checks = layout
    size = row.size
    end = pos + size * count
    if end > blen:
        return None
    for offset, byte in checks:
        if buf[pos + offset:end:size].count(byte) != count:
            return None
    # struct keeps the compiled form of the formats it was last given.
    values = struct.unpack_from(">" + row.format[1:] * count, buf, pos)
    width = len(values) // count
    columns: list[Iterable[Any]] = [values[i::width] for i in range(prefix_values)]
    for items in slices:
        if items is NULL_ITEMS:
            columns.append(repeat(None, count))
        elif items.start == items.stop:
            columns.append([[] for _ in range(count)])
        else:
            columns.append(map(list, zip(*[values[i::width] for i in range(items.start, items.stop)])))
    return columns, end


# None for ever, to zip beside columns: it holds no state, so one serves every decoder.
ENDLESS_NONE: Iterator[None] = repeat(None)


def new_objects(cls: type[T], count: int) -> list[T]:
    """``count`` instances of ``cls`` with nothing set, for a decoder to fill in."""
    return list(map(object.__new__, repeat(cls, count)))


def _layout(prefix: struct.Struct, prefix_values: int, arrays: tuple[tuple[str, bool], ...],
            lengths: list[int]) -> tuple[struct.Struct, list[slice], list[tuple[int, int]]]:
    fmt = prefix.format
    offset = prefix.size
    index = prefix_values
    slices: list[slice] = []
    checks: list[tuple[int, int]] = []
    for (code, _), byte in zip(arrays, lengths):
        checks.append((offset, byte))
        n = max(byte - 1, 0)
        fmt += f"x{n}{code}"  # the length byte is checked, not unpacked
        offset += 1 + n * _ITEM_SIZES[code]
        slices.append(NULL_ITEMS if byte == 0 else slice(index, index + n))
        index += n
    checks.append((offset, 0))  # no tagged fields
    return struct.Struct(fmt + "x"), slices, checks
