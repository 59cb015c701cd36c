"""python -m tools.metadata_quorum against a live three-voter quorum, and over SASL_SSL with
--command-config: Kafka's output lines, the active controller found among the addresses given,
and clear one-line errors. The metadata shell and tools.replay send find the active controller
among a quorum's addresses the same way."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from tests.support.certs import Pki, make_pki
from tests.support.processes import BrokerProcess
from tools.controller_process import ROOT, ControllerProcess, QuorumProcesses
from tools.metadata_quorum.__main__ import main
from tools.processes import free_port, poll

TIMING = {"controller.quorum.election.timeout.ms": "300", "controller.quorum.fetch.timeout.ms": "600"}
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QuorumProcesses]:
    q = QuorumProcesses(tmp_path_factory.mktemp("quorum"), 3, TIMING, lifetime_s=180).start()
    try:
        q.wait_for_leader()
        # Both followers have fetched: the replication table has every timestamp.
        poll(lambda: "-1" not in tool("--bootstrap-controller", q.bootstrap, "describe",
                                      "--replication").stdout.split("\n", 1)[1], 20, 0.1, "every voter to fetch")
        yield q
    finally:
        q.stop()


def tool(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    """The tool as a user runs it: its own process, so exit code, stdout and stderr are its own."""
    return subprocess.run([sys.executable, "-m", "tools.metadata_quorum", *map(str, argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def in_process(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> subprocess.CompletedProcess[str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(map(str, argv)), code, out, err)


def test_status_in_kafkas_lines_from_any_voter_listed_first(quorum, capsys):
    leader = quorum.wait_for_leader()
    standby_first = ",".join(f"{m.host}:{m.port}" for n, m in sorted(quorum.members.items(), key=lambda i: i[0] == leader))
    result = in_process(capsys, "--bootstrap-controller", standby_first, "describe", "--status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 8, result.stdout
    cluster_id = quorum.members[leader].cluster_id
    assert lines[0] == f"ClusterId:              {cluster_id}"
    assert lines[1] == f"LeaderId:               {leader}"
    assert re.fullmatch(r"LeaderEpoch:\s+\d+", lines[2]) and lines[2].startswith("LeaderEpoch:            ")
    assert re.fullmatch(r"HighWatermark:\s+-?\d+", lines[3])
    assert re.fullmatch(r"MaxFollowerLag:\s+\d+", lines[4])
    assert re.fullmatch(r"MaxFollowerLagTimeMs:\s+-?\d+", lines[5])
    # Kafka's own test's pattern for the voters, and each voter named with its listener.
    assert re.fullmatch(r'CurrentVoters:\s+\[\{"id":\s+\d+,\s+"directoryId":\s+\S+,\s+"endpoints":\s+\["\S+://\[?\S+]?:\d+",?.*]',
                        lines[6]), lines[6]
    for node, member in quorum.members.items():
        assert f'{{"id": {node}, "directoryId": null, "endpoints": ["CONTROLLER://127.0.0.1:{member.port}"]}}' in lines[6]
    assert lines[7] == "CurrentObservers:       []"


def test_replication_table_as_kafka_prints_it(quorum, capsys):
    leader = quorum.wait_for_leader()
    result = in_process(capsys, "--bootstrap-controller", quorum.bootstrap, "describe", "--replication")
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert re.fullmatch(r"NodeId\s+DirectoryId\s+LogEndOffset\s+Lag\s+LastFetchTimestamp\s+LastCaughtUpTimestamp\s+Status\s+",
                        header)
    assert header.endswith("\t") and header.count("\t") == 7
    row = r"(\d+)\s+AAAAAAAAAAAAAAAAAAAAAA\s+\d+\s+(\d+)\s+-?\d+\s+-?\d+\s+{}\s*"
    assert re.fullmatch(row.format("Leader"), rows[0]) and rows[0].split()[0] == str(leader)
    assert len(rows) == 3 and all(re.fullmatch(row.format("Follower"), r) for r in rows[1:]), rows
    assert rows[0].split()[3] == "0"  # the leader's lag
    human = in_process(capsys, "--bootstrap-controller", quorum.bootstrap, "describe", "--replication",
                       "--human-readable")
    assert all(re.fullmatch(r".*\t\d+ ms ago\s*\t\d+ ms ago\s*\t\w+\s*\t", r) for r in human.stdout.splitlines()[1:]), human.stdout


@pytest.mark.parametrize("argv, words", [
    (["add-controller"], "add-controller needs --command-config"),
    (["remove-controller", "-i", "3001", "-d", "not-a-uuid"], "is not a base64 UUID"),
    (["describe"], "One of --status or --replication must be specified"),
    (["describe", "--status", "--replication"], "Only one of --status or --replication"),
    (["describe", "--status", "--human-readable"], "only supported along with --replication"),
])
def test_what_it_will_not_do_fails_with_one_line(argv, words, capsys):
    result = in_process(capsys, "--bootstrap-controller", "127.0.0.1:1", *argv)
    assert result.returncode == 1 and words in result.stderr and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


def test_unreachable_controllers_are_named_without_a_traceback(tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("default.api.timeout.ms=1000\n")
    dead = f"127.0.0.1:{free_port()}"
    result = tool("--bootstrap-controller", dead, "--command-config", config, "describe", "--status")
    assert result.returncode == 1 and result.stdout == ""
    assert f"no active controller answered: {dead}: Connection refused" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    controller = ControllerProcess(tmp_path_factory.mktemp("secured"), {
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
        "ssl.keystore.location": str(pki.server), "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": f'{PLAIN} required user_admin="admin-secret";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"}).start()
    try:
        yield controller
    finally:
        controller.stop()


def client_config(path: Path, pki: Pki, password: str) -> Path:
    path.write_text("security.protocol=SASL_SSL\n"
                    f"ssl.truststore.location={pki.ca}\n"
                    "sasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config={PLAIN} required username="admin" password="{password}";\n')
    return path


def test_command_config_logs_in_over_sasl_ssl(secured, pki, tmp_path, capsys):
    address = f"{secured.host}:{secured.port}"
    good = client_config(tmp_path / "good.properties", pki, "admin-secret")
    result = in_process(capsys, "--bootstrap-controller", address, "--command-config", good, "describe", "--status")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "LeaderId:               3000"
    bad = client_config(tmp_path / "bad.properties", pki, "wrong")
    result = tool("--bootstrap-controller", address, "--command-config", bad, "describe", "--status")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "SASL authentication as 'admin' failed: Authentication failed: Invalid username or password" in result.stderr
    plaintext = in_process(capsys, "--bootstrap-controller", address, "--command-config",
                           _write(tmp_path / "p.properties", "default.api.timeout.ms=2000\n"), "describe", "--status")
    assert plaintext.returncode == 1 and "no active controller answered" in plaintext.stderr


@pytest.mark.parametrize("text, words", [
    ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", "sasl.mechanism: GSSAPI is not supported"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "sasl.jaas.config: is required"),
    ("security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\n", "ssl.truststore.location: cannot be used"),
    ("security.protocol=TLS\n", "security.protocol: expected one of"),
])
def test_bad_command_config_names_the_key(text, words, tmp_path, capsys):
    result = in_process(capsys, "--bootstrap-controller", "127.0.0.1:1", "--command-config",
                        _write(tmp_path / "c.properties", text), "describe", "--status")
    assert result.returncode == 1 and words in result.stderr, result.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- the other tools that talk to a controller take a quorum's addresses ------------------------

def standby_first(quorum: QuorumProcesses) -> str:
    leader = quorum.wait_for_leader()
    return ",".join(f"{m.host}:{m.port}" for _, m in sorted(quorum.members.items(), key=lambda i: i[0] == leader))


def test_the_metadata_shell_reads_from_the_active_controller(quorum):
    # A standby answers an observer's Fetch with NOT_LEADER_OR_FOLLOWER: the log read here came
    # from the leader, found from the standby named first.
    quorum.wait_for_leader()
    result = subprocess.run([sys.executable, "-m", "tools.metadata_shell", "--controllers", standby_first(quorum),
                             "cat", "/image/features/metadataVersion"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().split("-")[0].count(".") == 1, result.stdout  # a release, as 4.0-IV3


def test_replay_send_goes_to_the_active_controller(quorum, tmp_path):
    # A capture of a CreateTopics a lone controller without brokers refused (INVALID_REPLICATION_FACTOR);
    # a standby would answer NOT_CONTROLLER instead, which would show as a difference.
    capture = tmp_path / "one.pcapng"
    lone = ControllerProcess(tmp_path / "lone", server_args=["--capture-file", str(capture)]).start()
    try:
        with KafkaClient(lone.host, lone.port, client_id="capture") as client:
            answer = client.request(CreateTopicsRequest(topics=[CreatableTopic(
                name="t", num_partitions=1, replication_factor=-1)], timeout_ms=5000), 7)
        assert answer.topics[0].error_code == Error.INVALID_REPLICATION_FACTOR
    finally:
        assert lone.stop() == 0
    result = subprocess.run([sys.executable, "-m", "tools.replay", "send", str(capture), "--target",
                             standby_first(quorum), "--clean"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.match(r"1 flows, 1 requests sent, 1 answers compared, 0 differences", result.stdout), result.stdout
    dead = ",".join(f"127.0.0.1:{free_port()}" for _ in range(2))
    result = subprocess.run([sys.executable, "-m", "tools.replay", "send", str(capture), "--target", dead,
                             "--timeout", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "no active controller answered" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bootstrap_server_asks_through_a_test_broker(tmp_path, capsys):
    controller = ControllerProcess(tmp_path / "controller").start()
    port = free_port()
    broker = BrokerProcess(tmp_path / "broker", ["--controller", f"{controller.host}:{controller.port}", "--node-id",
                                                 "1", "--port", str(port), "--state-dir", str(tmp_path / "state")])
    broker.start()
    try:
        broker.wait_for_state(1, "ACTIVE", timeout=30)
        result = in_process(capsys, "--bootstrap-server", f"127.0.0.1:{port}", "describe", "--status")
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == f"ClusterId:              {controller.cluster_id}"
        assert lines[1] == "LeaderId:               3000"
        # The broker fetches the metadata as an observer.
        assert lines[7] == 'CurrentObservers:       [{"id": 1, "directoryId": null}]'
    finally:
        broker.kill9()
        controller.stop()
