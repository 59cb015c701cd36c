"""Walking the batches of a log segment or snapshot file, stopping at the first damage.

Damage is told apart the way the controller's recovery does: a bad batch with no valid batch
anywhere after it is a torn tail (a write cut short by a crash), anything else is corruption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from protocol.errors import DecodeError
from protocol.records import (
    HEADER_SIZE, BatchHeader, RecordBatch, batch_crc_ok, decode_batch, read_batch_header)

_MAGIC_OFFSET = 16  # baseOffset, batchLength and partitionLeaderEpoch come before the magic byte


@dataclass(frozen=True)
class Batch:
    position: int
    header: BatchHeader
    batch: RecordBatch


@dataclass(frozen=True)
class Damage:
    position: int
    reason: str
    torn: bool
    # Set when the header itself reads back, so the batch line can still be shown.
    header: BatchHeader | None = None


def walk(data: bytes) -> Iterator[Batch | Damage]:
    """Every whole, valid batch in order; a ``Damage`` last if the file does not end cleanly."""
    pos = 0
    while pos < len(data):
        inspected = _inspect(data, pos)
        if inspected[1] is not None:
            damaged_header, problem = inspected
            yield Damage(pos, problem, not _valid_batch_after(data, pos + 1), damaged_header)
            return
        header = inspected[0]
        try:
            batch, end = decode_batch(data, pos)
        except DecodeError as exc:
            # The CRC matched, so these bytes were written this way: not a torn write.
            yield Damage(pos, f"cannot decode the batch: {exc.reason} (byte {exc.offset})", False, header)
            return
        yield Batch(pos, header, batch)
        pos = end


def _inspect(data: bytes, pos: int) -> tuple[BatchHeader, None] | tuple[BatchHeader | None, str]:
    """The header at ``pos`` and why the batch there is not whole and valid (None if it is)."""
    remaining = len(data) - pos
    if remaining < HEADER_SIZE:
        return None, f"{remaining} bytes are too few for a batch header ({HEADER_SIZE})"
    try:
        header = read_batch_header(data, pos)
    except DecodeError as exc:
        return None, exc.reason
    if header.size > remaining:
        return header, (f"a batch of {header.size} bytes runs past the end of the file "
                        f"({remaining} bytes remain)")
    if not batch_crc_ok(data, pos, header):
        return header, "CRC-32C mismatch"
    return header, None


def _valid_batch_after(data: bytes, start: int) -> bool:
    pos = data.find(b"\x02", start)
    while pos >= 0:
        candidate = pos - _MAGIC_OFFSET
        if candidate >= start and _inspect(data, candidate)[1] is None:
            return True
        pos = data.find(b"\x02", pos + 1)
    return False
