"""Damaged segments at start-up: corruption before the end stops the controller and names the
file and offset; a torn tail is cut off with a log line and the controller starts."""

from __future__ import annotations

import os
import re
import signal

import pytest

from protocol.records import HEADER_SIZE
from server.metalog.snapshots import list_snapshots
from tests.support.metalog import (
    LONG_SESSION, active_brokers, batch_positions, build_state, create_topic, flip, load_data_dir,
    metadata_topics, partition_dir, run_server_once, segment_paths, state_of)
from tests.support.wire import connect
from tools.processes import poll

TOPICS = 24


def build_log(controller_factory):
    """A stopped controller whose log holds brokers and TOPICS topics, one batch each."""
    controller = controller_factory(LONG_SESSION)
    with connect(controller) as client:
        active_brokers(client, controller.cluster_id, [1, 2])
        for i in range(TOPICS):
            create_topic(client, f"topic-{i:02d}", 1 + i % 3)
    controller.stop()
    [segment] = segment_paths(controller.data_dir)
    return controller, segment


# Byte offsets inside a batch: base offset, batch length, leader epoch, magic, CRC, attributes,
# last offset delta, timestamps, producer id, record count, and the records themselves.
FIELDS = {"base offset": 7, "length": 11, "leader epoch": 15, "leader epoch high byte": 12,
          "magic": 16, "crc": 19, "attributes": 22, "last offset delta": 26, "timestamp": 34,
          "producer id": 46, "record count": 60, "record": HEADER_SIZE + 5}


@pytest.mark.parametrize("field", list(FIELDS))
def test_a_flipped_byte_in_a_middle_batch_stops_start_up(controller_factory, field):
    controller, segment = build_log(controller_factory)
    before = segment.read_bytes()
    batches = batch_positions(before)
    position, size, base_offset = batches[len(batches) // 2]
    flip(segment, position + FIELDS[field])

    result = run_server_once(controller.config_path)
    assert result.returncode != 0, result.stdout
    assert "is active" not in result.stdout
    message = result.stderr
    assert str(segment) in message, message
    # The error names where the damage is: the byte position and the log offset of the batch.
    found = re.search(r"at byte (\d+) \(log offset (\d+)\)", message)
    assert found, message
    assert int(found.group(1)) == position, message
    assert int(found.group(2)) == base_offset, message
    assert "Traceback" not in message
    # Nothing was cut off or rewritten: the operator gets the damaged file as it was.
    after = segment.read_bytes()
    assert len(after) == len(before)
    assert sum(a != b for a, b in zip(before, after)) == 1


def test_corruption_in_an_earlier_segment_stops_start_up(controller_factory):
    controller = controller_factory({**LONG_SESSION, "metadata.log.segment.bytes": "4096"})
    with connect(controller) as client:
        active_brokers(client, controller.cluster_id, [1, 2])
        for i in range(60):
            create_topic(client, f"topic-{i:02d}", 2)
    controller.stop()
    segments = segment_paths(controller.data_dir)
    assert len(segments) >= 3
    victim = segments[1]
    position, _, base_offset = batch_positions(victim.read_bytes())[-1]  # its last batch
    flip(victim, position + HEADER_SIZE + 2)
    result = run_server_once(controller.config_path)
    assert result.returncode != 0
    assert f"{victim} at byte {position} (log offset {base_offset})" in result.stderr, result.stderr


def tail_cut(segment, keep_of_last: int) -> tuple[int, int]:
    data = segment.read_bytes()
    position, size, _ = batch_positions(data)[-1]
    assert 0 < keep_of_last < size
    os.truncate(segment, position + keep_of_last)
    return position, size


@pytest.mark.parametrize("damage", ["header cut short", "body cut short", "garbage appended",
                                    "zeros appended"])
def test_a_torn_tail_is_truncated_with_a_log_line(controller_factory, damage):
    controller, segment = build_log(controller_factory)
    whole = load_data_dir(controller.data_dir)
    data = segment.read_bytes()
    last_position, last_size, _ = batch_positions(data)[-1]
    if damage == "header cut short":
        tail_cut(segment, 20)
        expected_size, lost = last_position, True
    elif damage == "body cut short":
        tail_cut(segment, last_size - 3)
        expected_size, lost = last_position, True
    else:
        junk = os.urandom(200) if damage == "garbage appended" else bytes(100)
        with open(segment, "ab") as f:
            f.write(junk)
        expected_size, lost = len(data), False

    controller.start()
    logged = controller.wait_for_stderr(r"truncating a torn batch at byte (\d+)")
    assert int(logged.group(1)) == expected_size
    assert str(segment) in logged.string
    with connect(controller) as client:
        topics = metadata_topics(client)
        expected = {f"topic-{i:02d}" for i in range(TOPICS - (1 if lost else 0))}
        assert set(topics) == expected
        # The log goes on from where it was cut.
        create_topic(client, "after-the-tear", 1)
    controller.stop()
    assert segment.read_bytes()[:expected_size] == data[:expected_size]
    # A clean restart finds nothing more to cut.
    controller.start()
    controller.stop()
    assert "truncating" not in controller.stderr_text()
    recovered = state_of(load_data_dir(controller.data_dir))
    assert "after-the-tear" in recovered["topics"]
    if not lost:
        del recovered["topics"]["after-the-tear"], recovered["names"]["after-the-tear"]
        recovered["partition_count"] -= 1
        recovered["isr_of"] = {b: [p for p in ps if p[0] != "after-the-tear"] for b, ps in recovered["isr_of"].items()}
        recovered["isr_of"] = {b: ps for b, ps in recovered["isr_of"].items() if ps}
        assert recovered == state_of(whole)


def test_a_damaged_snapshot_whose_log_is_gone_stops_start_up(controller_factory):
    controller = controller_factory({**LONG_SESSION, "metadata.log.segment.bytes": "4096"})
    partition = partition_dir(controller.data_dir)
    with connect(controller) as client:
        build_state(client, controller.cluster_id, topics=40)
        os.kill(controller.pid, signal.SIGUSR1)
        [snapshot] = poll(lambda: list_snapshots(partition), 60, message="a snapshot")
        controller.wait_for_stderr(r"wrote snapshot .* removed \d+ old segments")
        create_topic(client, "after-the-snapshot", 1)
    controller.stop()
    assert int(segment_paths(controller.data_dir)[0].name[:20]) > 0
    path = partition / snapshot.file_name
    data = path.read_bytes()
    flip(path, len(data) // 2)

    result = run_server_once(controller.config_path)
    assert result.returncode != 0, result.stdout
    assert "is active" not in result.stdout
    assert f"{path}: corrupt record batch at byte" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
