"""Looking inside a decoded message: unknown tagged fields anywhere in it, and the CRCs of the
record batches its `records` fields carry."""
from __future__ import annotations

from typing import Iterator

from protocol.errors import DecodeError
from protocol.message import Message
from protocol.records import LOG_OVERHEAD, batch_crc_ok, read_batch_header

_STRUCT, _STRUCTS, _RECORDS = 0, 1, 2
_MAGIC_AT = 16  # baseOffset(8) batchLength(4) partitionLeaderEpoch(4), then the magic byte

# type -> the fields worth descending into: (attribute, kind)
_plans: dict[type[Message], tuple[tuple[str, int], ...]] = {}


def _plan(cls: type[Message]) -> tuple[tuple[str, int], ...]:
    plan = _plans.get(cls)
    if plan is None:
        fields = []
        for name, ftype in cls.FIELDS:
            element = ftype[2:] if ftype.startswith("[]") else ftype
            if ftype == "records":
                fields.append((name, _RECORDS))
            elif element[:1].isupper():  # struct types are named by their class
                fields.append((name, _STRUCTS if ftype.startswith("[]") else _STRUCT))
        plan = _plans[cls] = tuple(fields)
    return plan


def inspect(message: Message, tagged: list[str], records: list[bytes]) -> None:
    """Append the names of structs holding unknown tagged fields (with their tags) to `tagged`,
    and every non-empty `records` value to `records`."""
    if message.unknown_tagged_fields:
        tagged.append(f"{message.NAME}{sorted(message.unknown_tagged_fields)}")
    for name, kind in _plan(type(message)):
        value = getattr(message, name)
        if not value:
            continue
        if kind == _STRUCTS:
            for item in value:
                inspect(item, tagged, records)
        elif kind == _STRUCT:
            inspect(value, tagged, records)
        else:
            records.append(value)


def bad_batches(records: bytes) -> Iterator[tuple[int, int]]:
    """(position, base offset) of every record batch in `records` whose CRC-32C is wrong.

    A batch cut short at the end is normal (Fetch stops at its byte limit) and not judged;
    neither are old message sets (magic 0 and 1, CRC-32 over other bytes), which end the walk.
    """
    pos, n = 0, len(records)
    while n - pos > _MAGIC_AT:
        if records[pos + _MAGIC_AT] != 2:
            return
        try:
            header = read_batch_header(records, pos)
        except DecodeError:
            return
        if pos + header.size > n:
            return
        if not batch_crc_ok(records, pos, header):
            yield pos, header.base_offset
        pos += header.length + LOG_OVERHEAD
