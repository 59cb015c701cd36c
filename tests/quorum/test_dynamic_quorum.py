"""A dynamic quorum (KIP-853) driven as a Kafka operator does it: format one controller with
--standalone and two with --no-initial-controllers, start them, add the two with
tools.metadata_quorum add-controller while the active controller goes on writing (its periodic
NoOp records), then remove the leader with remove-controller: the quorum has a new leader
whose log goes on from where the old one's was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.processes import MAX_LIFETIME_S
from tools.controller_process import ROOT
from tools.processes import bounded_child, free_port, poll

WAIT_S = 120


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=WAIT_S)


def status(port: int) -> dict[str, str]:
    done = tool("tools.metadata_quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe", "--status")
    assert done.returncode == 0, done.stderr
    return dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)


def high_watermark(port: int) -> int:
    return int(status(port)["HighWatermark"])


def test_standalone_then_add_two_controllers_then_remove_the_leader(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    configs = []
    for n, port in enumerate(ports, start=1):
        path = tmp_path / f"c{n}.properties"
        path.write_text("\n".join([
            "process.roles=controller", f"node.id={n}",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{ports[0]}",
            f"listeners=CONTROLLER://127.0.0.1:{port}", "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT", f"metadata.log.dir={tmp_path / f'd{n}'}",
            "metadata.max.idle.interval.ms=200", ""]))
        configs.append(path)
    cluster = tool("tools.storage", "random-uuid").stdout.strip()
    first = tool("tools.storage", "format", "--standalone", "-t", cluster, "-c", str(configs[0]))
    assert first.returncode == 0, first.stderr
    for path in configs[1:]:
        done = tool("tools.storage", "format", "--no-initial-controllers", "-t", cluster, "-c", str(path))
        assert done.returncode == 0, done.stderr
    processes = [subprocess.Popen([sys.executable, "-m", "server", "--config", str(path)], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"log{n}", "w"),
                                  preexec_fn=bounded_child(MAX_LIFETIME_S))
                 for n, path in enumerate(configs, start=1)]
    try:
        poll(lambda: tool(
            "tools.metadata_quorum", "--bootstrap-controller", f"127.0.0.1:{ports[0]}", "describe",
            "--status").returncode == 0, WAIT_S, interval=0.2, message="the standalone controller leads")
        marks = [high_watermark(ports[0])]
        for n, path in enumerate(configs[1:], start=2):
            # A controller that has not caught up yet is refused (REQUEST_TIMED_OUT): asked again.
            added = poll(lambda path=path: tool(
                "tools.metadata_quorum", "--bootstrap-controller", f"127.0.0.1:{ports[0]}",
                "--command-config", str(path), "add-controller").returncode == 0,
                WAIT_S, interval=0.2, message=f"controller {n} added")
            assert added
            marks.append(poll(lambda: (hw := high_watermark(ports[0])) > marks[-1] and hw,
                              WAIT_S, interval=0.2, message="writes go on"))
        voters = json.loads(status(ports[0])["CurrentVoters"])
        assert sorted(v["id"] for v in voters) == [1, 2, 3]
        assert all(v["directoryId"] for v in voters)
        directory = next(v["directoryId"] for v in voters if v["id"] == 1)
        removed = tool("tools.metadata_quorum", "--bootstrap-controller", f"127.0.0.1:{ports[0]}",
                       "remove-controller", "--controller-id", "1", "--controller-directory-id", directory)
        assert removed.returncode == 0, removed.stderr
        assert "Removed KRaft controller 1" in removed.stdout
        leader = poll(lambda: (s := status(ports[1])) and s["LeaderId"].strip() in ("2", "3") and s,
                      WAIT_S, interval=0.2, message="a new leader among 2 and 3")
        assert isinstance(leader, dict)
        assert sorted(v["id"] for v in json.loads(leader["CurrentVoters"])) == [2, 3]
        new_port = ports[int(leader["LeaderId"]) - 1]
        poll(lambda: high_watermark(new_port) > marks[-1], WAIT_S, interval=0.2,
             message="the new leader commits past the old one's writes")
    finally:
        for process in processes:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def test_a_static_quorum_upgrades_to_kraft_version_1_with_update_features(tmp_path: Path) -> None:
    """Kafka 4.1's `kafka-features upgrade --feature kraft.version=1`: the voters' directory ids
    (which they tell the leader at start-up) become the first VotersRecord."""
    from protocol.client import KafkaClient
    from protocol.generated.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
    from tools.controller_process import QuorumProcesses

    quorum = QuorumProcesses(tmp_path / "quorum", 3, {"controller.quorum.election.timeout.ms": "300",
                                                       "controller.quorum.fetch.timeout.ms": "600"}).start()
    try:
        leader = quorum.members[quorum.wait_for_leader(timeout=60)]

        def upgrade() -> object:
            with KafkaClient(leader.host, leader.port, client_id="test", timeout=60) as client:
                response = client.request(UpdateFeaturesRequest(timeout_ms=60_000, feature_updates=[
                    FeatureUpdateKey(feature="kraft.version", max_version_level=1, upgrade_type=1)]), 1)
            result = getattr(response, "results")[0]
            return result.error_code == 0 or result.error_message

        # Refused (naming the voter) until every voter has told the leader its directory id.
        poll(lambda: upgrade() is True, WAIT_S, interval=0.2, message="kraft.version upgraded")
        def voters() -> list[dict[str, object]]:
            return list(json.loads(status(leader.port)["CurrentVoters"]))

        poll(lambda: all(v["directoryId"] for v in voters()), WAIT_S, interval=0.2,
             message="voters with directory ids")
        assert sorted(int(str(v["id"])) for v in voters()) == sorted(quorum.members)
    finally:
        quorum.stop()


def test_a_standalone_quorum_changes_after_its_first_leader_is_gone(tmp_path: Path) -> None:
    """The --standalone controller's bootstrap checkpoint (kraft.version 1 and its voter set) is
    copied into the log by its first leader: controllers that joined later lead with
    kraft.version 1, remove the first controller, refuse its removal again as Kafka does
    (VOTER_NOT_FOUND), add a new controller, and report kraft.version in ApiVersions."""
    from protocol.client import KafkaClient
    from protocol.generated.messages.api_versions_request import ApiVersionsRequest
    from tests.support.quorum import DYNAMIC, ControllerQuorum
    from tools.controller_process import ControllerProcess

    quorum = ControllerQuorum(DYNAMIC, tmp_path).start()
    joiner = None
    try:
        first = quorum.members[3000]
        directory = next(v["directoryId"] for v in json.loads(quorum.status()["CurrentVoters"]) if v["id"] == 3000)
        removal = ("--bootstrap-controller", quorum.bootstrap, "remove-controller", "--controller-id", "3000",
                   "--controller-directory-id", directory)
        removed = tool("tools.metadata_quorum", *removal)
        assert removed.returncode == 0, removed.stderr
        first.stop()
        others = ",".join(f"127.0.0.1:{quorum.ports[n]}" for n in (3001, 3002))
        leader = poll(lambda: (s := status_of(others)) and s.get("LeaderId", "").strip() in ("3001", "3002") and s,
                      WAIT_S, interval=0.2, message="a leader among the controllers that joined")
        assert isinstance(leader, dict)

        again = tool("tools.metadata_quorum", *removal[:1], others, *removal[2:])
        assert again.returncode != 0 and "VOTER_NOT_FOUND" in again.stderr, again.stderr

        # The new leader reports the finalized kraft.version, as Kafka's ControllerServer does.
        leader_port = quorum.ports[int(leader["LeaderId"])]
        with KafkaClient("127.0.0.1", leader_port, client_id="test", timeout=30) as client:
            versions = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        finalized = {f.name: f.max_version_level for f in versions.finalized_features}
        assert finalized.get("kraft.version") == 1 and "metadata.version" in finalized

        port = free_port()
        joiner = ControllerProcess(tmp_path / "controller-3003", {
            "node.id": "3003", "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "controller.quorum.bootstrap.servers": others}, port=port, cluster_id=quorum.cluster_id,
            dynamic="observer").start()
        assert joiner.config_path is not None
        poll(lambda: tool("tools.metadata_quorum", "--bootstrap-controller", others, "--command-config",
                          str(joiner.config_path), "add-controller").returncode == 0,
             WAIT_S, interval=0.5, message="controller 3003 added")
        voters = json.loads(status_of(others)["CurrentVoters"])
        assert sorted(v["id"] for v in voters) == [3001, 3002, 3003]
    finally:
        if joiner is not None:
            joiner.stop()
        quorum.stop()


def status_of(bootstrap: str) -> dict[str, str]:
    done = tool("tools.metadata_quorum", "--bootstrap-controller", bootstrap, "describe", "--status")
    return dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line) if done.returncode == 0 else {}
