"""python -m tools.metadata_shell over real snapshot files, log directories and a live controller."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from protocol.client import KafkaClient
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from protocol.generated.metadata.config_record import ConfigRecord
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.generated.metadata.leader_change_message import LeaderChangeMessage, Voter
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.producer_ids_record import ProducerIdsRecord
from protocol.generated.metadata.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.generated.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.primitives import random_uuid, uuid_to_str
from protocol.records import CONTROL_FLAG, ControlType, Record, RecordBatch, control_key, control_value, encode_batch
from server.config import EMBEDDED_NODE_ID
from server.metalog.bootstrap import bootstrap_records, metadata_level, write_bootstrap
from server.metalog.commit_path import encode_records
from server.metalog.segments import PARTITION_DIR, MetadataLog
from server.metalog.snapshot_file import write_snapshot_file
from server.metalog.snapshots import SnapshotId
from tools.metadata_shell.__main__ import main
from tools.metadata_shell.interactive import completions
from tools.metadata_shell.shell import Shell
from tools.processes import free_port, poll

REPO = Path(__file__).resolve().parents[2]
T_ID = bytes(range(1, 17))
OTHER_ID = bytes(range(17, 33))
LATE_ID = bytes(range(33, 49))
INCARNATION = bytes(range(100, 116))
NOW = 1_700_000_000_000
EPOCH = 3

Run = Callable[..., subprocess.CompletedProcess[str]]


def shell(source: str, where: str | Path, *command: str, stdin: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    """The tool as a process of its own."""
    return subprocess.run([sys.executable, "-m", "tools.metadata_shell", source, str(where), *command],
                          cwd=REPO, input=stdin, capture_output=True, text=True, timeout=60)


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """The tool's main() in this process: the same code and files without a second of start-up
    per call, for the tests that run many commands."""
    def call(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess([str(a) for a in argv], code, out, err)

    return call


def broker(broker_id: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=INCARNATION, broker_epoch=10 + broker_id, rack=None,
        fenced=True, end_points=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id,
                                                security_protocol=0)])


def partition(topic_id: bytes, pid: int, leader: int, isr: list[int]) -> PartitionRecord:
    return PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=[1, 2], isr=isr, leader=leader,
                           leader_epoch=0, partition_epoch=0)


def base_state() -> list[tuple]:
    """Six records: metadata.version, two brokers (1 unfenced), topic t with two partitions."""
    return [
        (FeatureLevelRecord(name="metadata.version", feature_level=metadata_level("3.7")), 0),
        (broker(1), 1), (broker(2), 1),
        (UnfenceBrokerRecord(id=1, epoch=11), 0),
        (TopicRecord(name="t", topic_id=T_ID), 0),
        (partition(T_ID, 0, 1, [1, 2]), 0),
    ]


def snapshot_state() -> list[tuple]:
    return base_state() + [
        (partition(T_ID, 1, 2, [2]), 0),
        (TopicRecord(name="other", topic_id=OTHER_ID), 0),
        (partition(OTHER_ID, 0, 2, [2]), 0),
        (ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy", value="compact"), 0),
        (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="2"), 0),
    ]


def leader_change(offset: int) -> bytes:
    voters = [Voter(voter_id=1)]
    message = LeaderChangeMessage(version=0, leader_id=1, voters=voters, granting_voters=voters)
    return encode_batch(RecordBatch(
        base_offset=offset, partition_leader_epoch=EPOCH, attributes=CONTROL_FLAG, base_timestamp=NOW,
        max_timestamp=NOW, records=[Record(control_value(message), control_key(ControlType.LEADER_CHANGE))]))


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / SnapshotId(11, EPOCH).file_name
    write_snapshot_file(path, snapshot_state(), EPOCH)
    return path


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A metadata.log.dir: offsets 0-5 then a leader change at 6 in the log; a snapshot at end
    offset 7 that also holds a topic config the log prefix lacks (so it shows whether the
    snapshot was loaded); then offsets 7-10 after it."""
    directory = tmp_path / "meta"
    log = MetadataLog.open(directory)
    log.append([encode_records(base_state(), 0, EPOCH, NOW), leader_change(6)])
    write_snapshot_file(log.directory / SnapshotId(7, EPOCH).file_name, base_state() + [
        (ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1000"), 0)], EPOCH)
    log.append([encode_records([
        (PartitionChangeRecord(topic_id=T_ID, partition_id=0, leader=2, isr=[2]), 0),
        (TopicRecord(name="late", topic_id=LATE_ID), 0),
        (partition(LATE_ID, 0, 1, [1]), 0),
        (ProducerIdsRecord(broker_id=1, broker_epoch=11, next_producer_id=1000), 0),
    ], 7, EPOCH, NOW)])
    log.close()
    return directory


# --- from a snapshot file --------------------------------------------------------------------------

T = "/image/topics/byName/t"
BROKERS = "/image/cluster/brokers"


def part(result: subprocess.CompletedProcess[str]) -> list[dict]:
    """The partition registrations ``cat`` printed, one JSON object a line."""
    return [json.loads(line) for line in lines(result)]


def test_snapshot_ls_cat_find(snapshot: Path, run: Run) -> None:
    assert lines(shell("--snapshot", snapshot, "ls", "/image/topics/byName")) == ["other", "t"]
    assert lines(run("--snapshot", snapshot, "ls")) == ["image", "local"]
    assert lines(run("--snapshot", snapshot, "ls", "/image")) == [
        "acls", "clientQuotas", "cluster", "configs", "delegationToken", "features", "producerIds",
        "provenance", "scram", "topics"]
    assert lines(run("--snapshot", snapshot, "ls", "/image/topics")) == ["byId", "byName"]
    assert lines(run("--snapshot", snapshot, "ls", T)) == ["0", "1", "id", "name"]
    zero, one = part(run("--snapshot", snapshot, "cat", f"{T}/0", f"{T}/1"))
    assert (zero["leader"], zero["isr"], one["replicas"]) == (1, [1, 2], [1, 2])
    assert lines(run("--snapshot", snapshot, "find", BROKERS)) == [BROKERS, f"{BROKERS}/1", f"{BROKERS}/2"]
    fenced = [r["fenced"] for r in part(run("--snapshot", snapshot, "cat", f"{BROKERS}/1", f"{BROKERS}/2"))]
    assert fenced == [False, True]
    registration = json.loads(lines(run("--snapshot", snapshot, "cat", f"{BROKERS}/2"))[0])
    assert registration["listeners"] == [
        {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092, "securityProtocol": 0}]
    assert (registration["epoch"], registration["incarnationId"]) == (12, uuid_to_str(INCARNATION))
    # Several paths: the values alone, as Kafka's shell prints them.
    assert lines(run("--snapshot", snapshot, "cat", f"/image/topics/byId/{uuid_to_str(T_ID)}/name",
                     "/image/topics/byName/other/id")) == ["t", uuid_to_str(OTHER_ID)]
    assert lines(run("--snapshot", snapshot, "cat", "/image/features/metadataVersion")) == ["3.7-IV4"]
    assert lines(run("--snapshot", snapshot, "cat", "/image/configs/TOPIC:t/cleanup.policy",
                     "/image/configs/BROKER/min.insync.replicas")) == ["compact", "2"]
    # A snapshot ending before offset 11 holds everything up to offset 10, written in its epoch
    # (Kafka's MetadataProvenance of a snapshot: its SnapshotId's offset and epoch).
    assert lines(run("--snapshot", snapshot, "cat", "/image/provenance")) == [f"offset 10, epoch {EPOCH}"]
    assert lines(run("--snapshot", snapshot, "ls", "/local")) == ["commitId", "version"]


def test_one_shot_command_as_one_argument_or_several(snapshot: Path, run: Run) -> None:
    assert lines(shell("--snapshot", snapshot, "ls /image/topics/byName")) == ["other", "t"]
    assert lines(run("--snapshot", snapshot, "cat /image/topics/byName/t/name")) == ["t"]
    assert lines(run("--snapshot", snapshot, "ls", "/image/topics/byName")) == ["other", "t"]


def test_several_commands_on_one_line(snapshot: Path, run: Run) -> None:
    both = ["other", "t", f"offset 10, epoch {EPOCH}"]
    assert lines(shell("--snapshot", snapshot, "ls /image/topics/byName", "cat /image/provenance")) == both
    assert lines(run("--snapshot", snapshot, "ls /image/topics/byName; cat /image/provenance")) == both
    assert lines(run("--snapshot", snapshot, "cd /image/topics;ls ; ;pwd")) == ["byId", "byName", "/image/topics"]
    # A quoted ; is part of a word; a failed command fails the line, and the rest still run.
    result = run("--snapshot", snapshot, "cat '/x;y'; cat /image/topics/byName/t/name", "pwd")
    assert (result.returncode, result.stdout, result.stderr) == (1, "t\n/\n", "cat: /x;y: no such node\n")


def test_tree_prints_names_and_values_indented(snapshot: Path, run: Run) -> None:
    out = lines(run("--snapshot", snapshot, "tree", "/image/topics/byName/other"))
    assert out[:2] == ["0:", "  " + lines(run("--snapshot", snapshot, "cat", "/image/topics/byName/other/0"))[0]]
    assert out[2:] == ["id:", f"  {uuid_to_str(OTHER_ID)}", "name:", "  other"]
    assert lines(run("--snapshot", snapshot, "tree", "/image/configs")) == [
        "BROKER:", "  min.insync.replicas:", "    2", "TOPIC:t:", "  cleanup.policy:", "    compact"]


def test_partition_registration(snapshot: Path, run: Run) -> None:
    (registration,) = part(run("--snapshot", snapshot, "cat", f"{T}/1"))
    assert registration == {
        # A record without directories: each replica's is Kafka's MIGRATING id (all zeros).
        "replicas": [1, 2], "directories": [uuid_to_str(bytes(16))] * 2, "isr": [2], "removingReplicas": [], "addingReplicas": [],
        "elr": [], "lastKnownElr": [], "leader": 2, "leaderRecoveryState": "RECOVERED", "leaderEpoch": 0,
        "partitionEpoch": 0}


def test_errors_for_missing_paths_and_wrong_kinds(snapshot: Path, run: Run) -> None:
    result = shell("--snapshot", snapshot, "ls", "/x")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "ls: /x: no such node\n")
    result = run("--snapshot", snapshot, "cat", "/image/topics", f"{T}/name", f"{T}/9")
    assert result.returncode == 1
    assert result.stdout == "t\n"
    assert result.stderr == f"cat: /image/topics: is a directory; {T}/9: no such node\n"
    result = run("--snapshot", snapshot, "cd", f"{T}/0")
    assert (result.returncode, result.stderr) == (1, f"cd: {T}/0: not a directory\n")
    result = run("--snapshot", snapshot, "frobnicate")
    assert (result.returncode, result.stderr) == (1, "frobnicate: unknown command; type help for the list\n")


def test_globs(snapshot: Path, run: Run) -> None:
    assert [r["leader"] for r in part(run("--snapshot", snapshot, "cat", "/image/topics/byName/*/0"))] == [2, 1]
    assert lines(run("--snapshot", snapshot, "ls", "/image/topics/byName/*")) == [
        "/image/topics/byName/other:", "0", "id", "name", "", "/image/topics/byName/t:", "0", "1", "id", "name"]


def test_missing_or_damaged_snapshot(tmp_path: Path, snapshot: Path, run: Run) -> None:
    result = run("--snapshot", tmp_path / "none.checkpoint", "ls")
    assert result.returncode == 1 and "none.checkpoint: no such snapshot" in result.stderr
    snapshot.write_bytes(snapshot.read_bytes()[:-20])
    result = run("--snapshot", snapshot, "ls")
    assert result.returncode == 1 and "error:" in result.stderr and str(snapshot) in result.stderr


# --- from a log directory ---------------------------------------------------------------------------

@pytest.mark.parametrize("nested", [False, True], ids=["metadata.log.dir", "partition dir"])
def test_log_dir_is_the_newest_snapshot_then_the_log(log_dir: Path, nested: bool, run: Run) -> None:
    where = log_dir / PARTITION_DIR if nested else log_dir
    result = shell("--directory", where, "ls", "/image/topics/byName")
    assert result.stdout.splitlines() == ["late", "t"]
    assert result.stderr == ""
    assert lines(run("--directory", where, "cat", "/image/producerIds/nextProducerId")) == ["1000"]
    t0, late0 = part(run("--directory", where, "cat", f"{T}/0", "/image/topics/byName/late/0"))
    assert (t0["leader"], t0["isr"], t0["leaderEpoch"], late0["leader"]) == (2, [2], 1, 1)
    # Only the snapshot has this config: the snapshot was loaded, not the log prefix.
    assert lines(run("--directory", where, "cat", "/image/configs/TOPIC:t/retention.ms")) == ["1000"]
    assert lines(run("--directory", where, "cat", "/image/provenance")) == [f"offset 10, epoch {EPOCH}"]
    assert lines(run("--directory", where, "find", f"{BROKERS}/1")) == [f"{BROKERS}/1"]


def test_corrupt_segment_names_the_file_and_byte(log_dir: Path, run: Run) -> None:
    segment = log_dir / PARTITION_DIR / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[70] ^= 0x01  # inside the first batch's records, under its CRC
    segment.write_bytes(bytes(data))
    result = run("--directory", log_dir, "ls")
    assert result.returncode == 1
    assert result.stderr == f"error: {segment}: corrupt data at byte 0: CRC-32C mismatch\n"


def test_formatted_directory_that_never_ran_shows_the_bootstrap(tmp_path: Path, run: Run) -> None:
    write_bootstrap(tmp_path, bootstrap_records("3.6"))
    assert lines(run("--directory", tmp_path, "cat", "/image/features/metadataVersion")) == ["3.6-IV2"]
    assert lines(run("--snapshot", tmp_path / "bootstrap.checkpoint", "ls", "/image/features")) == [
        "metadataVersion", "zkMigrationState"]


def test_not_a_directory(tmp_path: Path, run: Run) -> None:
    result = run("--directory", tmp_path / "nope", "ls")
    assert (result.returncode, result.stderr) == (1, f"error: {tmp_path / 'nope'}: no such directory\n")


# --- interactive ----------------------------------------------------------------------------------

def test_interactive_through_a_pipe(log_dir: Path) -> None:
    commands = ["cd /image/topics/byName/t", "pwd", "ls", "cat name id", "ls /nowhere", "cd ../..",
                "pwd", "history 3", "exit", "pwd"]
    result = shell("--directory", log_dir, stdin="\n".join(commands) + "\n")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        T, "0", "id", "name", "t", uuid_to_str(T_ID), "/image/topics",
        "    6  cd ../..", "    7  pwd", "    8  history 3"]
    assert result.stderr.splitlines()[-1] == "ls: /nowhere: no such node"


def test_interactive_ends_at_end_of_input(snapshot: Path) -> None:
    result = shell("--snapshot", snapshot, stdin="ls /image/features\nhelp\nman cat\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[:2] == ["metadataVersion", "zkMigrationState"]
    assert {"find", "tree"} <= {line.split()[0] for line in out if line.startswith("  ")}
    assert out[-2:] == ["usage: cat PATH...", "  Show the contents of metadata nodes."]


def test_completions() -> None:
    root = {"topics": {"t": {"0": {"leader": "1"}}, "two": {}}, "topicIds": {}}
    sh = Shell(root, io.StringIO(), io.StringIO())
    assert completions(sh, "", "c") == ["cat ", "cd "]
    assert completions(sh, "ls ", "/top") == ["/topicIds/", "/topics/"]
    assert completions(sh, "cat ", "/topics/t/0/") == ["/topics/t/0/leader "]
    sh.cwd = ["topics"]
    assert completions(sh, "cd ", "t") == ["t/", "two/"]
    assert completions(sh, "cd ", "missing/") == []


# --- from a live controller -------------------------------------------------------------------------

def register(controller, broker_id: int) -> int:
    request = BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=controller.cluster_id, incarnation_id=random_uuid(),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=29000 + broker_id, security_protocol=0)],
        features=[Feature(name="metadata.version", min_supported_version=7, max_supported_version=25)],
        rack=None, log_dirs=[random_uuid()])
    with KafkaClient(controller.host, controller.port, client_id="test-broker") as client:
        response = client.request(request, 4)
    assert response.error_code == 0
    return response.broker_epoch


