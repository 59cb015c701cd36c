"""The metadata log's parts one at a time: segments, recovery, failed writes, the quorum-state
epoch, and the Fetch details an observer relies on (long poll, diverging epoch, DescribeQuorum)."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from protocol.error_codes import Error
from protocol.generated.metadata.no_op_record import NoOpRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.primitives import random_uuid
from protocol.records import decode_batch, iter_batches, parse_metadata_record, read_batch_header
from server.config import EMBEDDED_NODE_ID
from server.metalog import segments as segments_module
from server.metalog.commit_path import encode_records
from server.metalog.quorum_state import read_quorum_state
from server.metalog.segments import LogCorruption, MetadataLog
from tests.support.metalog import (
    LONG_SESSION, active_brokers, batch_positions, create_topic, describe_quorum, fetch, fetch_request,
    partition_dir)
from tests.support.wire import connect, server_has_read
from tools.processes import poll

INT32_MAX = 2**31 - 1


def topic_batch(base: int, count: int = 3, epoch: int = 1, name_len: int = 40) -> bytes:
    return encode_records([(TopicRecord(name=f"{base + i:0{name_len}d}", topic_id=random_uuid()), 0)
                           for i in range(count)], base, epoch, 1_700_000_000_000)


def fill(log: MetadataLog, batches: int, count: int = 3, epoch: int = 1) -> list[bytes]:
    written = []
    for _ in range(batches):
        raw = topic_batch(log.end_offset, count, epoch)
        log.append([raw])
        written.append(raw)
    return written


def names_from(log: MetadataLog, offset: int = 0) -> list[tuple[int, str]]:
    return [(o, parse_metadata_record(v)[0].name) for _, values in log.record_values(offset) for o, v in values]


# --- segments ---------------------------------------------------------------------------------------

def test_segments_roll_by_size(tmp_path):
    log = MetadataLog.open(tmp_path, segment_bytes=4096)
    written = fill(log, 60)
    size = len(written[0])
    paths = sorted(log.directory.glob("*.log"))
    assert len(paths) == len(log.segments) >= 4
    for path in paths:
        data = path.read_bytes()
        batches = batch_positions(data)
        # Named after its first offset; rolled once it reached the limit, never before.
        assert int(path.name[:20]) == batches[0][2]
        assert sum(b[1] for b in batches) == len(data)
        if path != paths[-1]:
            assert 4096 <= len(data) < 4096 + size
    log.close()


def test_recovery_reads_every_segment_back(tmp_path):
    log = MetadataLog.open(tmp_path, segment_bytes=4096)
    written = fill(log, 50)
    expected = names_from(log)
    end = log.end_offset
    log.close()

    again = MetadataLog.open(tmp_path, segment_bytes=4096)
    assert again.end_offset == end == 150
    assert names_from(again) == expected
    # Reads from any offset start at the batch holding it, across segment boundaries.
    for offset in (0, 1, 44, 45, 46, 100, 149):
        got = again.read(offset, 10_000)
        first = read_batch_header(got)
        assert first.base_offset <= offset <= first.last_offset
        assert got == b"".join(written[first.base_offset // 3:][:len(list(iter_batches(got)))])
    assert again.read(150, 10_000) == b""
    assert names_from(again, 75) == expected[75:]
    # The log goes on where it stopped, in the last segment.
    fill(again, 1)
    assert again.end_offset == 153
    again.close()


def test_a_bad_batch_followed_by_valid_ones_in_the_last_segment_is_corruption(tmp_path):
    log = MetadataLog.open(tmp_path)
    fill(log, 6)
    log.close()
    [path] = sorted(log.directory.glob("*.log"))
    data = bytearray(path.read_bytes())
    position, size, base = batch_positions(bytes(data))[4]
    data[position + size - 1] ^= 0x01  # the last byte of the fifth batch of six
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorruption) as caught:
        MetadataLog.open(tmp_path)
    assert (caught.value.path, caught.value.position, caught.value.offset) == (path, position, base)
    assert f"{path} at byte {position} (log offset {base})" in str(caught.value)
    assert path.read_bytes() == bytes(data), "recovery must not cut off good batches"


def test_a_torn_last_batch_is_truncated_with_a_log_line(tmp_path, caplog):
    log = MetadataLog.open(tmp_path, segment_bytes=4096)
    fill(log, 40)
    log.close()
    last = sorted(log.directory.glob("*.log"))[-1]
    position, size, base = batch_positions(last.read_bytes())[-1]
    os.truncate(last, position + size // 2)
    with caplog.at_level(logging.WARNING, logger="kraftwire.metalog"):
        again = MetadataLog.open(tmp_path, segment_bytes=4096)
    assert f"truncating a torn batch at byte {position}" in caplog.text
    assert last.stat().st_size == position
    assert again.end_offset == base
    again.close()


def test_an_epoch_that_goes_down_is_corruption(tmp_path):
    log = MetadataLog.open(tmp_path)
    for epoch in (1, 1, 2, 2, 1, 2):
        log.append([topic_batch(log.end_offset, epoch=epoch)])
    log.close()
    [path] = sorted(log.directory.glob("*.log"))
    position, _, base = batch_positions(path.read_bytes())[4]
    with pytest.raises(LogCorruption) as caught:
        MetadataLog.open(tmp_path)
    assert (caught.value.position, caught.value.offset) == (position, base)
    assert "leader epoch 1 is below 2" in str(caught.value)


class _NoSync:
    """``os`` with fsync doing nothing: many more appends a second, so that the writer thread
    and the deleting thread meet as often as they can."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def fsync(fd: int) -> None:
        pass


