"""dump_log and the metadata shell read every real Kafka directory: segments, snapshots,
bootstrap.checkpoint, control records included."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from server.image.files import open_directory, open_snapshot
from tests.kafka_data.independent import read_directory
from tests.kafka_data.test_control_records import metadata_files
from tests.shared_data import metadata_dir_params
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
    assert set(run(shell, "ls /topics")) == set(expected.topics)
    assert set(run(shell, "ls /brokers")) == set(map(str, expected.brokers))
    assert set(run(shell, "ls /features")) == set(expected.features)
    for name, level in expected.features.items():
        assert run(shell, f"cat /features/{name}") == [str(level)]
    if expected.topics:
        name = min(expected.topics)
        tid = expected.topics[name]
        leader = expected.partitions[(tid, 0)].leader
        assert run(shell, f"cat '/topics/{name}/0/leader'") == [str(leader)]
    if expected.next_producer_id is not None:
        assert run(shell, "cat /producerIds/nextProducerId") == [str(expected.next_producer_id)]
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
