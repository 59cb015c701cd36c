"""Shared pieces of the metadata log tests: comparable controller state, loading a data dir the
way the server does, a raw-socket KRaft observer, and broker/admin requests over the wire."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Iterable

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.generated.messages.create_topics_request import (
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest)
from protocol.generated.messages.delete_topics_request import DeleteTopicState, DeleteTopicsRequest
from protocol.generated.messages.describe_quorum_request import (
    DescribeQuorumRequest, PartitionData as QuorumPartitionRequest, TopicData as QuorumTopicRequest)
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from protocol.generated.messages.fetch_response import PartitionData
from protocol.generated.messages.fetch_snapshot_request import (
    FetchSnapshotRequest, PartitionSnapshot, SnapshotId, TopicSnapshot)
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.primitives import METADATA_TOPIC_ID
from protocol.records import iter_batches, parse_metadata_record, read_batch_header
from server.controller.clock import ManualClock
from server.controller.quorum_controller import QuorumController
from server.metalog.segments import PARTITION_DIR, SUFFIX, MetadataLog
from server.metalog.snapshots import load_latest_snapshot
from tests.support.processes import MAX_LIFETIME_S, PYTHON
from tests.support.wire import HEARTBEAT_V, REGISTRATION_V, heartbeat_request, registration_request
from tools.controller_process import ROOT, ControllerProcess
from tools.processes import bounded_child

METADATA_TOPIC = "__cluster_metadata"
FETCH_V = 17
FETCH_SNAPSHOT_V = 1
DESCRIBE_QUORUM_V = 2
METADATA_V = 12
CREATE_TOPICS_V = 7


# --- state ----------------------------------------------------------------------------------------

def state_of(qc: QuorumController) -> dict:
    """Every replayed fact of a controller as plain data, so two controllers compare with ==.

    Soft state (leases) is left out: it is not in the log. The derived replication indexes are
    included, keyed by partition, since replay alone must keep them right.
    """
    brokers = {
        b.broker_id: {
            "epoch": b.epoch, "incarnation": b.incarnation_id, "rack": b.rack, "fenced": b.fenced,
            "in_controlled_shutdown": b.in_controlled_shutdown, "log_dirs": list(b.log_dirs),
            "controlled_shutdown_offset": b.controlled_shutdown_offset,
            "features": dict(sorted(b.features.items())),
            "endpoints": [(e.name, e.host, e.port, e.security_protocol) for e in b.endpoints],
        } for b in qc.cluster.brokers.values()}
    # A controller registers again under a new incarnation at each start (KIP-919), so the
    # same cluster loaded before and after a restart differs there, and only there, by design.
    controllers = {
        c.controller_id: {
            "features": dict(sorted(c.features.items())),
            "endpoints": [(e.name, e.host, e.port, e.security_protocol) for e in c.endpoints],
        } for c in qc.cluster.controllers.values()}
    r = qc.replication
    topics = {}
    for t in r.topics.values():
        topics[t.name] = {
            "id": t.topic_id,
            "partitions": [partition_state(p) for p in t.partitions],
        }
    key = lambda p: (r.topics[p.topic_id].name, p.partition_id)  # noqa: E731
    state = {
        "brokers": brokers,
        "controllers": controllers,
        "topics": topics,
        "names": dict(r.names),
        "partition_count": r.partition_count,
        "isr_of": {b: sorted(map(key, ps)) for b, ps in r.isr_of.items() if ps},
        "leaderless": sorted(map(key, r.leaderless)),
        "reassigning": sorted(map(key, r.reassigning)),
        "configs": {k: dict(v) for k, v in qc.configs._configs.items()},
        "features": dict(qc.features.finalized),
    }
    return state


def partition_state(p) -> dict:
    return {name: getattr(p, name) for name in p.__slots__}


def new_controller(cluster_id: str = "", node_id: int = -1) -> QuorumController:
    return QuorumController(cluster_id, node_id, ManualClock())


def replay_values(qc: QuorumController, batches: Iterable[tuple]) -> None:
    """Replay (header, [(offset, value)]) pairs as the server's start-up does."""
    for header, values in batches:
        if not header.is_control:
            for offset, value in values:
                qc.replay(parse_metadata_record(value)[0], offset)
        qc.offsets.skip_to(header.last_offset + 1)


