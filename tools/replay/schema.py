"""The columns of the tables the job writes, as Arrow schemas: the fields of
`decode.FrameRow`, `rules.Violation` and `decode.FlowRow`, in the same order, and the
`ControllerEvent`s kept between the two steps. The tasks write these, the summary and the
cross-flow step read them; each imports this module rather than the others."""
from __future__ import annotations

from operator import itemgetter
from typing import Sequence

import pyarrow as pa

from tools.replay.decode import FlowRow, FrameRow
from tools.replay.rules import ControllerEvent, Violation

_NAMES = pa.list_(pa.field("element", pa.string(), nullable=False))
_TYPES: dict[str, pa.DataType] = {
    "capture": pa.string(), "flow": pa.string(), "frame": pa.int32(), "direction": pa.string(),
    "timestamp_ns": pa.int64(), "api_key": pa.int32(), "api_name": pa.string(), "api_version": pa.int32(),
    "correlation_id": pa.int32(), "client_id": pa.string(), "size": pa.int32(), "latency_ms": pa.float64(),
    "status": pa.string(), "violations": _NAMES,
    "rule": pa.string(), "severity": pa.string(), "offset": pa.int64(), "detail": pa.string(),
    "client": pa.string(), "server": pa.string(), "kafka": pa.bool_(), "start_ns": pa.int64(),
    "end_ns": pa.int64(), "requests": pa.int32(), "responses": pa.int32(), "unanswered": pa.int32(),
    "bytes_to_server": pa.int64(), "bytes_to_client": pa.int64(), "gap_bytes": pa.int64(),
    "client_ids": _NAMES, "violation_count": pa.int32(), "end_reason": pa.string(),
    "kind": pa.string(), "broker_id": pa.int32(), "epoch": pa.int64(), "cluster_id": pa.string(),
    "error_code": pa.int32(),
}
# Columns some rows leave empty: what a frame that does not decode, or a problem of a whole
# capture, cannot say.
_NULLABLE = {"api_key", "api_name", "api_version", "client_id", "latency_ms", "flow", "frame", "timestamp_ns",
             "offset", "broker_id", "epoch", "cluster_id"}


def _schema(fields: tuple[str, ...], nullable: set[str]) -> pa.Schema:
    return pa.schema([pa.field(name, _TYPES[name], name in nullable) for name in fields])


FRAMES = _schema(FrameRow._fields, _NULLABLE - {"flow", "frame", "timestamp_ns"})
VIOLATIONS = _schema(Violation._fields, _NULLABLE)
FLOWS = _schema(FlowRow._fields, set())
EVENTS = _schema(ControllerEvent._fields, _NULLABLE - {"flow", "frame", "timestamp_ns"})


def table(rows: Sequence[tuple[object, ...]], schema: pa.Schema) -> pa.Table:
    """Rows of one schema as an Arrow table, built column by column: Arrow converts a list of
    plain values several times faster than a list of row tuples it must take apart itself.
    Each column is gathered by its own pass over the rows: `zip(*rows)` would build the same
    columns as tuples from a call of as many arguments as rows, three times slower."""
    return pa.Table.from_arrays([pa.array(list(map(itemgetter(i), rows)), type=field.type)
                                 for i, field in enumerate(schema)], schema=schema)