def test_live_controller_lists_a_registered_broker(controller, run: Run) -> None:
    epoch = register(controller, 7)
    address = f"{controller.host}:{controller.port}"
    assert lines(shell("--controllers", address, "ls", BROKERS)) == ["7"]
    (registration,) = part(run("--controllers", address, "cat", f"{BROKERS}/7"))
    assert (registration["epoch"], registration["fenced"]) == (epoch, True)
    assert lines(run("--controllers", f"1@{address}", "cat", "/image/features/metadataVersion")) == ["4.0-IV3"]
    assert lines(run("--controllers", address, "ls", "/image/cluster/controllers")) in ([], [str(EMBEDDED_NODE_ID)])


@pytest.mark.controller_properties({"metadata.log.segment.bytes": "4096"})
def test_live_controller_behind_a_snapshot_is_read_with_fetch_snapshot(controller, run: Run) -> None:
    # Enough registrations to roll a segment; a snapshot then lets the controller delete the
    # first one, so a fetch from offset 0 is sent to the snapshot.
    epochs = {broker_id: register(controller, broker_id) for broker_id in range(1, 40)}
    os.kill(controller.pid, signal.SIGUSR1)
    first = controller.data_dir / PARTITION_DIR / "00000000000000000000.log"
    poll(lambda: not first.exists(), 10, message="the first segment to be deleted after the snapshot")
    last = register(controller, 99)
    address = f"{controller.host}:{controller.port}"
    assert lines(shell("--controllers", address, "ls", BROKERS)) == [*map(str, epochs), "99"]
    assert [r["epoch"] for r in part(run("--controllers", address, "cat", f"{BROKERS}/1", f"{BROKERS}/99"))] == [
        epochs[1], last]