def replay_bytes(qc: QuorumController, data: bytes) -> int:
    """Replay whole batches from raw log bytes (a Fetch answer); returns the batches seen."""
    count = 0
    for batch, _ in iter_batches(data):
        if batch.base_offset != qc.next_offset:
            raise AssertionError(f"batch at offset {batch.base_offset}, expected {qc.next_offset}")
        if not batch.is_control:
            for rec in batch.records:
                qc.replay(parse_metadata_record(rec.value)[0], batch.base_offset + rec.offset_delta)
        qc.offsets.skip_to(batch.next_offset)
        count += 1
    return count


def replay_snapshot(qc: QuorumController, records, end_offset: int) -> None:
    for record, _ in records:
        qc.replay(record, end_offset - 1)
    qc.offsets.skip_to(end_offset)


def load_data_dir(data_dir: Path) -> QuorumController:
    """A controller loaded from a stopped server's metadata.log.dir: the latest snapshot, then
    the log after it, as ControllerServer loads itself (recovery included)."""
    log = MetadataLog.open(data_dir)
    try:
        qc = new_controller()
        loaded = load_latest_snapshot(log.directory)
        if loaded is not None:
            replay_snapshot(qc, loaded[1], loaded[0].end_offset)
        replay_values(qc, log.record_values(qc.next_offset))
        return qc
    finally:
        log.close()


def partition_dir(data_dir: Path) -> Path:
    return Path(data_dir) / PARTITION_DIR


def segment_paths(data_dir: Path) -> list[Path]:
    return sorted(partition_dir(data_dir).glob("*" + SUFFIX))


def batch_positions(data: bytes) -> list[tuple[int, int, int]]:
    """(byte position, size, base offset) of every whole batch in segment bytes."""
    out = []
    pos = 0
    while len(data) - pos >= 61:
        header = read_batch_header(data, pos)
        if pos + header.size > len(data):
            break
        out.append((pos, header.size, header.base_offset))
        pos += header.size
    return out


# --- the wire (requests built by tests.support.wire) ---------------------------------------------

def active_brokers(client: KafkaClient, cluster_id: str, ids: Iterable[int]) -> dict[int, int]:
    """Register and unfence brokers; returns their epochs."""
    epochs = {}
    for b in ids:
        reg = client.request(registration_request(cluster_id, b), REGISTRATION_V)
        assert reg.error_code == Error.NONE, reg
        hb = client.request(heartbeat_request(b, reg.broker_epoch), HEARTBEAT_V)
        assert (hb.error_code, hb.is_fenced) == (Error.NONE, False), hb
        epochs[b] = reg.broker_epoch
    return epochs


def create_topics_request(*topics: tuple[str, int], rf: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreatableTopic(name=n, num_partitions=p, replication_factor=rf)
                                       for n, p in topics])


def create_topic(client: KafkaClient, name: str, partitions: int, rf: int = 1) -> None:
    response = client.request(create_topics_request((name, partitions), rf=rf), CREATE_TOPICS_V)
    assert [t.error_code for t in response.topics] == [Error.NONE], response