def test_appends_and_segment_deletion_from_two_threads_keep_the_index_right(tmp_path, monkeypatch):
    # The committer appends on its writer thread while the server deletes segments covered by
    # a snapshot on the event loop.
    monkeypatch.setattr(segments_module, "os", _NoSync())
    monkeypatch.setattr(segments_module, "fsync_dir", lambda path: None)
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    log = MetadataLog.open(tmp_path, segment_bytes=200)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            log.append([encode_records([(NoOpRecord(), 0)] * 2, log.end_offset, 1, 0)])

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            log.delete_segments_before(max(0, log.end_offset - 400))
    finally:
        stop.set()
        thread.join(10)
        sys.setswitchinterval(old_interval)
    assert log._bases == [e.base_offset for e in log.entries]
    for before, entry in zip(log.entries, log.entries[1:]):
        assert entry.base_offset == before.last_offset + 1
    for entry in log.entries:
        batch, _ = decode_batch(log._read_entry(entry))
        assert (batch.base_offset, batch.last_offset) == (entry.base_offset, entry.last_offset)
    log.close()


def test_a_failed_fsync_is_cut_back_and_the_log_goes_on(tmp_path, monkeypatch):
    log = MetadataLog.open(tmp_path)
    fill(log, 3)
    [path] = log.segments
    size = path.stat().st_size
    calls = []

    class FailingOnce(_NoSync):
        @staticmethod
        def fsync(fd: int) -> None:
            calls.append(fd)
            if len(calls) == 1:
                raise OSError(5, "Input/output error")
            os.fsync(fd)

    monkeypatch.setattr(segments_module, "os", FailingOnce())
    with pytest.raises(OSError, match="Input/output error"):
        log.append([topic_batch(9)])
    assert path.stat().st_size == size
    assert log.end_offset == 9
    fill(log, 2)
    log.close()
    again = MetadataLog.open(tmp_path)
    assert again.end_offset == 15
    assert [o for o, _ in names_from(again)] == list(range(15))
    again.close()


def test_a_failed_write_that_cannot_be_cut_back_stops_all_writes(tmp_path, monkeypatch):
    log = MetadataLog.open(tmp_path)
    fill(log, 2)

    class FailingSync(_NoSync):
        @staticmethod
        def fsync(fd: int) -> None:
            raise OSError(5, "Input/output error")

    real_open = open

    def no_reopen(path, mode="r", *args, **kwargs):
        if mode == "r+b":
            raise OSError(30, "Read-only file system")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(segments_module, "os", FailingSync())
    monkeypatch.setattr(segments_module, "open", no_reopen, raising=False)
    with pytest.raises(OSError, match="Input/output error"):
        log.append([topic_batch(6)])
    monkeypatch.undo()
    [path] = log.segments
    size = path.stat().st_size
    # The failed bytes are still in the file: nothing may be written after them.
    with pytest.raises(OSError, match="could not be cut back"):
        log.append([topic_batch(6)])
    assert path.stat().st_size == size
    log.close()
    # Only the fsync failed, so the batch is whole: a restart finds a consistent log.
    again = MetadataLog.open(tmp_path)
    assert again.end_offset == 9
    again.close()


