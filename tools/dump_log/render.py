"""The lines kafka-dump-log.sh prints, in text or as one JSON object per record.

Batch and record lines are Kafka's DumpLogSegments lines, field for field, so grep, sed and jq
scripts written for Kafka's output read ours.
"""

from __future__ import annotations

import json
from typing import Any

from protocol.errors import DecodeError
from protocol.records import COMPRESSION_MASK, TRANSACTIONAL_FLAG, BatchHeader, ControlType, Record
from tools.dump_log.payload import CONTROL_NAMES, decode_payload

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_LOG_APPEND_TIME = 0x08
_DELETE_HORIZON = 0x40


def timestamp_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.attributes & _LOG_APPEND_TIME else "CreateTime"


def batch_fields(position: int, header: BatchHeader, valid: bool) -> dict[str, Any]:
    last_sequence = -1 if header.base_sequence < 0 else header.base_sequence + header.last_offset_delta
    codec = header.attributes & COMPRESSION_MASK
    horizon = (f"OptionalLong[{header.base_timestamp}]" if header.attributes & _DELETE_HORIZON
               else "OptionalLong.empty")
    return {
        "baseOffset": header.base_offset, "lastOffset": header.last_offset,
        "count": header.record_count, "baseSequence": header.base_sequence,
        "lastSequence": last_sequence, "producerId": header.producer_id,
        "producerEpoch": header.producer_epoch, "partitionLeaderEpoch": header.partition_leader_epoch,
        "isTransactional": bool(header.attributes & TRANSACTIONAL_FLAG), "isControl": header.is_control,
        "deleteHorizonMs": horizon, "position": position, timestamp_type(header): header.max_timestamp,
        "size": header.size, "magic": header.magic, "compresscodec": _CODECS.get(codec, str(codec)),
        "crc": header.crc, "isvalid": valid,
    }


def record_fields(header: BatchHeader, record: Record) -> dict[str, Any]:
    """The record's metadata and its decoded content; ``error`` replaces ``payload`` when the
    content cannot be read."""
    sequence = -1 if header.base_sequence < 0 else header.base_sequence + record.offset_delta
    fields: dict[str, Any] = {
        "offset": header.base_offset + record.offset_delta,
        timestamp_type(header): header.base_timestamp + record.timestamp_delta,
        "keySize": -1 if record.key is None else len(record.key),
        "valueSize": -1 if record.value is None else len(record.value),
        "sequence": sequence,
        "headerKeys": [name for name, _ in record.headers],
    }
    try:
        fields["payload"] = decode_payload(record, header.is_control)
    except DecodeError as exc:
        fields["error"] = str(exc)
    return fields


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _text_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(value) + "]"
    return str(value)


def batch_line(fields: dict[str, Any]) -> str:
    return " ".join(f"{key}: {_text_value(value)}" for key, value in fields.items())


def record_line(fields: dict[str, Any], is_control: bool, skip_record_metadata: bool, print_payload: bool) -> str:
    """Kafka's record line: ``| offset: ... headerKeys: [...]``, then a control record's
    content, or ``payload: <JSON>`` for a data record when payloads are printed."""
    line = ""
    if not skip_record_metadata:
        line = "| " + " ".join(f"{key}: {_text_value(value)}" for key, value in fields.items()
                               if key not in ("payload", "error"))
        if is_control:
            line += " " + _control_text(fields)
    if print_payload and not is_control:
        offset = fields["offset"]
        text = to_json(fields["payload"]) if "payload" in fields else \
            f"Error at {offset}, skipping. {fields['error']}"
        line += f" payload: {text}"
    return line


def _control_text(fields: dict[str, Any]) -> str:
    if "error" in fields:
        return f"error: {fields['error']}"
    payload = fields["payload"]
    kind = payload["type"]
    if kind in (ControlType.COMMIT.name, ControlType.ABORT.name):
        return f"endTxnMarker: {kind} coordinatorEpoch: {payload['data']['coordinatorEpoch']}"
    if kind == CONTROL_NAMES[ControlType.LEADER_CHANGE]:
        # Kafka prints no content for this one, only its type.
        return f"controlType: LEADER_CHANGE({int(ControlType.LEADER_CHANGE)})"
    return f"{kind} {to_json(payload['data'])}"