def build_state(client: KafkaClient, cluster_id: str, topics: int = 12, first_broker: int = 1) -> None:
    """A varied metadata state over the wire: brokers (one fenced, one gone), topics with
    replication, configs, more partitions, a deleted topic."""
    ids = list(range(first_broker, first_broker + 5))
    epochs = active_brokers(client, cluster_id, ids)
    for i in range(topics):
        configs = [CreatableTopicConfig(name="cleanup.policy", value="compact")] if i % 4 == 0 else []
        response = client.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=f"state-{first_broker}-{i:03d}", num_partitions=1 + i % 4, replication_factor=3,
            configs=configs)]), CREATE_TOPICS_V)
        assert [t.error_code for t in response.topics] == [Error.NONE], response
    response = client.request(IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=2, resource_name=f"state-{first_broker}-001", configs=[
            AlterableConfig(name="retention.ms", config_operation=0, value="3600000"),
            AlterableConfig(name="min.insync.replicas", config_operation=0, value="2")]),
        AlterConfigsResource(resource_type=4, resource_name=str(first_broker), configs=[
            AlterableConfig(name="log.retention.ms", config_operation=0, value="7200000")])]), 1)
    assert [r.error_code for r in response.responses] == [Error.NONE, Error.NONE], response
    response = client.request(CreatePartitionsRequest(topics=[CreatePartitionsTopic(
        name=f"state-{first_broker}-002", count=7, assignments=None)], timeout_ms=1000), 3)
    assert [r.error_code for r in response.results] == [Error.NONE], response
    response = client.request(DeleteTopicsRequest(topics=[DeleteTopicState(name=f"state-{first_broker}-003")],
                                                  timeout_ms=1000), 6)
    assert [r.error_code for r in response.responses] == [Error.NONE], response
    fence, leave = ids[-1], ids[-2]
    response = client.request(BrokerHeartbeatRequest(broker_id=fence, broker_epoch=epochs[fence],
                                                      current_metadata_offset=1 << 40, want_fence=True), HEARTBEAT_V)
    assert (response.error_code, response.is_fenced) == (Error.NONE, True), response
    response = client.request(UnregisterBrokerRequest(broker_id=leave), 0)
    assert response.error_code == Error.NONE, response


def metadata_topics(client: KafkaClient) -> dict[str, list[tuple]]:
    """name -> [(partition, leader, replicas, isr)] as the controller answers Metadata."""
    response = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), METADATA_V)
    return {t.name: sorted((p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                           for p in t.partitions)
            for t in response.topics}


def metadata_view(qc: QuorumController) -> dict[str, list[tuple]]:
    """What metadata_topics would show for a replayed controller."""
    return {t.name: sorted((p.partition_id, p.leader, list(p.replicas), list(p.isr)) for p in t.partitions)
            for t in qc.replication.topics.values()}


# --- a KRaft observer over a raw socket -------------------------------------------------------------

def fetch_request(offset: int, *, version: int = FETCH_V, replica_id: int = -1, last_fetched_epoch: int = -1,
                  max_wait_ms: int = 0, max_bytes: int = 1 << 20, cluster_id: str | None = None,
                  current_leader_epoch: int = -1) -> FetchRequest:
    """An observer's Fetch of the metadata partition; the replica id goes in the top-level
    field before v15 and in ReplicaState from v15 on, as KRaft sends it."""
    state = version >= 15
    return FetchRequest(
        cluster_id=cluster_id, replica_id=-1 if state else replica_id,
        replica_state=ReplicaState(replica_id=replica_id if state else -1),
        max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
        topics=[FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[
            FetchPartition(partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                           last_fetched_epoch=last_fetched_epoch, partition_max_bytes=max_bytes)])])


def fetch(client: KafkaClient, offset: int, version: int = FETCH_V, **kwargs) -> PartitionData:
    response = client.request(fetch_request(offset, version=version, **kwargs), version)
    assert response.error_code == Error.NONE, response
    [part] = [p for t in response.responses for p in t.partitions]
    return part


