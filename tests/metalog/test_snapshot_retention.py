"""The two newest snapshots are kept, the log below the older one goes, and start-up falls back
to the older snapshot (or the whole log) when the newest cannot be read."""

from __future__ import annotations

import os
import signal

import pytest

from protocol.generated.metadata.topic_record import TopicRecord
from protocol.primitives import random_uuid
from server.metalog.meta_properties import StorageError
from server.metalog.snapshots import SnapshotId, list_snapshots, load_latest_snapshot, oldest_kept, write_snapshot
from tests.support.metalog import (
    LONG_SESSION, build_state, create_topic, flip, load_data_dir, metadata_topics, partition_dir,
    run_server_once, segment_paths, state_of)
from tests.support.wire import connect
from tools.processes import poll


def topics(*names: str) -> list:
    return [(TopicRecord(name=n, topic_id=random_uuid()), 0) for n in names]


def test_the_two_newest_snapshots_are_kept(tmp_path) -> None:
    for end in (10, 20, 30):
        write_snapshot(tmp_path, SnapshotId(end, 1), topics(f"t{end}"))
    assert list_snapshots(tmp_path) == [SnapshotId(20, 1), SnapshotId(30, 1)]
    assert oldest_kept(tmp_path) == SnapshotId(20, 1)


def test_an_unreadable_newest_snapshot_falls_back_to_the_older(tmp_path) -> None:
    write_snapshot(tmp_path, SnapshotId(10, 1), topics("old"))
    write_snapshot(tmp_path, SnapshotId(20, 1), topics("new"))
    flip(tmp_path / SnapshotId(20, 1).file_name, 70)
    snapshot, records = load_latest_snapshot(tmp_path, log_start_offset=5)
    assert snapshot == SnapshotId(10, 1) and list(records)[0][0].name == "old"


def test_no_usable_snapshot_replays_a_log_that_starts_at_zero(tmp_path) -> None:
    write_snapshot(tmp_path, SnapshotId(20, 1), topics("new"))
    flip(tmp_path / SnapshotId(20, 1).file_name, 70)
    assert load_latest_snapshot(tmp_path, log_start_offset=0) is None


@pytest.mark.parametrize("damaged", [True, False], ids=["damaged", "below-the-log"])
def test_no_usable_snapshot_over_a_log_that_starts_later_is_an_error(tmp_path, damaged: bool) -> None:
    write_snapshot(tmp_path, SnapshotId(20, 1), topics("new"))
    if damaged:
        flip(tmp_path / SnapshotId(20, 1).file_name, 70)
    with pytest.raises(StorageError, match=rf"{tmp_path}: the metadata log starts at offset 30 and no usable"):
        load_latest_snapshot(tmp_path, log_start_offset=30)


def take_snapshot(controller, partition, count: int) -> None:
    os.kill(controller.pid, signal.SIGUSR1)
    poll(lambda: len(list_snapshots(partition)) >= count, 60, message=f"{count} snapshots")
    controller.wait_for_stderr(r"(?s)(wrote snapshot .*){%d}" % count)


def test_the_controller_falls_back_to_the_older_snapshot_and_refuses_a_log_without_one(controller_factory):
    controller = controller_factory({**LONG_SESSION, "metadata.log.segment.bytes": "4096"})
    partition = partition_dir(controller.data_dir)
    with connect(controller) as client:
        build_state(client, controller.cluster_id, topics=30)
        take_snapshot(controller, partition, 1)
        create_topic(client, "between-the-snapshots", 1)
        for i in range(30):
            create_topic(client, f"more-{i}", 2)
        take_snapshot(controller, partition, 2)
        create_topic(client, "after-the-snapshots", 1)
        served = metadata_topics(client)
    controller.stop()
    older, newest = list_snapshots(partition)
    # Segments below the older snapshot are gone; the log still covers it.
    assert 0 < int(segment_paths(controller.data_dir)[0].name[:20]) <= older.end_offset

    flip(partition / newest.file_name, 100)
    controller.start()
    assert "is unusable, trying an older one" in controller.stderr_text()
    # Set aside, so that it is not one of the two snapshots kept from now on.
    assert list_snapshots(partition) == [older]
    assert (partition / (newest.file_name + ".unusable")).exists()
    with connect(controller) as client:
        assert metadata_topics(client) == served
    controller.stop()
    assert "between-the-snapshots" in state_of(load_data_dir(controller.data_dir))["topics"]

    for snapshot in list_snapshots(partition):
        (partition / snapshot.file_name).unlink()
    result = run_server_once(controller.config_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"storage error: {partition}: the metadata log starts at offset" in result.stderr
