"""server.metalog.meta_properties: reading, writing and cross-checking meta.properties v1."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.primitives import random_uuid, uuid_to_str
from server.config import config_from_properties
from server.metalog.meta_properties import (
    MetaProperties, StorageError, check_log_dirs, read_meta_properties, write_meta_properties)

CLUSTER = "3Db5QLSqSZieL3rJBUUegA"  # the example of KIP-631


def config_for(meta_dir: Path, *data_dirs: Path, node_id: int = 1):
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.voters": f"{node_id}@127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(meta_dir),
    }
    if data_dirs:
        props["log.dirs"] = ",".join(str(d) for d in data_dirs)
    return config_from_properties(props)


def test_round_trip(tmp_path: Path) -> None:
    meta = MetaProperties(cluster_id=CLUSTER, node_id=4, directory_id=uuid_to_str(random_uuid()))
    write_meta_properties(tmp_path, meta)
    assert read_meta_properties(tmp_path) == meta
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#")
    assert {"cluster.id=3Db5QLSqSZieL3rJBUUegA", "node.id=4", "version=1"} <= set(text.splitlines())
    assert not list(tmp_path.glob("*.tmp"))


def test_reads_the_kip_example(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Tue Dec 01 10:08:08 PST 2020\ncluster.id=3Db5QLSqSZieL3rJBUUegA\nversion=1\nnode.id=0\n")
    assert read_meta_properties(tmp_path) == MetaProperties(CLUSTER, 0)


def test_missing_file_says_how_to_format(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info:
        read_meta_properties(tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message and "not formatted" in message
    assert "python -m tools.storage format --config FILE --cluster-id ID" in message


@pytest.mark.parametrize("cluster_id", [
    "3Db5QLSqSZieL3rJBUUegA", "universe-labs-cluster", "ksddns,sdsjswnd,dnjsd",
    "Some(5L6g3nShT-eMCtK--X86sw)", "q1w2e3r4t5y6u7i8o9p0", "a=b:c#d!e\\f"])
def test_any_cluster_id_kafka_accepts_reads_back(tmp_path: Path, cluster_id: str) -> None:
    """Kafka takes whatever string a directory was formatted with as its cluster id."""
    write_meta_properties(tmp_path, MetaProperties(cluster_id=cluster_id, node_id=2))
    assert read_meta_properties(tmp_path).cluster_id == cluster_id


def test_an_empty_cluster_id_is_read_and_written(tmp_path: Path) -> None:
    """MetaProperties.Builder(Properties): only a missing cluster.id is an error
    (MetaPropertiesTest.testClusterIdRequiredInV1); an empty one is a cluster id."""
    (tmp_path / "meta.properties").write_text("cluster.id=\nversion=1\nnode.id=1\n")
    assert read_meta_properties(tmp_path) == MetaProperties(cluster_id="", node_id=1)
    write_meta_properties(tmp_path, MetaProperties(cluster_id="", node_id=1))
    assert read_meta_properties(tmp_path).cluster_id == ""


@pytest.mark.parametrize("body, key", [
    ("cluster.id=3Db5QLSqSZieL3rJBUUegA\nversion=0\nnode.id=1\n", "version"),
    ("cluster.id=3Db5QLSqSZieL3rJBUUegA\nnode.id=1\n", "version"),
    ("version=1\nnode.id=1\n", "cluster.id"),
    ("cluster.id=3Db5QLSqSZieL3rJBUUegA\nversion=1\nnode.id=x\n", "node.id"),
    ("cluster.id=3Db5QLSqSZieL3rJBUUegA\nversion=1\nnode.id=1\ndirectory.id=zz\n", "directory.id"),
])
def test_bad_contents_name_the_key(tmp_path: Path, body: str, key: str) -> None:
    (tmp_path / "meta.properties").write_text(body)
    with pytest.raises(StorageError, match=rf"meta.properties: {key}: "):
        read_meta_properties(tmp_path)


def test_check_log_dirs_returns_the_cluster_id(tmp_path: Path) -> None:
    meta_dir, data_dir = tmp_path / "meta", tmp_path / "data"
    for d in (meta_dir, data_dir):
        d.mkdir()
        write_meta_properties(d, MetaProperties(CLUSTER, 1, directory_id=uuid_to_str(random_uuid())))
    assert check_log_dirs(config_for(meta_dir, data_dir)) == CLUSTER


def test_check_log_dirs_node_id_mismatch(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, MetaProperties(CLUSTER, 2))
    with pytest.raises(StorageError) as info:
        check_log_dirs(config_for(tmp_path, node_id=1))
    assert str(tmp_path / "meta.properties") in str(info.value)
    assert "node.id is 2" in str(info.value) and "node.id 1" in str(info.value)


def test_check_log_dirs_cluster_id_mismatch(tmp_path: Path) -> None:
    meta_dir, data_dir = tmp_path / "meta", tmp_path / "data"
    meta_dir.mkdir()
    data_dir.mkdir()
    other = uuid_to_str(random_uuid())
    write_meta_properties(meta_dir, MetaProperties(CLUSTER, 1))
    write_meta_properties(data_dir, MetaProperties(other, 1))
    with pytest.raises(StorageError) as info:
        check_log_dirs(config_for(meta_dir, data_dir))
    message = str(info.value)
    assert str(data_dir / "meta.properties") in message and "cluster.id" in message
    assert other in message and CLUSTER in message and str(meta_dir) in message


def test_check_log_dirs_unformatted_dir(tmp_path: Path) -> None:
    meta_dir, data_dir = tmp_path / "meta", tmp_path / "data"
    meta_dir.mkdir()
    write_meta_properties(meta_dir, MetaProperties(CLUSTER, 1))
    with pytest.raises(StorageError, match=f"{data_dir} is not formatted"):
        check_log_dirs(config_for(meta_dir, data_dir))


def test_check_log_dirs_duplicate_directory_id(tmp_path: Path) -> None:
    meta_dir, data_dir = tmp_path / "meta", tmp_path / "data"
    shared = uuid_to_str(random_uuid())
    for d in (meta_dir, data_dir):
        d.mkdir()
        write_meta_properties(d, MetaProperties(CLUSTER, 1, directory_id=shared))
    with pytest.raises(StorageError, match="directory.id"):
        check_log_dirs(config_for(meta_dir, data_dir))
