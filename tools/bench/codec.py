"""Codec throughput against kafka-python 3's engine on the same values, in the same process."""

from __future__ import annotations

from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic)
from protocol.primitives import random_uuid
from tools.bench.kafka_python_engine import kafka_python_class
from tools.bench.report import emit, paired_rate


def heartbeat() -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(broker_id=7, broker_epoch=4711, current_metadata_offset=123456,
                                  want_fence=False, want_shut_down=False)


def describe_response(topics: int = 10, partitions: int = 100) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(topics=[
        DescribeTopicPartitionsResponseTopic(
            name=f"topic-{t:04d}", topic_id=random_uuid(),
            partitions=[DescribeTopicPartitionsResponsePartition(
                partition_index=p, leader_id=p % 30, leader_epoch=3,
                replica_nodes=[p % 30, (p + 1) % 30, (p + 2) % 30],
                isr_nodes=[p % 30, (p + 1) % 30, (p + 2) % 30])
                for p in range(partitions)])
        for t in range(topics)])


def run() -> None:
    cases = [
        ("BrokerHeartbeatRequest v1", heartbeat(), 1, "msg/s"),
        ("DescribeTopicPartitionsResponse v0 10x100", describe_response(), 0, "msg/s"),
    ]
    from kafka.protocol.admin.topics import DescribeTopicPartitionsResponse as KpDescribe

    for label, ours, version, unit in cases:
        anchor_cls = KpDescribe if label.startswith("Describe") else kafka_python_class(ours.NAME)
        raw = ours.encode(version)
        theirs = anchor_cls.decode(raw, version=version)
        if theirs.encode() != raw or type(ours).decode(raw, version)[0] != ours:
            raise SystemExit(f"{label}: the two codecs disagree; refusing to time them")
        cls = type(ours)
        o, a = paired_rate(lambda: cls.decode(raw, version), lambda: anchor_cls.decode(raw, version=version))
        emit(f"codec.decode {label}", o, a, unit,
             anchor_is="kafka-python 3's schema engine decoding the same bytes, same process")
        o, a = paired_rate(lambda: ours.encode(version), theirs.encode)
        emit(f"codec.encode {label}", o, a, unit,
             anchor_is="kafka-python 3's schema engine encoding the same message, same process")
