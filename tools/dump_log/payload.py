"""The decoded content of one record: a framed metadata record, or a control record.

Both come out as ``{"type": ..., "version": ..., "data": {...}}`` with Kafka's names: a
metadata record as kafka-dump-log.sh's ``--cluster-metadata-decoder`` prints its payload
(``TOPIC_RECORD``, camelCase fields), a control record under the name Kafka prints before its
JSON (``SnapshotHeader``, ...) or, for a transaction marker, ``COMMIT``/``ABORT``.
"""

from __future__ import annotations

import struct
from typing import Any

from protocol.errors import DecodeError
from protocol.generated.metadata.metadata_record_type import MetadataRecordType
from protocol.message import api_key_of
from protocol.primitives import INT16
from protocol.records import (
    ControlType, Record, control_message_class, parse_control_key, parse_control_value, parse_metadata_record)
from tools.dump_log.kafka_json import kafka_json

# The names kafka-dump-log.sh prints before a KRaft control record's JSON.
CONTROL_NAMES: dict[int, str] = {
    ControlType.LEADER_CHANGE: "LeaderChange", ControlType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlType.SNAPSHOT_FOOTER: "SnapshotFooter", ControlType.KRAFT_VERSION: "KRaftVersion",
    ControlType.KRAFT_VOTERS: "KRaftVoters",
}
# Transaction markers: a version, then the coordinator epoch.
_END_TXN = struct.Struct(">hi")
END_TXN_TYPES = (ControlType.ABORT, ControlType.COMMIT)


def decode_payload(record: Record, is_control: bool) -> dict[str, Any]:
    """The record's content; raises DecodeError if it cannot be read."""
    if is_control:
        return _control(record)
    if record.value is None:
        raise DecodeError("MetadataRecord", None, 0, "the record value is null")
    message, version = parse_metadata_record(record.value)
    return {"type": MetadataRecordType(api_key_of(message)).name, "version": version,
            "data": kafka_json(message, version)}


def _control(record: Record) -> dict[str, Any]:
    # A missing key is refused as a short one.
    control_type = parse_control_key(record.key or b"")
    value = record.value
    if value is None or len(value) < INT16.size:
        raise DecodeError("ControlRecord", None, 0, "the control record value is missing")
    if control_type in END_TXN_TYPES:
        if len(value) != _END_TXN.size:
            raise DecodeError("EndTxnMarker", None, 0, f"{len(value)} bytes, expected {_END_TXN.size}")
        version, coordinator_epoch = _END_TXN.unpack(value)
        return {"type": ControlType(control_type).name, "version": version,
                "data": {"coordinatorEpoch": coordinator_epoch}}
    cls = control_message_class(control_type)
    if cls is None:
        raise DecodeError("ControlRecord", None, 0, f"unknown control record type {control_type}")
    message = parse_control_value(value, cls)
    # Every KRaft control message begins with its own Version field, which it was decoded at.
    (version,) = INT16.unpack_from(value)
    return {"type": CONTROL_NAMES[control_type], "version": version, "data": kafka_json(message, version)}
