"""python -m tools.storage, run as a real subprocess against real directories."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.primitives import uuid_from_str
from protocol.records import read_batch_header
from server.config import embedded_config, load_config
from server.metalog.bootstrap import (
    BOOTSTRAP_CHECKPOINT, DEFAULT_RELEASE, RELEASE_VERSIONS, metadata_level, read_bootstrap,
    write_bootstrap)
from server.metalog.meta_properties import StorageError, check_log_dirs, read_meta_properties
from tools.storage import format_dirs

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "3Db5QLSqSZieL3rJBUUegA"


def storage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.storage", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "controller.properties"
    path.write_text("process.roles=controller\n"
                    "node.id=1\n"
                    "controller.quorum.voters=1@127.0.0.1:9093\n"
                    "listeners=CONTROLLER://127.0.0.1:9093\n"
                    "controller.listener.names=CONTROLLER\n"
                    f"metadata.log.dir={tmp_path / 'meta'}\n"
                    f"log.dirs={tmp_path / 'data'}\n")
    return path


def test_random_uuid_prints_a_new_cluster_id() -> None:
    first, second = storage("random-uuid"), storage("random-uuid")
    assert first.returncode == 0 and second.returncode == 0
    ids = [first.stdout.strip(), second.stdout.strip()]
    assert all(len(i) == 22 and len(uuid_from_str(i)) == 16 for i in ids)
    assert ids[0] != ids[1]


def test_format_then_info(tmp_path: Path, config_file: Path) -> None:
    result = storage("format", "--config", str(config_file), "--cluster-id", CLUSTER,
                     "--release-version", "3.7")
    assert result.returncode == 0, result.stderr
    meta_dir, data_dir = tmp_path / "meta", tmp_path / "data"
    for d in (meta_dir, data_dir):
        meta = read_meta_properties(d)
        assert (meta.cluster_id, meta.node_id, meta.version) == (CLUSTER, 1, 1)
    assert check_log_dirs(load_config(config_file)) == CLUSTER
    assert not (data_dir / BOOTSTRAP_CHECKPOINT).exists()
    records = read_bootstrap(meta_dir)
    assert records == [(FeatureLevelRecord(name="metadata.version", feature_level=19), 0)]

    info = storage("info", "--config", str(config_file))
    assert info.returncode == 0, info.stderr
    assert f"{meta_dir} (metadata log): formatted" in info.stdout
    assert f"{data_dir}: formatted" in info.stdout
    assert f"cluster.id={CLUSTER}" in info.stdout
    assert "metadata.version=19 (3.7-IV4)" in info.stdout


def test_info_lists_unformatted_dirs(tmp_path: Path, config_file: Path) -> None:
    """As kafka-storage.sh info: an unformatted directory is a problem found, exit 1."""
    info = storage("info", "--config", str(config_file))
    assert info.returncode == 1, info.stderr
    assert f"{tmp_path / 'meta'} (metadata log): not formatted" in info.stdout
    assert "2 of 2 directories are not formatted" in info.stdout


def test_format_refuses_formatted_dirs(tmp_path: Path, config_file: Path) -> None:
    meta_dir, data_dir = tmp_path / "meta", tmp_path / "data"
    assert storage("format", "-c", str(config_file), "-t", CLUSTER).returncode == 0
    before = (meta_dir / "meta.properties").read_bytes()
    (data_dir / "meta.properties").unlink()

    refused = storage("format", "--config", str(config_file), "--cluster-id", CLUSTER)
    assert refused.returncode == 1
    assert str(meta_dir) in refused.stderr and "already formatted" in refused.stderr
    assert not (data_dir / "meta.properties").exists()

    allowed = storage("format", "--config", str(config_file), "--cluster-id", CLUSTER,
                      "--ignore-formatted")
    assert allowed.returncode == 0, allowed.stderr
    assert (meta_dir / "meta.properties").read_bytes() == before
    assert read_meta_properties(data_dir).cluster_id == CLUSTER


@pytest.mark.parametrize("cluster_id", [" ", "notvalid", "abc def", "universe-labs-cluster",
                                        "MkU3OEVBNTcwNTJENDM2Qk+/", "AAAAAAAAAAAAAAAAAAAAAAAA"])
def test_bad_cluster_id(tmp_path: Path, config_file: Path, cluster_id: str) -> None:
    """Kafka's kafka-storage.sh format reads -t with Uuid.fromString: anything but a base64url
    UUID of 16 bytes is refused in one line, before anything is written."""
    result = storage("format", "--config", str(config_file), "--cluster-id", cluster_id)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: invalid cluster id {cluster_id!r}: expected a base64url UUID")
    assert result.stderr.count("\n") == 1 and not result.stdout
    assert not (tmp_path / "meta").exists()


def test_bad_release_and_bad_config(tmp_path: Path, config_file: Path) -> None:
    result = storage("format", "-c", str(config_file), "-t", CLUSTER, "-r", "2.8")
    assert result.returncode == 1 and "unknown release version '2.8'" in result.stderr
    assert "4.0-IV3" in result.stderr

    bad = tmp_path / "bad.properties"
    bad.write_text(config_file.read_text() + "node.idd=1\n")
    result = storage("info", "--config", str(bad))
    assert result.returncode == 1 and "node.idd: unknown configuration key" in result.stderr

    assert storage("format", "--config", str(config_file)).returncode == 1


def test_format_dirs_for_the_embedded_mode(tmp_path: Path) -> None:
    config = embedded_config(tmp_path / "controller")
    assert format_dirs(config, CLUSTER, DEFAULT_RELEASE) == [tmp_path / "controller"]
    assert format_dirs(config, CLUSTER, DEFAULT_RELEASE, ignore_formatted=True) == []
    level = read_bootstrap(tmp_path / "controller")[0][0].feature_level
    assert level == metadata_level(DEFAULT_RELEASE) == 25
    with pytest.raises(StorageError, match="already formatted"):
        format_dirs(config, CLUSTER, DEFAULT_RELEASE)


def test_release_names() -> None:
    assert metadata_level("3.7") == 19
    assert metadata_level("3.3") == 7
    assert metadata_level("3.3-IV0") == 4
    assert metadata_level("4.0") == RELEASE_VERSIONS["4.0-IV3"]
    with pytest.raises(ValueError, match="valid names: .*3.0-IV1"):
        metadata_level("3.7-IV9")


def test_corrupted_byte_names_the_offset(tmp_path: Path) -> None:
    write_bootstrap(tmp_path, [(FeatureLevelRecord(name="metadata.version", feature_level=25), 0)])
    path = tmp_path / BOOTSTRAP_CHECKPOINT
    data = bytearray(path.read_bytes())
    second_batch = read_batch_header(bytes(data), 0).size
    data[second_batch + 70] ^= 0x40  # inside the metadata record
    path.write_bytes(bytes(data))
    with pytest.raises(StorageError) as info:
        read_bootstrap(tmp_path)
    message = str(info.value)
    assert str(path) in message and f"at byte {second_batch}:" in message and "CRC" in message


def test_truncated_checkpoint(tmp_path: Path) -> None:
    write_bootstrap(tmp_path, [(FeatureLevelRecord(name="metadata.version", feature_level=25), 0)])
    path = tmp_path / BOOTSTRAP_CHECKPOINT
    data = path.read_bytes()
    header_size = read_batch_header(data, 0).size
    second_size = read_batch_header(data, header_size).size
    path.write_bytes(data[:header_size + second_size])
    with pytest.raises(StorageError, match="no snapshot footer"):
        read_bootstrap(tmp_path)
    path.write_bytes(data[:header_size + 10])
    with pytest.raises(StorageError, match=f"at byte {header_size}"):
        read_bootstrap(tmp_path)


def test_info_reports_a_node_id_mismatch(tmp_path: Path, config_file: Path) -> None:
    assert storage("format", "-c", str(config_file), "-t", CLUSTER).returncode == 0
    config_file.write_text(config_file.read_text()
                           .replace("node.id=1", "node.id=2")
                           .replace("1@127.0.0.1", "2@127.0.0.1"))
    info = storage("info", "--config", str(config_file))
    assert info.returncode == 1
    assert "node.id is 1 but the config has node.id 2" in info.stderr


def test_a_directory_with_a_cluster_id_that_is_not_a_uuid_is_still_read(tmp_path: Path, config_file: Path) -> None:
    """The tool refuses to make such an id, but meta.properties may hold any string (a Kafka
    formatted before its format checked the id): a controller starts on it."""
    format_dirs(load_config(config_file), "universe-labs-cluster")
    assert check_log_dirs(load_config(config_file)) == "universe-labs-cluster"
