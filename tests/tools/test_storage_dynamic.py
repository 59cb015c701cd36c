"""`tools.storage format` for a dynamic quorum (KIP-853), as Kafka's Formatter: --standalone,
--initial-controllers, --no-initial-controllers and --feature kraft.version, with its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.generated.metadata.voters_record import VotersRecord
from protocol.primitives import random_uuid, uuid_to_str
from server.metalog.meta_properties import read_meta_properties
from server.metalog.snapshot_file import read_snapshot_file
from tools.storage.__main__ import main

CLUSTER = uuid_to_str(random_uuid())


def config(tmp_path: Path, node_id: int, dynamic: bool = True) -> Path:
    path = tmp_path / f"c{node_id}.properties"
    quorum = "controller.quorum.bootstrap.servers=127.0.0.1:19091" if dynamic else \
        f"controller.quorum.voters={node_id}@127.0.0.1:1909{node_id}"
    path.write_text(f"process.roles=controller\nnode.id={node_id}\n{quorum}\n"
                    f"listeners=CONTROLLER://127.0.0.1:1909{node_id}\ncontroller.listener.names=CONTROLLER\n"
                    f"metadata.log.dir={tmp_path / f'd{node_id}'}\n")
    return path


def bootstrap_snapshot(tmp_path: Path, node_id: int) -> list[object]:
    path = tmp_path / f"d{node_id}" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    return [record for record, _ in read_snapshot_file(path)]


def test_initial_controllers_give_every_node_the_same_voters_and_its_own_directory(tmp_path: Path) -> None:
    directories = {n: uuid_to_str(random_uuid()) for n in (1, 2, 3)}
    voters = ",".join(f"{n}@127.0.0.1:1909{n}:{d}" for n, d in directories.items())
    for n in (1, 2, 3):
        assert main(["format", "-t", CLUSTER, "-c", str(config(tmp_path, n)), "--initial-controllers", voters]) == 0
        assert read_meta_properties(tmp_path / f"d{n}").directory_id == directories[n]
        records = bootstrap_snapshot(tmp_path, n)
        assert isinstance(records[0], KRaftVersionRecord) and records[0].k_raft_version == 1
        assert isinstance(records[1], VotersRecord)
        assert [(v.voter_id, uuid_to_str(v.voter_directory_id), v.endpoints[0].port) for v in records[1].voters] \
            == [(m, directories[m], 19090 + m) for m in (1, 2, 3)]


def test_no_initial_controllers_writes_no_voters(tmp_path: Path) -> None:
    assert main(["format", "-t", CLUSTER, "-c", str(config(tmp_path, 2)), "--no-initial-controllers"]) == 0
    assert not (tmp_path / "d2" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").exists()
    assert read_meta_properties(tmp_path / "d2").directory_id is not None


@pytest.mark.parametrize("args, words", [
    (["--initial-controllers", "2@127.0.0.1:19092:AAAAAAAAAAAAAAAAAAAAAQ"], "node 1 is not in --initial-controllers"),
    (["--initial-controllers", "1@127.0.0.1:19091"], "expected id@host:port:directory-id"),
    (["--standalone", "--feature", "kraft.version=0"], "cannot set kraft.version to 0 if KIP-853"),
    ([], "one of --standalone, --initial-controllers or --no-initial-controllers is required"),
])
def test_refusals_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                   words: str) -> None:
    assert main(["format", "-t", CLUSTER, "-c", str(config(tmp_path, 1)), *args]) == 1
    assert words in capsys.readouterr().err
    assert not (tmp_path / "d1" / "meta.properties").exists()


def test_a_static_quorum_refuses_the_dynamic_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["format", "-t", CLUSTER, "-c", str(config(tmp_path, 1, dynamic=False)), "--standalone"]) == 1
    assert "remove controller.quorum.voters" in capsys.readouterr().err
    assert main(["format", "-t", CLUSTER, "-c", str(config(tmp_path, 1, dynamic=False)),
                 "--feature", "kraft.version=1"]) == 1
    assert "cannot set kraft.version to 1 unless KIP-853" in capsys.readouterr().err
