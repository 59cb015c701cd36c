"""python -m tools.dump_log, run as a real subprocess over real segment and snapshot files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.generated.metadata.leader_change_message import LeaderChangeMessage, Voter
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.primitives import uuid_to_str
from protocol.records import (
    CONTROL_FLAG, HEADER_SIZE, ControlType, Record, RecordBatch, control_key, control_value, encode_batch)
from server.metalog.bootstrap import bootstrap_records, metadata_level, write_bootstrap
from server.metalog.commit_path import encode_records
from server.metalog.segments import LogCorruption, MetadataLog
from server.metalog.snapshot_file import write_snapshot_file

REPO = Path(__file__).resolve().parents[2]
TOPIC_ID = bytes(range(1, 17))
NOW = 1_700_000_000_000
EPOCH = 4


def dump_log(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.dump_log", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def broker_record() -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=1, incarnation_id=bytes(16), broker_epoch=2, rack=None, fenced=True,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)])


def leader_change_batch(offset: int) -> bytes:
    voters = [Voter(voter_id=1)]
    message = LeaderChangeMessage(version=0, leader_id=1, voters=voters, granting_voters=voters)
    return encode_batch(RecordBatch(
        base_offset=offset, partition_leader_epoch=EPOCH, attributes=CONTROL_FLAG,
        base_timestamp=NOW, max_timestamp=NOW,
        records=[Record(control_value(message), control_key(ControlType.LEADER_CHANGE))]))


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    """Offsets 0-1 a topic and its partition, 2 a broker, 3 a leader change."""
    log = MetadataLog.open(tmp_path)
    log.append([
        encode_records([(TopicRecord(name="t", topic_id=TOPIC_ID), 0),
                        (PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2],
                                         leader=1, leader_epoch=0, partition_epoch=0), 0)], 0, EPOCH, NOW),
        encode_records([(broker_record(), 1)], 2, EPOCH, NOW + 5),
        leader_change_batch(3),
    ])
    log.close()
    return log.directory / "00000000000000000000.log"


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000004-0000000004.checkpoint"
    write_snapshot_file(path, [(TopicRecord(name="t", topic_id=TOPIC_ID), 0), (broker_record(), 1)], EPOCH)
    return path


def fields(line: str) -> dict[str, str]:
    """``key: value`` pairs of a batch line, or of a record line before its payload."""
    words = line.removeprefix("| ").split(" payload: ")[0].split()
    return dict(zip((w.rstrip(":") for w in words[::2]), words[1::2]))


def payload(line: str) -> dict:
    return json.loads(line.split(" payload: ", 1)[1])


def test_text_output_of_a_segment(segment: Path) -> None:
    result = dump_log(segment)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    batches = [fields(line) for line in lines if line.startswith("baseOffset:")]
    assert [(b["baseOffset"], b["lastOffset"], b["count"], b["isControl"]) for b in batches] == [
        ("0", "1", "2", "false"), ("2", "2", "1", "false"), ("3", "3", "1", "true")]
    assert all(b["partitionLeaderEpoch"] == str(EPOCH) and b["isvalid"] == "true" for b in batches)
    assert [b["CreateTime"] for b in batches] == [str(NOW), str(NOW + 5), str(NOW)]
    positions = [int(b["position"]) for b in batches]
    sizes = [int(b["size"]) for b in batches]
    assert positions == [0, sizes[0], sizes[0] + sizes[1]]
    assert positions[-1] + sizes[-1] == segment.stat().st_size

    records = [line for line in lines if line.startswith("| ")]
    assert [fields(line)["offset"] for line in records] == ["0", "1", "2", "3"]
    assert [payload(line)["type"] for line in records[:3]] == [
        "TOPIC_RECORD", "PARTITION_RECORD", "REGISTER_BROKER_RECORD"]
    topic, partition, broker = map(payload, records[:3])
    assert topic == {"type": "TOPIC_RECORD", "version": 0,
                     "data": {"name": "t", "topicId": uuid_to_str(TOPIC_ID)}}
    assert (partition["data"]["replicas"], partition["data"]["isr"], partition["data"]["leader"]) == ([1, 2], [1, 2], 1)
    assert broker["version"] == 1
    assert (broker["data"]["brokerId"], broker["data"]["endPoints"][0]["port"]) == (1, 9092)
    # Kafka prints a leader change's type only, in a control batch, with no payload.
    assert records[3].endswith(" headerKeys: [] controlType: LEADER_CHANGE(2)")
    assert fields(records[3])["keySize"] == "4"
    assert fields(records[0])["keySize"] == "-1"
    # Records and their batches alternate: each batch line is followed by its records.
    kinds = ["b" if line.startswith("baseOffset:") else "r" for line in lines[2:]]
    assert kinds == ["b", "r", "r", "b", "r", "b", "r"]


def test_json_output_is_one_object_per_record(segment: Path) -> None:
    result = dump_log("--json", segment)
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["offset"] for o in objects] == [0, 1, 2, 3]
    assert {o["file"] for o in objects} == {str(segment)}
    assert [o["batch"]["baseOffset"] for o in objects] == [0, 0, 2, 3]
    assert [o["batch"]["isControl"] for o in objects] == [False, False, False, True]
    assert all(o["batch"]["isvalid"] is True for o in objects)
    assert objects[1]["payload"]["data"]["topicId"] == uuid_to_str(TOPIC_ID)
    assert objects[2]["payload"]["type"] == "REGISTER_BROKER_RECORD"
    assert objects[3]["payload"]["type"] == "LeaderChange" and objects[3]["payload"]["data"]["leaderId"] == 1
    assert objects[2]["CreateTime"] == NOW + 5


def test_skip_record_metadata_prints_batches_and_payloads(segment: Path) -> None:
    result = dump_log("--skip-record-metadata", segment)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()[2:]
    kinds = ["b" if line.startswith("baseOffset:") else line[:10] for line in lines]
    # As Kafka: a data record is its payload alone, a control record an empty line.
    assert kinds == ["b", " payload: ", " payload: ", "b", " payload: ", "b", ""]
    as_json = dump_log("--json", "--skip-record-metadata", segment)
    batches = [json.loads(line)["batch"] for line in as_json.stdout.splitlines()]
    assert [b["baseOffset"] for b in batches] == [0, 2, 3]


def test_snapshot_file_shows_header_records_and_footer(snapshot: Path) -> None:
    result = dump_log(snapshot)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "Snapshot end offset: 4, epoch: 4"
    records = [line for line in lines if line.startswith("| ")]
    assert " headerKeys: [] SnapshotHeader {\"version\":0,\"lastContainedLogTimestamp\":" in records[0]
    assert [payload(line)["type"] for line in records[1:3]] == ["TOPIC_RECORD", "REGISTER_BROKER_RECORD"]
    assert records[3].endswith(' headerKeys: [] SnapshotFooter {"version":0}')
    assert [fields(line)["offset"] for line in records] == ["0", "1", "2", "3"]


def test_bootstrap_checkpoint(tmp_path: Path) -> None:
    write_bootstrap(tmp_path, bootstrap_records("3.7"))
    result = dump_log("--json", tmp_path / "bootstrap.checkpoint")
    assert result.returncode == 0, result.stderr
    types = [(o["payload"]["type"], o["payload"]["data"].get("name"), o["payload"]["data"].get("featureLevel"))
             for o in map(json.loads, result.stdout.splitlines())]
    assert types == [("SnapshotHeader", None, None), ("FEATURE_LEVEL_RECORD", "metadata.version", metadata_level("3.7")),
                     ("SnapshotFooter", None, None)]


def test_several_files_in_one_run(segment: Path, snapshot: Path) -> None:
    result = dump_log(segment, snapshot)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("Dumping")] == [
        f"Dumping {segment}", f"Dumping {snapshot}"]


def test_flipped_byte_stops_at_the_corrupt_batch(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    second = int(fields(dump_log(segment).stdout.splitlines()[2])["size"])
    data[second + HEADER_SIZE + 3] ^= 0x40  # inside the second batch's records, under its CRC
    segment.write_bytes(bytes(data))
    result = dump_log(segment)
    assert result.returncode == 1
    assert result.stderr.strip() == f"{segment}: corrupt batch at byte {second}: CRC-32C mismatch; nothing after it was read"
    lines = result.stdout.splitlines()
    # The first batch and its records were printed; the damaged batch is shown as invalid.
    assert [fields(line)["offset"] for line in lines if line.startswith("| ")] == ["0", "1"]
    assert fields(lines[-1])["position"] == str(second) and fields(lines[-1])["isvalid"] == "false"


def test_torn_tail_is_reported_as_such(segment: Path) -> None:
    data = segment.read_bytes()
    segment.write_bytes(data[:-7])
    result = dump_log("--json", segment)
    assert result.returncode == 1
    assert [json.loads(line)["offset"] for line in result.stdout.splitlines()] == [0, 1, 2]
    assert f"{segment}: torn tail at byte " in result.stderr
    assert "not a whole batch" in result.stderr


def test_unreadable_files_are_errors_but_the_rest_is_dumped(tmp_path: Path, segment: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    result = dump_log(tmp_path / "missing.log", other, segment)
    assert result.returncode == 1
    assert f"{tmp_path / 'missing.log'}: cannot read: No such file or directory" in result.stderr
    assert f"{other}: not a .log segment or a .checkpoint snapshot" in result.stderr
    assert f"Dumping {segment}" in result.stdout


def test_kafka_flags_files_and_shallow_iteration(segment: Path, snapshot: Path) -> None:
    """``--files a,b`` as kafka-dump-log.sh takes it; without a decoder or --deep-iteration only
    the batches are listed, with --deep-iteration their records too but no payload."""
    shallow = dump_log("--files", f"{segment},{snapshot}")
    assert shallow.returncode == 0, shallow.stderr
    lines = shallow.stdout.splitlines()
    assert [line for line in lines if line.startswith("Dumping")] == [f"Dumping {segment}", f"Dumping {snapshot}"]
    assert not [line for line in lines if line.startswith("|")]
    assert len([line for line in lines if line.startswith("baseOffset:")]) == 3 + 3
    deep = dump_log("--deep-iteration", "--files", str(segment)).stdout.splitlines()
    records = [line for line in deep if line.startswith("| ")]
    assert len(records) == 4 and not [line for line in records if " payload: " in line]
    decoded = dump_log("--print-data-log", "--files", str(segment)).stdout.splitlines()
    assert payload([line for line in decoded if line.startswith("| ")][0])["type"] == "TOPIC_RECORD"


def jq(program: str, lines: str) -> list[str]:
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    result = subprocess.run(["jq", "-r", program], input=lines, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_jq_reads_the_payloads_as_written_for_kafka(segment: Path) -> None:
    """The pipeline Kafka users run: the payloads of --cluster-metadata-decoder, cut after
    ``payload: ``, read by jq with Kafka's record type names and camelCase fields."""
    result = dump_log("--cluster-metadata-decoder", "--skip-record-metadata", "--files", str(segment))
    assert result.returncode == 0, result.stderr
    payloads = "\n".join(line.split("payload: ", 1)[1] for line in result.stdout.splitlines()
                         if line.startswith(" payload: "))
    assert jq('select(.type == "TOPIC_RECORD") | "\\(.data.name) \\(.data.topicId)"', payloads) == [
        f"t {uuid_to_str(TOPIC_ID)}"]
    assert jq('select(.type == "PARTITION_RECORD") | .data.isr | length', payloads) == ["2"]
    assert jq('select(.type == "REGISTER_BROKER_RECORD") | .data.endPoints[0].port', payloads) == ["9092"]
    as_json = dump_log("--json", segment).stdout
    assert jq('select(.batch.isControl) | .payload.data.leaderId', as_json) == ["1"]