def fetch_snapshot_bytes(client: KafkaClient, end_offset: int, epoch: int, chunk: int) -> tuple[bytes, int]:
    """The whole snapshot file in chunks of at most ``chunk`` bytes; returns it and the number
    of requests it took."""
    parts = []
    position = 0
    requests = 0
    while True:
        request = FetchSnapshotRequest(replica_id=-1, max_bytes=chunk, topics=[TopicSnapshot(
            name=METADATA_TOPIC, partitions=[PartitionSnapshot(
                partition=0, current_leader_epoch=-1, position=position,
                snapshot_id=SnapshotId(end_offset=end_offset, epoch=epoch))])])
        response = client.request(request, FETCH_SNAPSHOT_V)
        requests += 1
        [p] = [p for t in response.topics for p in t.partitions]
        assert (response.error_code, p.error_code) == (Error.NONE, Error.NONE), response
        assert p.position == position
        data = p.unaligned_records or b""
        assert 0 < len(data) <= chunk
        parts.append(data)
        position += len(data)
        if position >= p.size:
            assert position == p.size
            return b"".join(parts), requests


def observe_log(client: KafkaClient, qc: QuorumController, *, max_bytes: int = 1 << 20,
                replica_id: int = -1) -> PartitionData:
    """Fetch from ``qc.next_offset`` up to the high watermark, replaying as it goes."""
    while True:
        part = fetch(client, qc.next_offset, max_bytes=max_bytes, replica_id=replica_id)
        assert part.error_code == Error.NONE, part
        assert part.snapshot_id.end_offset == -1, part.snapshot_id
        before = qc.next_offset
        replay_bytes(qc, part.records or b"")
        if qc.next_offset >= part.high_watermark:
            assert qc.next_offset == part.high_watermark
            return part
        assert qc.next_offset > before, f"no progress at offset {before}"


def describe_quorum(client: KafkaClient):
    response = client.request(DescribeQuorumRequest(topics=[QuorumTopicRequest(
        topic_name=METADATA_TOPIC, partitions=[QuorumPartitionRequest(partition_index=0)])]), DESCRIBE_QUORUM_V)
    [p] = [p for t in response.topics for p in t.partitions]
    return p


# --- processes ------------------------------------------------------------------------------------

def run_server_once(config_path: Path, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """Run ``python -m server --config`` to completion (a start-up that must fail)."""
    return subprocess.run([PYTHON, "-m", "server", "--config", str(config_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=bounded_child(MAX_LIFETIME_S),
                          stdin=subprocess.DEVNULL)


class LimitedController(ControllerProcess):
    """A controller whose process may not grow any file beyond ``file_size_limit`` bytes
    (RLIMIT_FSIZE), with SIGXFSZ ignored so such a write fails with EFBIG instead of killing it."""

    file_size_limit: int | None = None

    def prepare_child(self) -> None:
        super().prepare_child()
        if self.file_size_limit is not None:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_size_limit, self.file_size_limit))


def process_rlimit_fsize(pid: int) -> int:
    """The RLIMIT_FSIZE soft limit of a running process, as /proc reports it (-1: unlimited)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max file size"):
            value = line.split()[3]
            return -1 if value == "unlimited" else int(value)
    raise AssertionError("no file size limit line")



def state_diff(a, b, path: str = "", limit: int = 10) -> list[str]:
    """Where two states differ, as 'path: left != right' lines (the first ``limit``)."""
    out: list[str] = []

    def walk(x, y, where: str) -> None:
        if len(out) >= limit or x == y:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y), key=repr):
                if k not in x or k not in y:
                    out.append(f"{where}/{k}: only on the {'right' if k not in x else 'left'}")
                else:
                    walk(x[k], y[k], f"{where}/{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (p, q) in enumerate(zip(x, y)):
                walk(p, q, f"{where}[{i}]")
        else:
            out.append(f"{where}: {x!r} != {y!r}")

    walk(a, b, path)
    return out


# Brokers keep their leases however slowly a test runs.
LONG_SESSION = {"broker.session.timeout.ms": "120000"}


def flip(path: Path, position: int) -> None:
    """Invert one byte of a file in place."""
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0xFF]))
