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
from server.metalog.committer import encode_records
from server.metalog.segments import PARTITION_DIR, MetadataLog
from server.metalog.snapshot_file import write_snapshot_file
from server.metalog.snapshots import SnapshotId
from tests.conftest import free_port, poll
from tools.metadata_shell.__main__ import main
from tools.metadata_shell.interactive import completions
from tools.metadata_shell.shell import Shell

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

def test_snapshot_ls_cat_find(snapshot: Path, run: Run) -> None:
    assert lines(shell("--snapshot", snapshot, "ls", "/topics")) == ["other", "t"]
    assert lines(run("--snapshot", snapshot, "ls")) == [
        "acls", "brokers", "clientQuotas", "configs", "controllers", "delegationToken", "features",
        "metadataQuorum", "producerIds", "scram", "topicIds", "topics"]
    assert lines(run("--snapshot", snapshot, "cat", "/topics/t/0/leader")) == ["1"]
    assert lines(run("--snapshot", snapshot, "cat", "/topics/t/0/isr", "/topics/t/1/replicas")) == [
        "/topics/t/0/isr: [1, 2]", "/topics/t/1/replicas: [1, 2]"]
    assert lines(run("--snapshot", snapshot, "find", "/brokers")) == [
        "/brokers", "/brokers/1", *[f"/brokers/1/{n}" for n in sorted(BROKER_NODES)],
        "/brokers/2", *[f"/brokers/2/{n}" for n in sorted(BROKER_NODES)]]
    assert lines(run("--snapshot", snapshot, "cat", "/brokers/1/isFenced", "/brokers/2/isFenced")) == [
        "/brokers/1/isFenced: false", "/brokers/2/isFenced: true"]
    registration = json.loads(lines(run("--snapshot", snapshot, "cat", "/brokers/2/registration"))[0])
    assert registration["listeners"] == [
        {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092, "securityProtocol": 0}]
    assert (registration["epoch"], registration["incarnationId"]) == (12, uuid_to_str(INCARNATION))
    assert lines(run("--snapshot", snapshot, "cat", f"/topicIds/{uuid_to_str(T_ID)}", "/topics/other/id")) == [
        f"/topicIds/{uuid_to_str(T_ID)}: t", f"/topics/other/id: {uuid_to_str(OTHER_ID)}"]
    assert lines(run("--snapshot", snapshot, "cat", "/features/metadata.version")) == [str(metadata_level("3.7"))]
    assert lines(run("--snapshot", snapshot, "cat", "/configs/topic/t/cleanup.policy",
                     "/configs/broker/<default>/min.insync.replicas")) == [
        "/configs/topic/t/cleanup.policy: compact", "/configs/broker/<default>/min.insync.replicas: 2"]
    # A snapshot ending before offset 11 holds everything up to offset 10.
    assert lines(run("--snapshot", snapshot, "cat", "/metadataQuorum/offset")) == ["10"]


BROKER_NODES = ["registration", "isFenced", "inControlledShutdown", "epoch", "incarnationId", "rack"]
PARTITION_NODES = ["leader", "isr", "replicas", "leaderEpoch", "partitionEpoch", "elr", "lastKnownElr",
                   "addingReplicas", "removingReplicas", "leaderRecoveryState"]


def test_partition_nodes(snapshot: Path, run: Run) -> None:
    assert sorted(lines(run("--snapshot", snapshot, "ls", "/topics/t/1"))) == sorted(PARTITION_NODES)
    values = lines(run("--snapshot", snapshot, "cat", *[f"/topics/t/1/{n}" for n in PARTITION_NODES]))
    expected = ["2", "[2]", "[1, 2]", "0", "0", "[]", "[]", "[]", "[]", "RECOVERED"]
    assert values == [f"/topics/t/1/{n}: {v}" for n, v in zip(PARTITION_NODES, expected)]


def test_errors_for_missing_paths_and_wrong_kinds(snapshot: Path, run: Run) -> None:
    result = shell("--snapshot", snapshot, "ls", "/x")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "ls: /x: no such node\n")
    result = run("--snapshot", snapshot, "cat", "/topics", "/topics/t/0/leader", "/topics/t/9")
    assert result.returncode == 1
    assert result.stdout == "1\n"
    assert result.stderr == "cat: /topics: is a directory; /topics/t/9: no such node\n"
    result = run("--snapshot", snapshot, "cd", "/topics/t/0/leader")
    assert (result.returncode, result.stderr) == (1, "cd: /topics/t/0/leader: not a directory\n")
    result = run("--snapshot", snapshot, "frobnicate")
    assert (result.returncode, result.stderr) == (1, "frobnicate: unknown command; type help for the list\n")