def test_a_gap_in_the_offsets_fails_as_the_controller_refuses_it(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path / "log")
    log.append([encode_records([(TopicRecord(name="t", topic_id=TOPIC_ID), 0)], 0, EPOCH, NOW)])
    log.close()
    path = log.directory / "00000000000000000000.log"
    with path.open("ab") as f:
        f.write(encode_records([(broker_record(), 1)], 5, EPOCH, NOW))
    result = dump_log("--cluster-metadata-decoder", "--files", str(path))
    assert result.returncode == 1
    second = len(path.read_bytes()) - len(encode_records([(broker_record(), 1)], 5, EPOCH, NOW))
    assert result.stderr.strip() == (f"{path}: non-consecutive offsets at byte {second}: batch starts at offset 5, expected 1; the controller refuses this log at start-up")
    # Everything is still shown, as Kafka's tool shows it.
    assert [fields(line)["offset"] for line in result.stdout.splitlines() if line.startswith("| ")] == ["0", "5"]
    with pytest.raises(LogCorruption, match="batch starts at offset 5, expected 1"):
        MetadataLog.open(tmp_path / "log")


def test_no_file_is_a_usage_error() -> None:
    result = dump_log("--cluster-metadata-decoder")
    assert result.returncode == 2 and "no file to dump" in result.stderr and "Traceback" not in result.stderr