def test_unreachable_controller(tmp_path: Path, run: Run) -> None:
    port = free_port()
    result = shell("--controllers", f"127.0.0.1:{port}", "ls")
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: could not read the metadata log: no active controller answered: "
                                    f"127.0.0.1:{port}: ")
    result = run("--controllers", "nonsense", "ls")
    assert (result.returncode, result.stderr) == (1, "error: --controllers: 'nonsense' is not HOST:PORT\n")


def test_ls_long_and_cat_of_a_multi_line_value() -> None:
    root = {"topics": {"t": {"0": {"leader": "1"}, "id": "abc"}}, "note": "two\nlines"}
    out = io.StringIO()
    sh = Shell(root, out, io.StringIO())
    assert sh.run_line("ls -l /topics/t") and sh.run_line("ls -l /note")
    assert out.getvalue().splitlines() == ["d        1  0", "-        3  id", "-        9  note"]
    out.truncate(0), out.seek(0)
    assert sh.run_line("cat /note /topics/t/id")
    assert out.getvalue().splitlines() == ["two", "lines", "abc"]


def test_refresh_without_a_source_is_an_error() -> None:
    err = io.StringIO()
    sh = Shell({}, io.StringIO(), err)
    assert not sh.run_line("refresh")
    assert err.getvalue() == "refresh: this shell has no source to read again\n"


def test_refresh_follows_a_live_controller(controller) -> None:
    """The interactive shell on --controllers sees a broker registered after it started once
    told to refresh, and stays in its directory."""
    address = f"{controller.host}:{controller.port}"
    proc = subprocess.Popen([sys.executable, "-m", "tools.metadata_shell", "--controllers", address],
                            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"ls {BROKERS}\ncat /image/provenance\n")
        proc.stdin.flush()
        before = int(proc.stdout.readline().split()[1].rstrip(","))
        register(controller, 5)
        out, err = proc.communicate(f"cd {BROKERS}\nrefresh\npwd\nls\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    refreshed, pwd, listed = out.splitlines()
    after = int(refreshed.split()[4])
    assert refreshed == f"read up to offset {after} (was {before})" and after > before
    assert (pwd, listed) == (BROKERS, "5")
