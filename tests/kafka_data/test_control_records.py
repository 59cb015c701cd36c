"""Control records are byte-exact with Kafka's: read from real Kafka files, and as kraftwire writes them.

A control record's value is the control message alone; it starts with the message's own
``Version`` int16 field.
"""

from __future__ import annotations

import signal
import struct
from collections import Counter
from pathlib import Path

import pytest

from protocol.records import (
    ControlType, control_message_class, control_value, iter_batches, parse_control_key,
    parse_control_value)
from server.config import EMBEDDED_NODE_ID
from server.metalog.snapshot_file import encode_snapshot
from tests.support.kafka_data import metadata_files
from tests.support.shared_data import metadata_dir_params
from tools.processes import poll


def control_records(data: bytes) -> list[tuple[int, bytes]]:
    """(control type, value) of every control record in a file's batches."""
    found = []
    for batch, _ in iter_batches(data):
        if batch.is_control:
            found += [(parse_control_key(r.key), r.value) for r in batch.records]
    return found


@pytest.mark.parametrize("directory", metadata_dir_params())
def test_kafka_control_records_reencode_to_the_same_bytes(directory: Path) -> None:
    seen: Counter[int] = Counter()
    for path in metadata_files(directory):
        for control_type, value in control_records(path.read_bytes()):
            message = parse_control_value(value, control_message_class(control_type))
            assert control_value(message) == value, f"{path.name}: {type(message).__name__}"
            seen[control_type] += 1
    # Every directory holds at least a leader change or a snapshot's header.
    assert seen[ControlType.LEADER_CHANGE] or seen[ControlType.SNAPSHOT_HEADER]


def test_snapshot_header_and_footer_have_kafkas_layout() -> None:
    batches = list(encode_snapshot([], epoch=4, now_ms=1_700_000_000_123))
    header, footer = (control_records(b)[0] for b in batches)
    # Version 0, the timestamp, no tagged fields: Kafka's 11-byte header and 3-byte footer.
    assert header == (ControlType.SNAPSHOT_HEADER, struct.pack(">hq", 0, 1_700_000_000_123) + b"\x00")
    assert footer == (ControlType.SNAPSHOT_FOOTER, struct.pack(">h", 0) + b"\x00")


def test_what_the_server_writes_has_kafkas_layout(controller) -> None:
    """The leader change the controller writes on start and the header and footer of the
    snapshot it takes, read back from its files."""
    partition = controller.data_dir / "__cluster_metadata-0"
    controller.proc.send_signal(signal.SIGUSR1)
    snapshot = poll(lambda: next(iter(partition.glob("*.checkpoint")), None), 120, message="a snapshot")
    controller.stop()

    leader_changes = [v for path in sorted(partition.glob("*.log"))
                      for t, v in control_records(path.read_bytes()) if t == ControlType.LEADER_CHANGE]
    # Version 0, the leader, one voter and one granting voter (id, no tags), no tagged
    # fields: the 19 bytes a single-voter Kafka controller writes.
    voter = struct.pack(">i", EMBEDDED_NODE_ID) + b"\x00"
    assert leader_changes == [struct.pack(">hi", 0, EMBEDDED_NODE_ID) + b"\x02" + voter + b"\x02" + voter + b"\x00"]

    controls = control_records(snapshot.read_bytes())
    assert [t for t, _ in controls] == [ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER]
    header = controls[0][1]
    assert len(header) == 11 and header[:2] == b"\x00\x00" and header[-1:] == b"\x00"
    assert controls[1][1] == b"\x00\x00\x00"