def test_globs(snapshot: Path, run: Run) -> None:
    assert lines(run("--snapshot", snapshot, "cat", "/topics/*/0/leader")) == [
        "/topics/other/0/leader: 2", "/topics/t/0/leader: 1"]
    assert lines(run("--snapshot", snapshot, "ls", "/topics/t/[0-9]")) == [
        "/topics/t/0:", *sorted(PARTITION_NODES), "", "/topics/t/1:", *sorted(PARTITION_NODES)]


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
    result = shell("--directory", where, "ls", "/topics")
    assert result.stdout.splitlines() == ["late", "t"]
    assert result.stderr == ""
    assert lines(run("--directory", where, "cat", "/producerIds/nextProducerId")) == ["1000"]
    assert lines(run("--directory", where, "cat", "/topics/t/0/leader", "/topics/t/0/isr",
                     "/topics/t/0/leaderEpoch", "/topics/late/0/leader")) == [
        "/topics/t/0/leader: 2", "/topics/t/0/isr: [2]", "/topics/t/0/leaderEpoch: 1", "/topics/late/0/leader: 1"]
    # Only the snapshot has this config: the snapshot was loaded, not the log prefix.
    assert lines(run("--directory", where, "cat", "/configs/topic/t/retention.ms")) == ["1000"]
    assert lines(run("--directory", where, "cat", "/metadataQuorum/offset")) == ["10"]
    assert json.loads(lines(run("--directory", where, "cat", "/metadataQuorum/leader"))[0]) == {
        "leaderId": 1, "epoch": EPOCH}
    assert lines(run("--directory", where, "find", "/brokers/1")) == [
        "/brokers/1", *[f"/brokers/1/{n}" for n in sorted(BROKER_NODES)]]


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
    assert lines(run("--directory", tmp_path, "cat", "/features/metadata.version")) == [
        str(metadata_level("3.6"))]
    assert lines(run("--snapshot", tmp_path / "bootstrap.checkpoint", "ls", "/features")) == ["metadata.version"]


def test_not_a_directory(tmp_path: Path, run: Run) -> None:
    result = run("--directory", tmp_path / "nope", "ls")
    assert (result.returncode, result.stderr) == (1, f"error: {tmp_path / 'nope'}: no such directory\n")


# --- interactive ----------------------------------------------------------------------------------

def test_interactive_through_a_pipe(log_dir: Path) -> None:
    commands = ["cd /topics/t", "pwd", "ls", "cd 0", "cat leader isr", "ls /nowhere", "cd ../..",
                "pwd", "history 3", "exit", "pwd"]
    result = shell("--directory", log_dir, stdin="\n".join(commands) + "\n")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "/topics/t", "0", "id", "name", "/topics/t/0/leader: 2", "/topics/t/0/isr: [2]", "/topics",
        "    7  cd ../..", "    8  pwd", "    9  history 3"]
    assert result.stderr.splitlines()[-1] == "ls: /nowhere: no such node"


def test_interactive_ends_at_end_of_input(snapshot: Path) -> None:
    result = shell("--snapshot", snapshot, stdin="ls /features\nhelp\nman cat\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0] == "metadata.version"
    assert any(line.split()[:1] == ["find"] for line in out)
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
    assert lines(shell("--controllers", address, "ls", "/brokers")) == ["7"]
    assert lines(run("--controllers", address, "cat", "/brokers/7/epoch", "/brokers/7/isFenced")) == [
        f"/brokers/7/epoch: {epoch}", "/brokers/7/isFenced: true"]
    assert lines(run("--controllers", f"1@{address}", "cat", "/features/metadata.version")) == ["25"]
    leader = json.loads(lines(run("--controllers", address, "cat", "/metadataQuorum/leader"))[0])
    assert leader["leaderId"] == EMBEDDED_NODE_ID


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
    assert lines(shell("--controllers", address, "ls", "/brokers")) == [*map(str, epochs), "99"]
    assert lines(run("--controllers", address, "cat", "/brokers/1/epoch", "/brokers/99/epoch")) == [
        f"/brokers/1/epoch: {epochs[1]}", f"/brokers/99/epoch: {last}"]


def test_unreachable_controller(tmp_path: Path, run: Run) -> None:
    port = free_port()
    result = shell("--controllers", f"127.0.0.1:{port}", "ls")
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: could not read the metadata log: 127.0.0.1:{port}: ")
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
    assert out.getvalue().splitlines() == ["/note:", "two", "lines", "/topics/t/id: abc"]


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
        proc.stdin.write("ls /brokers\ncat /metadataQuorum/offset\n")
        proc.stdin.flush()
        before = int(proc.stdout.readline())
        register(controller, 5)
        out, err = proc.communicate("cd /brokers\nrefresh\npwd\nls\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    refreshed, pwd, listed = out.splitlines()
    after = int(refreshed.split()[4])
    assert refreshed == f"read up to offset {after} (was {before})" and after > before
    assert (pwd, listed) == ("/brokers", "5")