# --- the quorum-state epoch ---------------------------------------------------------------------------

def leader_changes(data_dir: Path) -> list[tuple[int, int]]:
    """(base offset, epoch) of every control batch in the log."""
    log = MetadataLog.open(data_dir)
    try:
        return [(b.base_offset, b.partition_leader_epoch) for b in log.batches() if b.is_control]
    finally:
        log.close()


def test_the_epoch_survives_in_quorum_state_and_grows_on_every_restart(controller_factory):
    controller = controller_factory(LONG_SESSION)
    epochs = []
    for round_ in range(4):
        if round_:
            controller.start()
        state = read_quorum_state(controller.data_dir)
        epochs.append(state.leader_epoch)
        assert (state.leader_id, state.voted_id) == (EMBEDDED_NODE_ID, EMBEDDED_NODE_ID)
        with connect(controller) as client:
            assert fetch(client, 0).current_leader.leader_epoch == state.leader_epoch
            if round_ == 0:
                active_brokers(client, controller.cluster_id, [1])
            create_topic(client, f"round-{round_}", 1)
        if round_ % 2:
            controller.stop()
        else:
            controller.kill9()
    assert epochs == list(range(epochs[0], epochs[0] + 4))
    # Each start marked its epoch in the log with a LeaderChange batch.
    assert [e for _, e in leader_changes(controller.data_dir)] == epochs
    raw = (partition_dir(controller.data_dir) / "quorum-state").read_text()
    assert '"leaderEpoch": %d' % epochs[-1] in raw


# --- Fetch -------------------------------------------------------------------------------------------

def test_a_long_poll_returns_as_soon_as_a_commit_happens(controller_factory):
    controller = controller_factory(LONG_SESSION)
    # The observer's socket timeout bounds the wait for the woken fetch, generously.
    with connect(controller) as client, connect(controller, timeout=120) as observer:
        active_brokers(client, controller.cluster_id, [1])
        hw = fetch(observer, 0).high_watermark
        # Nothing new: the fetch waits for MaxWaitMs, then answers empty. A busy machine only
        # adds to the wait; the margin is for the event loop's cached clock.
        started = time.monotonic()
        idle = fetch(observer, hw, max_wait_ms=300)
        assert not idle.records and idle.high_watermark == hw
        assert time.monotonic() - started >= 0.25
        # A commit while the fetch waits answers it, with the new batch. Its MaxWaitMs is the
        # longest there is, so only the commit can have woken it.
        correlation_id = observer.send(fetch_request(hw, max_wait_ms=INT32_MAX), 17)
        # The server has taken the fetch in (and parks it, finding nothing new) before the write.
        poll(lambda: server_has_read(observer.sock), 60, message="the server to read the fetch")
        create_topic(client, "wakes-the-fetch", 2)
        response = observer.receive(1, 17, correlation_id)
        [part] = [p for t in response.responses for p in t.partitions]
        assert part.high_watermark > hw
        batches = [b for b, _ in iter_batches(part.records)]
        assert batches[0].base_offset == hw
        names = [parse_metadata_record(r.value)[0].NAME for b in batches for r in b.records]
        assert names[:2] == ["TopicRecord", "PartitionRecord"]


def epoch_boundaries(observer) -> dict[int, tuple[int, int]]:
    """epoch -> (first offset, end offset) as the fetched log shows it."""
    offset, hw, seen = 0, 1, {}
    while offset < hw:
        part = fetch(observer, offset)
        hw = part.high_watermark
        for batch, _ in iter_batches(part.records):
            first, _ = seen.get(batch.partition_leader_epoch, (batch.base_offset, 0))
            seen[batch.partition_leader_epoch] = (first, batch.next_offset)
            offset = batch.next_offset
    return seen


