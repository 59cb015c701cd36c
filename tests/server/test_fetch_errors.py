"""Every Fetch error carries high watermark -1, as KRaft's answers do.

librdkafka reads an answer whose high watermark equals its fetch offset as the end of the
partition, whatever the error code says; an error with a real high watermark would look like
"caught up" to it. The requests are built, and the answers read, by kafka-python's engine.
"""

from __future__ import annotations

import uuid

import pytest

from protocol.error_codes import Error
from tests.support.kafka_python_wire import exchange, kp
from tests.support.wire import raw_socket

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
NO_OFFSET = -1


def fetch(sock, correlation_id: int, version: int, offset: int, *, partition: int = 0,
          topic: str = METADATA_TOPIC, topic_id: uuid.UUID = METADATA_TOPIC_ID,
          current_leader_epoch: int = -1):
    request_cls = kp("FetchRequest")
    part = request_cls.FetchTopic.FetchPartition(
        partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
        last_fetched_epoch=-1, partition_max_bytes=1 << 20)
    request = request_cls[version](
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        topics=[request_cls.FetchTopic(topic=topic, topic_id=topic_id, partitions=[part])])
    response = exchange(sock, request, correlation_id)
    assert response.error_code == Error.NONE
    [answer] = [p for t in response.responses for p in t.partitions]
    return answer


def assert_error_without_offsets(answer, code: int) -> None:
    assert answer.error_code == code
    assert answer.high_watermark == NO_OFFSET
    assert answer.last_stable_offset == NO_OFFSET
    assert not answer.records


@pytest.fixture
def sock(module_controller):
    with raw_socket(module_controller) as s:
        yield s


def leader_epoch_and_end(sock) -> tuple[int, int]:
    answer = fetch(sock, 1, 16, 0)
    assert answer.error_code == Error.NONE
    return answer.current_leader.leader_epoch, answer.high_watermark


def test_a_fetch_at_the_high_watermark_is_not_an_error(sock):
    epoch, hw = leader_epoch_and_end(sock)
    answer = fetch(sock, 2, 16, hw, current_leader_epoch=epoch)
    assert (answer.error_code, answer.high_watermark) == (Error.NONE, hw)


def test_a_newer_leader_epoch_than_the_leaders(sock):
    epoch, hw = leader_epoch_and_end(sock)
    assert_error_without_offsets(fetch(sock, 2, 16, hw, current_leader_epoch=epoch + 1),
                                 Error.UNKNOWN_LEADER_EPOCH)


def test_an_older_leader_epoch_than_the_leaders(sock):
    epoch, hw = leader_epoch_and_end(sock)
    assert epoch >= 1
    answer = fetch(sock, 2, 16, hw, current_leader_epoch=epoch - 1)
    assert_error_without_offsets(answer, Error.FENCED_LEADER_EPOCH)
    assert answer.current_leader.leader_epoch == epoch  # where the fetcher should go instead


def test_an_offset_past_the_log_end(sock):
    _, hw = leader_epoch_and_end(sock)
    assert_error_without_offsets(fetch(sock, 2, 16, hw + 1000), Error.OFFSET_OUT_OF_RANGE)


@pytest.mark.parametrize("version", [12, 16])
def test_an_offset_past_the_log_end_with_a_version_librdkafka_uses(sock, version):
    _, hw = leader_epoch_and_end(sock)
    assert_error_without_offsets(fetch(sock, 2, version, hw + 1), Error.OFFSET_OUT_OF_RANGE)


def test_an_unknown_topic_id(sock):
    assert_error_without_offsets(fetch(sock, 2, 16, 0, topic_id=uuid.uuid4()), Error.UNKNOWN_TOPIC_ID)


def test_an_unknown_topic_name_before_topic_ids(sock):
    assert_error_without_offsets(fetch(sock, 2, 12, 0, topic="not-the-metadata-log"),
                                 Error.UNKNOWN_TOPIC_OR_PARTITION)


def test_a_partition_the_metadata_log_does_not_have(sock):
    assert_error_without_offsets(fetch(sock, 2, 16, 0, partition=1), Error.UNKNOWN_TOPIC_ID)
