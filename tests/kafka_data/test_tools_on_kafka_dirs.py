"""dump_log and the metadata shell read every real Kafka directory: segments, snapshots,
bootstrap.checkpoint, control records included."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.generated.metadata.metadata_record_type import MetadataRecordType
from protocol.primitives import uuid_to_str
from server.image.files import open_directory, open_snapshot
from tests.support.kafka_data import metadata_files, read_directory
from tests.support.shared_data import metadata_dir_params
from tools.controller_process import ROOT
from tools.dump_log import Options, dump_file
from tools.metadata_shell.shell import Shell
from tools.metadata_shell.tree import build_tree


@pytest.mark.parametrize("directory", metadata_dir_params())
def test_dump_log_decodes_every_record(directory: Path) -> None:
    for path in metadata_files(directory):
        out, err = io.StringIO(), io.StringIO()
        assert dump_file(path, Options(json=True), out, err), err.getvalue()
        records = [json.loads(line) for line in out.getvalue().splitlines()]
        assert records and all("payload" in r for r in records), path.name
        kinds = {r["payload"]["type"] for r in records if r["batch"]["isControl"]}
        if path.suffix == ".checkpoint":
            assert {"SnapshotHeader", "SnapshotFooter"} <= kinds
        # Kafka's names: the record type enum's, and camelCase fields all the way down.
        data = [r["payload"] for r in records if not r["batch"]["isControl"]]
        assert {d["type"] for d in data} <= {t.name for t in MetadataRecordType}
        assert all(camel_case(d["data"]) for d in data), path.name


def camel_case(value: object) -> bool:
    if isinstance(value, dict):
        return all(k[:1].islower() and "_" not in k and camel_case(v) for k, v in value.items())
    if isinstance(value, list):
        return all(camel_case(v) for v in value)
    return True


@pytest.mark.parametrize("directory", metadata_dir_params())
def test_dump_log_topics_read_by_jq_as_from_kafka(directory: Path) -> None:
    """kafka-dump-log.sh's command line over Kafka's own files, its payloads read by jq: the
    topics and their ids are the ones the files hold (read by the independent reader)."""
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    logs = sorted((directory / "__cluster_metadata-0").glob("*.log"))
    if not logs:
        pytest.skip("no log segment")
    result = subprocess.run(
        [sys.executable, "-m", "tools.dump_log", "--cluster-metadata-decoder", "--skip-record-metadata",
         "--files", ",".join(map(str, logs))], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    payloads = "\n".join(line.split("payload: ", 1)[1] for line in result.stdout.splitlines()
                         if line.startswith(" payload: "))
    removed = subprocess.run(["jq", "-r", 'select(.type == "REMOVE_TOPIC_RECORD") | .data.topicId'],
                             input=payloads, capture_output=True, text=True, timeout=120, check=True)
    created = subprocess.run(["jq", "-r", 'select(.type == "TOPIC_RECORD") | "\\(.data.name) \\(.data.topicId)"'],
                             input=payloads, capture_output=True, text=True, timeout=120, check=True)
    gone = set(removed.stdout.split())
    live = {name: tid for name, tid in (line.split() for line in created.stdout.splitlines()) if tid not in gone}
    expected = read_directory(directory)
    snapshot_only = {n for n in expected.topics if n not in live}
    # Topics a snapshot holds before the oldest segment begins are not in the segments.
    assert {n: uuid_to_str(t) for n, t in expected.topics.items() if n not in snapshot_only} == live


def run(shell: Shell, line: str) -> list[str]:
    out = io.StringIO()
    shell.out = out
    assert shell.run_line(line), line
    return out.getvalue().splitlines()


@pytest.mark.parametrize("directory", metadata_dir_params())
def test_shell_opens_the_directory(directory: Path) -> None:
    image = open_directory(directory)
    expected = read_directory(directory)
    shell = Shell(build_tree(image), io.StringIO(), io.StringIO())
    # The shell lists names in natural order (2 before 101); compared as sets here.
    assert set(run(shell, "ls /image/topics/byName")) == set(expected.topics)
    assert set(run(shell, "ls /image/cluster/brokers")) == set(map(str, expected.brokers))
    features = {f"finalized_{name}" for name in expected.features if name != "metadata.version"}
    assert set(run(shell, "ls /image/features")) == features | {"metadataVersion", "zkMigrationState"}
    for name, level in expected.features.items():
        if name != "metadata.version":
            assert run(shell, f"cat /image/features/finalized_{name}") == [str(level)]
    if expected.topics:
        name = min(expected.topics)
        tid = expected.topics[name]
        leader = expected.partitions[(tid, 0)].leader
        assert json.loads(run(shell, f"cat '/image/topics/byName/{name}/0'")[0])["leader"] == leader
        assert run(shell, f"cat /image/topics/byId/{uuid_to_str(tid)}/name") == [name]
    if expected.next_producer_id is not None:
        assert run(shell, "cat /image/producerIds/nextProducerId") == [str(expected.next_producer_id)]
    assert image.leader is not None or not list((directory / "__cluster_metadata-0").glob("*.log"))


@pytest.mark.parametrize("directory", metadata_dir_params())
def test_shell_opens_every_snapshot_and_the_bootstrap(directory: Path) -> None:
    files = sorted((directory / "__cluster_metadata-0").glob("*-*.checkpoint"))
    bootstrap = directory / "bootstrap.checkpoint"
    for path in files + ([bootstrap] if bootstrap.exists() else []):
        image = open_snapshot(path)
        if path == bootstrap:
            assert "metadata.version" in image.features.finalized or not image.features.finalized
        else:
            assert image.next_offset == int(path.name.split("-")[0])
