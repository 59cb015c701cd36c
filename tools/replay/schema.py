"""The Spark schemas of the tables the job writes; their columns are the fields of
`decode.FrameRow`, `rules.Violation` and `decode.FlowRow`, in the same order."""
from __future__ import annotations

from pyspark.sql.types import (
    ArrayType, BooleanType, DataType, DoubleType, IntegerType, LongType, StringType, StructField, StructType)

from tools.replay.decode import FlowRow, FrameRow
from tools.replay.rules import ControllerEvent, Violation

_TYPES: dict[str, DataType] = {
    "capture": StringType(), "flow": StringType(), "frame": IntegerType(), "direction": StringType(),
    "timestamp_ns": LongType(), "api_key": IntegerType(), "api_name": StringType(), "api_version": IntegerType(),
    "correlation_id": IntegerType(), "client_id": StringType(), "size": IntegerType(), "latency_ms": DoubleType(),
    "status": StringType(), "violations": ArrayType(StringType(), False),
    "rule": StringType(), "severity": StringType(), "offset": LongType(), "detail": StringType(),
    "client": StringType(), "server": StringType(), "kafka": BooleanType(), "start_ns": LongType(),
    "end_ns": LongType(), "requests": IntegerType(), "responses": IntegerType(), "unanswered": IntegerType(),
    "bytes_to_server": LongType(), "bytes_to_client": LongType(), "gap_bytes": LongType(),
    "client_ids": ArrayType(StringType(), False), "violation_count": IntegerType(), "end_reason": StringType(),
    "kind": StringType(), "broker_id": IntegerType(), "epoch": LongType(), "cluster_id": StringType(),
    "error_code": IntegerType(),
}
# Columns some rows leave empty: what a frame that does not decode, or a problem of a whole
# capture, cannot say.
_NULLABLE = {"api_key", "api_name", "api_version", "client_id", "latency_ms", "flow", "frame", "timestamp_ns",
             "offset", "broker_id", "epoch", "cluster_id"}


def _schema(fields: tuple[str, ...], nullable: set[str]) -> StructType:
    return StructType([StructField(name, _TYPES[name], name in nullable) for name in fields])


FRAMES = _schema(FrameRow._fields, _NULLABLE - {"flow", "frame", "timestamp_ns"})
VIOLATIONS = _schema(Violation._fields, _NULLABLE)
FLOWS = _schema(FlowRow._fields, set())
EVENTS = _schema(ControllerEvent._fields, _NULLABLE - {"flow", "frame", "timestamp_ns"})
# Every kind of row the decoder yields, in one table: `tag` says which column holds it (the
# others are null), in this order: frame, violation, flow, event.
TAGGED = StructType([StructField("tag", IntegerType(), False)] + [
    StructField(name, kind, True) for name, kind in
    (("frame", FRAMES), ("violation", VIOLATIONS), ("flow", FLOWS), ("event", EVENTS))])