def test_a_fetcher_that_went_past_its_epoch_is_told_where_it_ends(controller_factory):
    controller = controller_factory(LONG_SESSION)
    with connect(controller) as client:
        active_brokers(client, controller.cluster_id, [1])
        create_topic(client, "epoch-one", 1)
    controller.stop()
    controller.start()
    with connect(controller) as client:
        create_topic(client, "epoch-two", 3)
        bounds = epoch_boundaries(client)
        old, new = sorted(bounds)
        old_end = bounds[old][1]
        assert bounds[new][0] == old_end
        # A fetcher that holds records of the old epoch beyond where that epoch ended here.
        part = fetch(client, old_end + 2, last_fetched_epoch=old)
        assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (old, old_end)
        assert not part.records
        # One that stopped exactly at the end of the old epoch is fine and gets the new one.
        part = fetch(client, old_end, last_fetched_epoch=old)
        assert part.diverging_epoch.epoch == -1
        assert read_batch_header(part.records).partition_leader_epoch == new
        # An epoch the leader never had: the largest epoch below it and where that one ends.
        part = fetch(client, old_end + 1, last_fetched_epoch=new + 5)
        assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (new, bounds[new][1])
        # Beyond the end of the current epoch.
        part = fetch(client, bounds[new][1] + 100, last_fetched_epoch=new)
        assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (new, bounds[new][1])


def test_describe_quorum_lists_observers_with_their_offsets(controller_factory):
    controller = controller_factory(LONG_SESSION)
    with connect(controller) as client:
        active_brokers(client, controller.cluster_id, [1])
        create_topic(client, "observed", 2)
        hw = fetch(client, 0).high_watermark
        fetch(client, 3, replica_id=7)
        fetch(client, hw, replica_id=8)
        fetch(client, 1, replica_id=-1)  # an anonymous observer is not tracked
        # An older Fetch version carries the replica id in the top-level field.
        response = client.request(fetch_request(2, version=12, replica_id=9), 12)
        assert response.responses[0].partitions[0].error_code == Error.NONE
        quorum = describe_quorum(client)
    assert quorum.error_code == Error.NONE
    assert (quorum.leader_id, quorum.high_watermark) == (EMBEDDED_NODE_ID, hw)
    assert [(v.replica_id, v.log_end_offset) for v in quorum.current_voters] == [(EMBEDDED_NODE_ID, hw)]
    observers = {o.replica_id: o for o in quorum.observers}
    assert {r: o.log_end_offset for r, o in observers.items()} == {7: 3, 8: hw, 9: 2}
    now_ms = time.time() * 1000
    assert all(abs(o.last_fetch_timestamp - now_ms) < 60_000 for o in observers.values())
    assert observers[8].last_caught_up_timestamp > 0
    assert observers[7].last_caught_up_timestamp == -1


@pytest.mark.parametrize("version", range(0, 18))
def test_every_fetch_version_serves_the_log(module_controller, version):
    with connect(module_controller) as client:
        part = fetch(client, 0, version=version)
        assert part.error_code == Error.NONE
        batches = [b for b, _ in iter_batches(part.records)]
        assert batches[0].base_offset == 0
        assert part.high_watermark >= batches[-1].next_offset


def test_fetch_rejects_another_cluster_and_offsets_past_the_end(module_controller):
    with connect(module_controller) as client:
        response = client.request(fetch_request(0, cluster_id="AAAAAAAAAAAAAAAAAAAAAA"), 17)
        assert response.error_code == Error.INCONSISTENT_CLUSTER_ID
        hw = fetch(client, 0).high_watermark
        assert fetch(client, hw + 10).error_code == Error.OFFSET_OUT_OF_RANGE
        assert fetch(client, 0, current_leader_epoch=1 << 20).error_code == Error.UNKNOWN_LEADER_EPOCH


def test_reads_stop_at_max_bytes_and_up_to_across_segments(tmp_path):
    log = MetadataLog.open(tmp_path, segment_bytes=2048)
    written = []
    for i in range(12):
        written += fill(log, 5, count=1 + i % 3)
    assert len(log.segments) > 4
    starts = [read_batch_header(raw).base_offset for raw in written]
    for offset in range(0, log.end_offset, 3):
        for max_bytes in (1, 500, 3000, 1 << 20):
            for up_to in (None, offset + 7, log.end_offset - 1):
                got = log.read(offset, max_bytes, up_to)
                first = max(i for i, s in enumerate(starts) if s <= offset)
                expected, total = [], 0
                for raw in written[first:]:
                    header = read_batch_header(raw)
                    if up_to is not None and header.last_offset > up_to:
                        break
                    if expected and total + len(raw) > max_bytes:
                        break
                    expected.append(raw)
                    total += len(raw)
                assert got == b"".join(expected), (offset, max_bytes, up_to)
    log.close()


