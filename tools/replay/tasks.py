"""What one decoding task does on an executor: decode its share of a capture and write each
table's rows itself, as one Parquet part file per table, tallying what it wrote for the summary.

The rows go from the decoder to Arrow in batches and from there to the files, so a task holds
one batch of rows at a time whatever the size of its share, and the JVM never sees a row.
A file is written under a temporary name and renamed when complete: a task that Spark runs
again replaces its earlier output rather than adding to it.
"""
from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Iterator, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from tools.replay import schema
from tools.replay.decode import FlowRow, FrameRow
from tools.replay.in_order import decode_share
from tools.replay.index import Share
from tools.replay.rules import ControllerEvent, Violation, violation
from tools.replay.summary import Tally

# Rows per Arrow batch, and so per Parquet row group.
BATCH_ROWS = 65536
# The tables the job writes, each a folder of part files under the output folder; and the
# controller events the cross-flow rules read, kept in a scratch folder until they are judged.
TABLES = ("frames", "violations", "flows")
EVENTS = "_events"
_SCHEMAS = {FrameRow: schema.FRAMES, Violation: schema.VIOLATIONS, FlowRow: schema.FLOWS, ControllerEvent: schema.EVENTS}
_FOLDERS = {FrameRow: "frames", Violation: "violations", FlowRow: "flows", ControllerEvent: EVENTS}


class Task(NamedTuple):
    capture: str  # the name rows carry: the path as given
    ports: tuple[int, ...]
    share: Share | None  # None for a capture with nothing to decode
    violations: list[Violation]  # the capture's own problems, found by the index, sent once


Row = FrameRow | Violation | FlowRow | ControllerEvent


def run_task(task: Task) -> Iterator[Row]:
    """The rows of one task: its capture's problems, then the rows of its share. A file that
    cannot be read, or a decoder failure, becomes a violation: one bad capture never stops the job."""
    yield from task.violations
    if task.share is None:
        return
    try:
        yield from decode_share(task.share, task.capture, frozenset(task.ports))
    except OSError as exc:
        yield violation(task.capture, None, None, None, "unreadable_file", None, str(exc))
    except Exception as exc:  # a decoder bug must cost one share of one capture, not the job
        where = traceback.extract_tb(exc.__traceback__)[-1]
        detail = f"{type(exc).__name__}: {exc} at {Path(where.filename).name}:{where.lineno}; rest of the share skipped"
        yield violation(task.capture, None, None, None, "decoder_failure", None, detail)


class Written(NamedTuple):
    """What a task hands back to the driver."""

    tally: Tally
    frames: int
    cpu_s: float  # the task's CPU time


def part_path(folder: str, table: str, task: int) -> str:
    return os.path.join(folder, table, f"part-{task:05d}.parquet")


def write_task(task: Task, number: int, out: str, scratch: str) -> Written:
    """Decode `task` (the job's task `number`) into part files of the tables under `out` and of
    its controller events under `scratch`, every one written even when empty so that each
    table reads with its schema."""
    started = time.process_time()
    tally = Tally()
    files = {kind: PartFile(part_path(scratch if kind is ControllerEvent else out, _FOLDERS[kind], number),
                            _SCHEMAS[kind]) for kind in _SCHEMAS}
    pending: dict[type, list[Row]] = {kind: [] for kind in _SCHEMAS}
    frames = 0

    def flush(kind: type) -> None:
        nonlocal frames
        rows, pending[kind] = pending[kind], []
        frames += len(rows) if kind is FrameRow else 0
        batch = schema.table(rows, _SCHEMAS[kind])
        files[kind].write(batch)
        if kind is FrameRow:
            tally.add_frames(batch)
        elif kind is Violation:
            tally.add_violations(batch)
        elif kind is FlowRow:
            tally.add_flows(batch)

    try:
        for row in run_task(task):
            kind = type(row)
            rows = pending[kind]
            rows.append(row)
            if len(rows) >= BATCH_ROWS:
                flush(kind)
        for kind, rows in pending.items():
            if rows:
                flush(kind)
        for file in files.values():
            file.close()
    finally:
        for file in files.values():
            file.abandon()
    return Written(tally, frames, time.process_time() - started)


class PartFile:
    """One Parquet part file, written under a temporary name until `close`."""

    def __init__(self, path: str, table_schema: pa.Schema) -> None:
        self.path = path
        self.temporary = f"{path}.{os.getpid()}.tmp"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.writer: pq.ParquetWriter | None = pq.ParquetWriter(self.temporary, table_schema)

    def write(self, table: pa.Table) -> None:
        assert self.writer is not None
        self.writer.write_table(table)

    def close(self) -> None:
        assert self.writer is not None
        self.writer.close()
        self.writer = None
        os.replace(self.temporary, self.path)

    def abandon(self) -> None:
        """Remove the file unless it was closed (after a failure)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            os.unlink(self.temporary)


def write_part(path: str, table: pa.Table) -> None:
    """One whole part file of `table`, in place only once complete."""
    file = PartFile(path, table.schema)
    try:
        file.write(table)
        file.close()
    finally:
        file.abandon()
