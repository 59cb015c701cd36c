"""Topic metadata at scale: create 100,000 partitions through the network, then page them all.

``run()`` starts the controller as a subprocess on a free loopback port, registers BROKERS
brokers on RACKS racks and unfences them, then creates TOPICS topics of PARTITIONS partitions
(replication factor RF) with CreateTopics v7 requests of BATCH topics each, one request at a
time, as an admin tool would. It then pages through every partition with DescribeTopicPartitions
v0 (the server's default limit of 2,000 partitions a response), twice: once decoding each
answer with kraftwire's generated codec and once with kafka-python 3's own
DescribeTopicPartitionsResponse, in alternating rounds; the best round of each is reported.
The raw response bodies of one paging are then decoded again by both codecs, without the
network, for the decode rates alone.

Lines (one JSON object each):

    metadata.create        partitions/s   anchor: null (no side-by-side reference for creation)
    metadata.describe paging, client decoding compared   partitions/s   anchor: the same paging
                           of the same server, answers decoded by kafka-python: the server's
                           time is in both, so the ratio compares the client decoders
    metadata.describe_decode client decoding alone   partitions/s   anchor: kafka-python
                           decoding the same raw bodies
    metadata.controller_rss per created partition   bytes/partition   anchor: null; target
                           <= 1024. The controller's
                           VmRSS (/proc/<pid>/status) after creating everything minus its VmRSS
                           with the brokers registered and no topics, over the partition count.

The controller runs with a long broker session timeout so that nobody is fenced while the run
is busy. The whole run takes about a minute on a 2-core machine. Every process is started here
and stopped by its PID; the controller also dies with this process and after CHILD_LIFETIME_S.

    python -m tools.bench metadata
    python -m tools.bench.metadata --topics 100    # a smaller run
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import (
    BrokerRegistrationRequest, Feature, Listener)
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.create_topics_response import CreateTopicsResponse
from protocol.generated.messages.describe_topic_partitions_request import (
    Cursor, DescribeTopicPartitionsRequest)
from protocol.generated.messages.describe_topic_partitions_response import DescribeTopicPartitionsResponse
from protocol.generated.messages.response_header import ResponseHeader
from protocol.primitives import random_uuid
from tools.bench.report import emit, note
from tools.broker.broker import PLAINTEXT
from tools.controller_process import ControllerProcess

BROKERS = 30
RACKS = 3
TOPICS = 1000
PARTITIONS = 100
RF = 3
BATCH = 10  # topics per CreateTopics request: 1,000 partitions
PAGE_LIMIT = 2000
ROUNDS = 3
CHILD_LIFETIME_S = 900
START_TIMEOUT_S = 30
CREATE_TOPICS_V = 7
DESCRIBE_V = 0

# A DescribeTopicPartitions answer body -> (partitions in it, the cursor of the next page).
PageDecoder = Callable[[bytes], tuple[int, tuple[str, int] | None]]


# --- the controller process ---------------------------------------------------------------

def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


# --- steps ------------------------------------------------------------------------------------

def register_brokers(client: KafkaClient, cluster_id: str, count: int) -> None:
    for broker_id in range(1, count + 1):
        response = client.request(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=cluster_id, incarnation_id=random_uuid(),
            listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=20000 + broker_id,
                                security_protocol=PLAINTEXT)],
            features=[Feature(name="metadata.version", min_supported_version=7, max_supported_version=25)],
            rack=f"rack-{broker_id % RACKS}", log_dirs=[random_uuid()], previous_broker_epoch=-1), 4)
        assert isinstance(response, BrokerRegistrationResponse)
        if response.error_code != Error.NONE:
            raise RuntimeError(f"broker {broker_id} could not register: {Error(response.error_code).name}")
        epoch = response.broker_epoch
        beat = client.request(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=epoch), 1)
        assert isinstance(beat, BrokerHeartbeatResponse)
        if beat.error_code != Error.NONE or beat.is_fenced:
            raise RuntimeError(f"broker {broker_id} was not unfenced")


def create_topics(client: KafkaClient, topics: int, partitions: int, batch: int) -> float:
    """Seconds taken to create every topic, one CreateTopics request at a time."""
    names = [f"bench-{i:05d}" for i in range(topics)]
    start = time.perf_counter()
    for i in range(0, topics, batch):
        request = CreateTopicsRequest(topics=[
            CreatableTopic(name=name, num_partitions=partitions, replication_factor=RF)
            for name in names[i:i + batch]], timeout_ms=60000)
        response = client.request(request, CREATE_TOPICS_V)
        assert isinstance(response, CreateTopicsResponse)
        failed = [(t.name, Error(t.error_code).name) for t in response.topics if t.error_code != Error.NONE]
        if failed:
            raise RuntimeError(f"CreateTopics failed: {failed[:5]}")
    return time.perf_counter() - start


def page_all(client: KafkaClient, decode: PageDecoder) -> tuple[float, int, list[bytes]]:
    """Page through every partition; ``decode(body)`` returns (partition count, next cursor).
    Returns the seconds taken, the partitions seen and the raw response bodies."""
    bodies: list[bytes] = []
    seen = 0
    cursor = None
    start = time.perf_counter()
    while True:
        correlation_id = client.send(DescribeTopicPartitionsRequest(
            topics=[], response_partition_limit=PAGE_LIMIT, cursor=cursor), DESCRIBE_V)
        frame = client.read_frame()
        header, pos = ResponseHeader.decode(frame, 1)
        if header.correlation_id != correlation_id:
            raise RuntimeError("answers out of order")
        body = frame[pos:]
        count, next_cursor = decode(body)
        seen += count
        bodies.append(body)
        if next_cursor is None:
            break
        cursor = Cursor(topic_name=next_cursor[0], partition_index=next_cursor[1])
    return time.perf_counter() - start, seen, bodies


def ours(body: bytes) -> tuple[int, tuple[str, int] | None]:
    response, _ = DescribeTopicPartitionsResponse.decode(body, DESCRIBE_V)
    cur = response.next_cursor
    return (sum(len(t.partitions) for t in response.topics),
            None if cur is None else (cur.topic_name, cur.partition_index))


def kafka_python(body: bytes) -> tuple[int, tuple[str, int] | None]:
    from kafka.protocol.admin.topics import DescribeTopicPartitionsResponse as KpResponse

    response = KpResponse.decode(body, version=DESCRIBE_V)
    cur = response.next_cursor
    return (sum(len(t.partitions) for t in response.topics),
            None if cur is None else (cur.topic_name, cur.partition_index))


def check_pages(bodies: list[bytes], topics: int, partitions: int) -> None:
    """Refuse to report rates for pages that do not hold every partition once, in order."""
    expected = [(f"bench-{t:05d}", p) for t in range(topics) for p in range(partitions)]
    listed = []
    for body in bodies:
        response, _ = DescribeTopicPartitionsResponse.decode(body, DESCRIBE_V)
        for t in response.topics:
            if t.error_code != Error.NONE:
                raise RuntimeError(f"{t.name}: {Error(t.error_code).name}")
            for p in t.partitions:
                if len(set(p.replica_nodes)) != RF or p.leader_id not in p.replica_nodes:
                    raise RuntimeError(f"{t.name}-{p.partition_index}: replicas {p.replica_nodes}, "
                                       f"leader {p.leader_id}")
                listed.append((t.name, p.partition_index))
    if listed != expected:
        raise RuntimeError(f"paging listed {len(listed)} partitions, expected {len(expected)} in order")


def decode_rate(decode: PageDecoder, bodies: list[bytes], partitions: int, min_seconds: float = 1.0) -> float:
    """Partitions decoded per second over whole passes through the bodies; best of 3."""
    best = 0.0
    for _ in range(3):
        passes = 0
        start = time.perf_counter()
        while True:
            for body in bodies:
                decode(body)
            passes += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = max(best, passes * partitions / elapsed)
    return best


def run(topics: int = TOPICS, partitions: int = PARTITIONS, brokers: int = BROKERS, batch: int = BATCH) -> None:
    total = topics * partitions
    with tempfile.TemporaryDirectory(prefix="kraftwire-bench-metadata-") as tmp:
        controller = ControllerProcess(Path(tmp), {"broker.session.timeout.ms": "1800000"},
                                       server_args=["--log-level", "WARNING"], lifetime_s=CHILD_LIFETIME_S,
                                       start_timeout_s=START_TIMEOUT_S).start()
        try:
            with KafkaClient(*controller.address, client_id="bench-metadata", timeout=120) as client:
                assert controller.cluster_id is not None, "an active controller has told its cluster id"
                register_brokers(client, controller.cluster_id, brokers)
                rss_before = rss_bytes(controller.pid)
                note(f"metadata: {brokers} brokers registered; creating {topics} topics x {partitions} "
                     f"partitions (RF {RF}), {batch} topics a request")
                elapsed = create_topics(client, topics, partitions, batch)
                rss_after = rss_bytes(controller.pid)
                emit("metadata.create", total / elapsed, None, "partitions/s",
                     anchor_is="none: no side-by-side reference for creating topics", partitions=total, seconds=round(elapsed, 3), topics_per_request=batch)

                best_ours = best_anchor = 0.0
                bodies: list[bytes] = []
                for _ in range(ROUNDS):
                    seconds, seen, bodies = page_all(client, ours)
                    if seen != total:
                        raise RuntimeError(f"paging saw {seen} partitions, expected {total}")
                    best_ours = max(best_ours, total / seconds)
                    seconds, seen, _ = page_all(client, kafka_python)
                    if seen != total:
                        raise RuntimeError(f"kafka-python's paging saw {seen} partitions, expected {total}")
                    best_anchor = max(best_anchor, total / seconds)
                check_pages(bodies, topics, partitions)
                # Both sides page the same server: the ratio compares the clients' decoding,
                # and the server's time is in both.
                emit("metadata.describe paging, client decoding compared", best_ours, best_anchor,
                     "partitions/s", pages=len(bodies), page_limit=PAGE_LIMIT,
                     anchor_is="the same paging of the same kraftwire server, answers decoded by kafka-python")
                o = decode_rate(ours, bodies, total)
                a = decode_rate(kafka_python, bodies, total)
                emit("metadata.describe_decode client decoding alone", o, a, "partitions/s",
                     bytes=sum(map(len, bodies)), anchor_is="kafka-python decoding the same bodies")
                emit("metadata.controller_rss per created partition", (rss_after - rss_before) / total, None,
                     "bytes/partition", anchor_is="none; the target is at most 1024", target_max=1024, rss_before=rss_before, rss_after=rss_after,
                     rss_now=rss_bytes(controller.pid))
        finally:
            controller.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.metadata")
    parser.add_argument("--topics", type=int, default=TOPICS)
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--brokers", type=int, default=BROKERS)
    parser.add_argument("--batch", type=int, default=BATCH, help="topics per CreateTopics request")
    args = parser.parse_args(argv)
    run(args.topics, args.partitions, args.brokers, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