def test_epoch_end_offsets_match_a_walk_over_every_batch(tmp_path):
    def walk(log: MetadataLog, epoch: int) -> tuple[int, int]:
        best = (-1, -1)
        for e in log.entries:
            if e.epoch > epoch:
                break
            best = (e.epoch, e.last_offset + 1)
        return best

    log = MetadataLog.open(tmp_path, segment_bytes=1024)
    epoch = 1
    for i in range(120):
        epoch += 1 if i % 17 == 0 else 3 if i % 41 == 0 else 0
        log.append([topic_batch(log.end_offset, count=1 + i % 2, epoch=epoch)])
    for stage in ("written", "reopened", "after deletion"):
        if stage == "reopened":
            log.close()
            log = MetadataLog.open(tmp_path, segment_bytes=1024)
        elif stage == "after deletion":
            assert log.delete_segments_before(log.end_offset // 2)
        for asked in range(0, epoch + 3):
            assert log.epoch_end_offset(asked) == walk(log, asked), (stage, asked)
    log.close()


def test_a_snapshot_that_cannot_be_written_leaves_no_file_behind(tmp_path, monkeypatch):
    from server.metalog import snapshot_file
    from server.metalog.snapshots import SnapshotId, list_snapshots, write_snapshot

    class FailingSync(_NoSync):
        @staticmethod
        def fsync(fd: int) -> None:
            raise OSError(28, "No space left on device")

    records = [(TopicRecord(name=f"t{i}", topic_id=random_uuid()), 0) for i in range(10)]
    write_snapshot(tmp_path, SnapshotId(10, 1), records)
    monkeypatch.setattr(snapshot_file, "os", FailingSync())
    with pytest.raises(OSError, match="No space left on device"):
        write_snapshot(tmp_path, SnapshotId(20, 1), records)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == [SnapshotId(10, 1).file_name]
    assert list_snapshots(tmp_path) == [SnapshotId(10, 1)]


def test_describe_quorum_before_v2_names_no_directory_ids(controller_factory):
    """An observer that fetched with its directory id (a Kafka 3.8+ broker) is listed in a
    DescribeQuorum v0 or v1 answer without it: those versions have no such field, and Kafka's
    tools of 3.7 and older, and Kafka's controllers, still ask at v1."""
    from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
    from protocol.primitives import ZERO_UUID
    from tests.support.metalog import FETCH_V

    controller = controller_factory(LONG_SESSION)
    with connect(controller) as client:
        epoch = describe_quorum(client).leader_epoch
        request = fetch_request(0, replica_id=7, last_fetched_epoch=0, current_leader_epoch=epoch)
        request.topics[0].partitions[0].replica_directory_id = random_uuid()
        fetched = client.request(request, FETCH_V)
        assert (fetched.error_code, fetched.responses[0].partitions[0].error_code) == (Error.NONE, Error.NONE)
        for version in (0, 1, 2):
            answer = client.request(DescribeQuorumRequest(topics=[TopicData(
                topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), version)
            [part] = answer.topics[0].partitions
            assert part.error_code == Error.NONE and [o.replica_id for o in part.observers] == [7]
            named = part.observers[0].replica_directory_id != ZERO_UUID
            assert named == (version >= 2)


def test_an_empty_observer_log_fetched_without_a_directory_id_reads_from_offset_0(controller_factory):
    """A new Kafka 3.7 broker fetches offset 0 with last fetched epoch 0 (its empty log's) and
    no directory id: the log starts at 0, so the answer holds records, not a divergence or
    nothing (which left the broker waiting for its first metadata for ever)."""
    controller = controller_factory(LONG_SESSION)
    with connect(controller) as client:
        epoch = describe_quorum(client).leader_epoch
        part = fetch(client, 0, version=15, replica_id=7, last_fetched_epoch=0, current_leader_epoch=epoch)
    assert part.error_code == Error.NONE and part.diverging_epoch.epoch == -1
    assert part.records and part.high_watermark > 0
