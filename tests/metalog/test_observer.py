"""A KRaft observer over a raw socket rebuilds the controller's state exactly: from offset 0, and
from a snapshot when the early segments are gone."""

from __future__ import annotations

import os
import signal

from protocol.error_codes import Error
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from server.config import EMBEDDED_NODE_ID
from server.metalog.snapshot_file import read_snapshot_file
from server.metalog.snapshots import list_snapshots
from tests.support.metalog import (
    build_state, create_topic, fetch, fetch_snapshot_bytes, load_data_dir, metadata_topics, metadata_view,
    new_controller, observe_log, partition_dir, replay_snapshot, segment_paths, state_of)
from tests.support.wire import connect
from tools.processes import poll

PROPS = {"broker.session.timeout.ms": "120000"}


def listed_brokers(client) -> list[int]:
    return sorted(b.broker_id for b in client.request(DescribeClusterRequest(endpoint_type=1), 1).brokers)


def unfenced(qc) -> list[int]:
    return sorted(b.broker_id for b in qc.cluster.brokers.values() if not b.fenced)


def test_an_observer_rebuilds_the_state_from_offset_0(controller_factory):
    controller = controller_factory(PROPS)
    with connect(controller) as client:
        build_state(client, controller.cluster_id)
        observer_qc = new_controller()
        with connect(controller) as observer:
            # Small fetches, so the log arrives in many answers of whole batches.
            last = observe_log(observer, observer_qc, max_bytes=700)
        assert last.log_start_offset == 0
        assert last.current_leader.leader_id == EMBEDDED_NODE_ID
        # What the controller itself reports over the wire ...
        assert metadata_view(observer_qc) == metadata_topics(client)
        assert unfenced(observer_qc) == listed_brokers(client)
    controller.stop()
    # ... and every replayed fact, against the log on disk loaded as the server loads it.
    assert state_of(observer_qc) == state_of(load_data_dir(controller.data_dir))


def test_an_observer_rebuilds_the_state_from_a_snapshot(controller_factory):
    controller = controller_factory({**PROPS, "metadata.log.segment.bytes": "4096"})
    partition = partition_dir(controller.data_dir)
    with connect(controller) as client:
        build_state(client, controller.cluster_id, topics=40)
        assert len(segment_paths(controller.data_dir)) >= 4
        os.kill(controller.pid, signal.SIGUSR1)
        [snapshot] = poll(lambda: list_snapshots(partition), 60, message="a snapshot")
        poll(lambda: int(segment_paths(controller.data_dir)[0].name[:20]) > 0, 60,
             message="the segments before the snapshot to be deleted")
        controller.wait_for_stderr(r"wrote snapshot .* removed \d+ old segments")
        # Changes after the snapshot, for the observer to fetch from the log.
        build_state(client, controller.cluster_id, topics=6, first_broker=20)
        create_topic(client, "after-snapshot", 2)

        with connect(controller) as observer:
            start = fetch(observer, 0)
            assert start.error_code == Error.NONE
            assert (start.snapshot_id.end_offset, start.snapshot_id.epoch) == (snapshot.end_offset, snapshot.epoch)
            assert 0 < start.log_start_offset <= snapshot.end_offset
            assert not start.records
            # Any offset before the log start is sent to the snapshot too.
            assert fetch(observer, start.log_start_offset - 1).snapshot_id.end_offset == snapshot.end_offset
            on_disk = (partition / snapshot.file_name).read_bytes()
            chunk = 1000
            data, requests = fetch_snapshot_bytes(observer, snapshot.end_offset, snapshot.epoch, chunk)
            assert data == on_disk
            assert requests == -(-len(on_disk) // chunk) > 3
            copy = controller.workdir / "fetched.checkpoint"
            copy.write_bytes(data)
            observer_qc = new_controller()
            replay_snapshot(observer_qc, read_snapshot_file(copy), snapshot.end_offset)
            observe_log(observer, observer_qc, max_bytes=2048)
        assert "after-snapshot" in observer_qc.replication.names
        assert metadata_view(observer_qc) == metadata_topics(client)
        assert unfenced(observer_qc) == listed_brokers(client)
    controller.stop()
    assert state_of(observer_qc) == state_of(load_data_dir(controller.data_dir))


def test_a_fetcher_behind_the_log_start_is_sent_to_the_snapshot_whatever_its_epoch(controller_factory):
    """KRaft checks the snapshot before the epoch: a fetcher whose offset is gone from the log
    gets the snapshot id, even when the epoch it last saw is older than any batch left."""
    controller = controller_factory({**PROPS, "metadata.log.segment.bytes": "4096"})
    partition = partition_dir(controller.data_dir)
    with connect(controller) as client:
        build_state(client, controller.cluster_id, topics=5)
        first_epoch_end = fetch(client, 0).high_watermark
    controller.stop()
    controller.start()
    with connect(controller) as client:
        build_state(client, controller.cluster_id, topics=40, first_broker=20)
        os.kill(controller.pid, signal.SIGUSR1)
        [snapshot] = poll(lambda: list_snapshots(partition), 60, message="a snapshot")
        controller.wait_for_stderr(r"wrote snapshot .* removed \d+ old segments")
        start = fetch(client, 0)
        assert start.log_start_offset > first_epoch_end, "the first epoch's segments must be gone"
        wanted = (snapshot.end_offset, snapshot.epoch)
        for offset in (first_epoch_end - 1, start.log_start_offset):
            part = fetch(client, offset, last_fetched_epoch=snapshot.epoch - 1)
            assert part.error_code == Error.NONE
            assert (part.snapshot_id.end_offset, part.snapshot_id.epoch) == wanted, \
                (offset, part.diverging_epoch, part.snapshot_id)
            assert not part.records
