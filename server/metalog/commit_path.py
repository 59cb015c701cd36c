"""What the active controller's commands go through to be committed, and how their records
are encoded as batches. ``server.quorum`` is the commit path, for one voter or several."""

from __future__ import annotations

import asyncio
from typing import Callable, Protocol, cast

from protocol.records import (
    CONTROL_FLAG, ControlMessage, Record, RecordBatch, control_key, control_type_of, control_value, encode_batch,
    encode_value_batch, frame_metadata_record)
from server.controller.result import MAX_RECORDS_PER_BATCH, VersionedRecord
from server.controller.shapes import CopiedChange


class CommitFailed(Exception):
    """The records a response depended on could not be made durable."""


def encode_records(records: list[VersionedRecord], base_offset: int, epoch: int, now_ms: int) -> bytes:
    """The records as one batch; fencing's copies of a shape's change framed from its bytes."""
    return encode_value_batch([r.framed(v) if r.__class__ is CopiedChange else frame_metadata_record(r, v)
                               for r, v in records], base_offset, epoch, now_ms)


def encode_batches(records: list[VersionedRecord], base_offset: int, epoch: int, now_ms: int) -> list[bytes]:
    """The records as batches of at most MAX_RECORDS_PER_BATCH, in offset order; control
    messages (a voter change) go in control batches of their own, as KRaft writes them."""
    batches: list[bytes] = []
    start = 0
    while start < len(records):
        control = records[start][0].API_KEY is None
        end = start
        while end < len(records) and end - start < MAX_RECORDS_PER_BATCH \
                and (records[end][0].API_KEY is None) == control:
            end += 1
        run = records[start:end]
        if control:
            batches.append(encode_batch(RecordBatch(
                base_offset=base_offset + start, partition_leader_epoch=epoch, attributes=CONTROL_FLAG,
                base_timestamp=now_ms, max_timestamp=now_ms,
                records=[Record(control_value(cast(ControlMessage, r)), control_key(control_type_of(
                    cast(ControlMessage, r)))) for r, _ in run])))
        else:
            batches.append(encode_records(run, base_offset + start, epoch, now_ms))
        start = end
    return batches


class CommitProgress(Protocol):
    """How far the quorum has committed, and who waits for it (``server.commit_tracker``)."""

    committed_offset: int
    listeners: list[Callable[[int], None]]  # told of every new committed offset
    last_flush_ms: float | None  # how long the last commit took from its proposal; None if this node proposed none of it
    last_batch_timestamp_ms: int  # append time of the last batch written; -1 before any
    failures: int  # writes that failed

    def wait(self, offset: int, timeout_s: float | None = None) -> asyncio.Future | None:
        """A future resolved once ``offset`` is committed or ``timeout_s`` has passed (failed
        with CommitFailed if it never will be); None if it already is."""


class CommitPath(Protocol):
    """Where the active controller's records go to be committed (``server.quorum``)."""

    @property
    def commits(self) -> CommitProgress: ...

    def submit(self, records: list[VersionedRecord], base_offset: int) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...
