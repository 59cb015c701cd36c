"""A record kraftwire cannot read (an unknown type, or a version newer than its schemas) stops
start-up with one line naming the file, offset and type; dump_log shows it and goes on."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from protocol.generated.metadata.no_op_record import NoOpRecord
from protocol.records import Record, RecordBatch, encode_batch, frame_metadata_record
from server.metalog.meta_properties import StorageError
from server.metalog.snapshot_file import encode_snapshot, read_snapshot_file
from tests.support.kafka_data import read_batches
from tests.support.shared_data import shared_dir
from tools.dump_log import Options, dump_file

SOURCE = "kafka-metadata-dirs/kafka-ldi"
# Framed values: frame version 1, API key, record version, then (here) nothing readable.
UNKNOWN_TYPE = bytes([1, 99, 0, 0])
NEWER_PARTITION_RECORD = bytes([1, 3, 9, 0])


def with_appended(source: Path, target: Path, value: bytes) -> tuple[Path, int]:
    """Copy ``source`` to ``target`` and append a batch holding ``value`` and a NoOpRecord."""
    shutil.copytree(source, target)
    segment = max((target / "__cluster_metadata-0").glob("*.log"))
    data = segment.read_bytes()
    last = read_batches(data)[-1]
    offset = last[2][-1][0] + 1
    batch = RecordBatch(base_offset=offset, partition_leader_epoch=1, records=[
        Record(value), Record(frame_metadata_record(NoOpRecord(), 0))])
    segment.write_bytes(data + encode_batch(batch))
    return segment, offset


@pytest.mark.parametrize("value, named", [
    (UNKNOWN_TYPE, "unknown metadata record type 99 (version 0)"),
    (NEWER_PARTITION_RECORD, "PartitionRecord version 9 is newer than this kraftwire reads"),
], ids=["unknown-type", "newer-version"])
def test_start_up_stops_with_one_line(tmp_path: Path, value: bytes, named: str, start_on) -> None:
    copy = tmp_path / "copy"
    segment, offset = with_appended(shared_dir(SOURCE), copy, value)
    with pytest.raises(RuntimeError) as failure:
        start_on(copy)
    stderr = str(failure.value)
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("storage error: ") and named in last
    assert f"run-0/data/__cluster_metadata-0/{segment.name}: offset {offset}:" in last


def test_dump_log_shows_it_as_undecodable_and_goes_on(tmp_path: Path) -> None:
    segment, offset = with_appended(shared_dir(SOURCE), tmp_path / "copy", UNKNOWN_TYPE)
    out, err = io.StringIO(), io.StringIO()
    assert not dump_file(segment, Options(json=True), out, err)
    records = {r["offset"]: r for r in map(json.loads, out.getvalue().splitlines())}
    assert "unknown metadata record type 99" in records[offset]["error"]
    assert records[offset + 1]["payload"]["type"] == "NO_OP_RECORD"


def test_a_snapshot_record_of_a_newer_version_names_its_offset(tmp_path: Path) -> None:
    # Header batch (offset 0), one batch holding the unreadable record at offset 1, footer.
    header, footer = list(encode_snapshot([], now_ms=1))
    middle = encode_batch(RecordBatch(base_offset=1, records=[Record(NEWER_PARTITION_RECORD)]))
    footer_at_2 = bytearray(footer)
    footer_at_2[:8] = (2).to_bytes(8, "big")  # the base offset lies outside the CRC
    path = tmp_path / "00000000000000000003-0000000001.checkpoint"
    path.write_bytes(header + middle + bytes(footer_at_2))
    with pytest.raises(StorageError) as failure:
        read_snapshot_file(path)
    assert str(failure.value) == (f"{path}: offset 1: PartitionRecord version 9 is newer than this kraftwire "
                                  f"reads (versions 0-2)")
