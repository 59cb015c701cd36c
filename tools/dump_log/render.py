"""The lines kafka-dump-log.sh prints, in text or as one JSON object per record.

Batch and record fields keep the names Kafka's DumpLogSegments prints, so output can be read
side by side with Kafka's.
"""

from __future__ import annotations

import json
from typing import Any

from protocol.errors import DecodeError
from protocol.records import COMPRESSION_MASK, TRANSACTIONAL_FLAG, BatchHeader, Record
from tools.dump_log.payload import decode_payload

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def batch_fields(position: int, header: BatchHeader, valid: bool) -> dict[str, Any]:
    last_sequence = -1 if header.base_sequence < 0 else header.base_sequence + header.last_offset_delta
    codec = header.attributes & COMPRESSION_MASK
    return {
        "baseOffset": header.base_offset, "lastOffset": header.last_offset,
        "count": header.record_count, "baseSequence": header.base_sequence,
        "lastSequence": last_sequence, "producerId": header.producer_id,
        "producerEpoch": header.producer_epoch, "partitionLeaderEpoch": header.partition_leader_epoch,
        "isTransactional": bool(header.attributes & TRANSACTIONAL_FLAG), "isControl": header.is_control,
        "position": position, "CreateTime": header.max_timestamp, "size": header.size,
        "magic": header.magic, "compresscodec": _CODECS.get(codec, str(codec)), "crc": header.crc,
        "isValid": valid,
    }


def record_fields(header: BatchHeader, record: Record) -> dict[str, Any]:
    """The record's metadata and its decoded content; ``error`` replaces ``payload`` when the
    content cannot be read."""
    sequence = -1 if header.base_sequence < 0 else header.base_sequence + record.offset_delta
    fields: dict[str, Any] = {
        "offset": header.base_offset + record.offset_delta,
        "CreateTime": header.base_timestamp + record.timestamp_delta,
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


def record_line(fields: dict[str, Any]) -> str:
    parts = [f"{key}: {_text_value(value)}" for key, value in fields.items()
             if key not in ("payload", "error")]
    if "payload" in fields:
        parts.append(f"payload: {to_json(fields['payload'])}")
    else:
        parts.append(f"error: {fields['error']}")
    return "| " + " ".join(parts)
