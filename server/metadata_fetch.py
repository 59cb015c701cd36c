"""Serving the metadata log as the KRaft leader: Fetch from observers, and DescribeQuorum.

Only committed batches are returned (the high watermark is the committed offset + 1), so an
observer never replays anything that could still be lost. A fetch that finds nothing new
waits up to MaxWaitMs for the next commit, as Kafka's long poll does. A voter that does not
lead sends fetchers to the leader it knows (NOT_LEADER_OR_FOLLOWER, with the leader's id,
epoch and endpoint).
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Protocol

from protocol.error_codes import Error
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.generated.messages.describe_quorum_response import (
    DescribeQuorumResponse, Listener, Node, PartitionData as QuorumPartition, ReplicaState,
    TopicData as QuorumTopic)
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest
from protocol.generated.messages.fetch_response import (
    EpochEndOffset, FetchableTopicResponse, FetchResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData)
from protocol.generated.messages.fetch_response import SnapshotId as FetchSnapshotId
from protocol.message import Message
from protocol.primitives import METADATA_TOPIC_ID
from server.metalog.segments import MetadataLog
from server.metalog.snapshots import SnapshotId
from protocol.primitives import ZERO_UUID
from server.raft.state import ReplicaProgress
from server.raft.voters import VoterSet

METADATA_TOPIC = "__cluster_metadata"
UNKNOWN_OFFSET = -1
# Observers are tracked for DescribeQuorum; one that stops fetching is forgotten after
# Kafka's observer session timeout, and made-up replica ids cannot grow the table past a cap.
OBSERVER_TIMEOUT_MS = 300_000
MAX_OBSERVERS = 10_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _failed(data: PartitionData, code: int) -> PartitionData:
    """An error answer carries no offsets, as KRaft's does: a client that compares the high
    watermark with its fetch offset (librdkafka) would otherwise take the error for the end
    of the partition."""
    data.error_code = code
    data.high_watermark = data.last_stable_offset = UNKNOWN_OFFSET
    return data


class QuorumView(Protocol):
    """What the fetch server reads of the Raft quorum (``server.quorum``), anew at each request:
    the epoch, the leader, the voters and where each listens change as the quorum does."""

    @property
    def epoch(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def voter_set(self) -> VoterSet: ...
    @property
    def committed_offset(self) -> int: ...

    def address_of(self, node_id: int) -> tuple[str, int] | None: ...

    def replica_progress(self) -> dict[int, ReplicaProgress] | None:
        """Each replica's progress, known to the leader only (None elsewhere)."""

    def wait(self, offset: int, timeout_s: float | None = None) -> asyncio.Future | None: ...


class MetadataFetchServer:
    def __init__(self, log: MetadataLog, quorum: QuorumView, cluster_id: str, node_id: int, listener_name: str,
                 latest_snapshot: Callable[[], SnapshotId | None]) -> None:
        """``listener_name``: the controller listener's, the same on every voter;
        ``latest_snapshot``: where fetchers behind the log start are sent."""
        self.log = log
        self.quorum = quorum
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.listener_name = listener_name
        self.latest_snapshot = latest_snapshot
        self.observers: dict[int, ReplicaProgress] = {}

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int:
        """-1 while the quorum has no known leader."""
        return self.quorum.leader_id

    @property
    def high_watermark(self) -> int:
        return self.quorum.committed_offset + 1

    @property
    def leading(self) -> bool:
        return self.leader_id == self.node_id

    def _leader_endpoints(self) -> list[tuple[int, str, int]]:
        """The node a fetcher should go to: this one when it leads, else the known leader."""
        found = self.quorum.address_of(self.leader_id) if self.leader_id >= 0 else None
        return [(self.leader_id, *found)] if found is not None else []

    # --- Fetch ---------------------------------------------------------------------------------
    def fetch(self, req: FetchRequest, version: int) -> FetchResponse | asyncio.Future[Message]:
        if version >= 12 and req.cluster_id is not None and req.cluster_id != self.cluster_id:
            return FetchResponse(error_code=Error.INCONSISTENT_CLUSTER_ID)
        response = self._read(req, version)
        if req.max_wait_ms <= 0 or self._has_data(response):
            return response
        # Nothing new: park the fetch until the next commit or MaxWaitMs, then read again.
        wake = self.quorum.wait(self.high_watermark, req.max_wait_ms / 1000)
        if wake is None:
            return self._read(req, version)
        result: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

        def reread(woken: asyncio.Future[int]) -> None:
            if not woken.cancelled():
                woken.exception()  # a lost leadership wakes it too: the read says what changed
            if not result.done():
                result.set_result(self._read(req, version))

        wake.add_done_callback(reread)
        return result

    @staticmethod
    def _has_data(response: FetchResponse) -> bool:
        return response.error_code != Error.NONE or any(
            p.records or p.error_code != Error.NONE or p.diverging_epoch.epoch != -1
            for t in response.responses for p in t.partitions)

    def _read(self, req: FetchRequest, version: int) -> FetchResponse:
        replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
        if sum(len(topic.partitions) for topic in req.topics) > 1:
            # KRaft serves one partition; Kafka refuses a Fetch naming more, repeats included,
            # rather than read the log once per name.
            return FetchResponse(error_code=Error.INVALID_REQUEST)
        response = FetchResponse()
        if version >= 16:
            response.node_endpoints = [NodeEndpoint(node_id=n, host=h, port=p) for n, h, p in self._leader_endpoints()]
        for topic in req.topics:
            is_metadata = topic.topic_id == METADATA_TOPIC_ID if version >= 13 else topic.topic == METADATA_TOPIC
            out = FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id)
            response.responses.append(out)
            for part in topic.partitions:
                if not is_metadata or part.partition != 0:
                    code = Error.UNKNOWN_TOPIC_ID if version >= 13 else Error.UNKNOWN_TOPIC_OR_PARTITION
                    out.partitions.append(PartitionData(partition_index=part.partition, error_code=code,
                                                        high_watermark=UNKNOWN_OFFSET))
                    continue
                out.partitions.append(self._read_partition(part, version, replica_id))
        return response

    def _read_partition(self, part: FetchPartition, version: int, replica_id: int) -> PartitionData:
        hw = self.high_watermark
        data = PartitionData(partition_index=0, high_watermark=hw, last_stable_offset=hw,
                             log_start_offset=self.log.start_offset)
        if version >= 12:
            data.current_leader = LeaderIdAndEpoch(leader_id=self.leader_id, leader_epoch=self.epoch)
        if not self.leading:
            return _failed(data, Error.NOT_LEADER_OR_FOLLOWER)
        if version >= 9 and part.current_leader_epoch > self.epoch:
            return _failed(data, Error.UNKNOWN_LEADER_EPOCH)
        if version >= 9 and 0 <= part.current_leader_epoch < self.epoch:
            return _failed(data, Error.FENCED_LEADER_EPOCH)
        offset = part.fetch_offset
        snapshot = self.latest_snapshot() if version >= 12 else None
        if offset < self.log.start_offset and snapshot is not None:
            # The records are gone: send the fetcher to the snapshot (FetchSnapshot). KRaft
            # checks this before the epoch, which the remaining log may know nothing of.
            data.snapshot_id = FetchSnapshotId(end_offset=snapshot.end_offset, epoch=snapshot.epoch)
            return data
        # An empty log (offset 0, epoch 0, what a new Kafka observer sends) agrees with any
        # log that starts at 0, as in Kafka's validateOffsetAndEpoch.
        empty = offset == 0 and self.log.start_offset == 0
        if version >= 12 and part.last_fetched_epoch >= 0 and not empty:
            # The fetcher's log must agree with ours up to where it stands; if not, tell it
            # where the epoch it last saw ends here so it can truncate (KIP-595).
            epoch, end = self.log.epoch_end_offset(part.last_fetched_epoch)
            if epoch < 0 and snapshot is not None:
                # Its epoch is older than every batch left: only the snapshot can help it.
                data.snapshot_id = FetchSnapshotId(end_offset=snapshot.end_offset, epoch=snapshot.epoch)
                return data
            if epoch != part.last_fetched_epoch or offset > end:
                data.diverging_epoch = EpochEndOffset(epoch=epoch, end_offset=end)
                return data
        if offset < self.log.start_offset or offset > self.log.end_offset:
            return _failed(data, Error.OFFSET_OUT_OF_RANGE)
        self._track(replica_id, offset)
        if offset < hw:
            data.records = self.log.read(offset, part.partition_max_bytes, up_to=hw - 1)
        return data

    def _track(self, replica_id: int, offset: int) -> None:
        if replica_id < 0 or replica_id in self.quorum.voter_set.ids:
            return
        now = _now_ms()
        progress = self.observers.get(replica_id)
        if progress is None:
            if len(self.observers) >= MAX_OBSERVERS:
                self._forget_observers(now)
            progress = self.observers[replica_id] = ReplicaProgress()
        progress.log_end_offset = offset
        progress.last_fetch_ms = now
        if offset >= self.high_watermark:
            progress.last_caught_up_ms = now

    def _forget_observers(self, now: int) -> None:
        """Drop observers silent for the session timeout; at the cap, the longest silent."""
        for rid in [rid for rid, p in self.observers.items() if now - p.last_fetch_ms > OBSERVER_TIMEOUT_MS]:
            del self.observers[rid]
        if len(self.observers) >= MAX_OBSERVERS:
            for rid, _ in sorted(self.observers.items(), key=lambda item: item[1].last_fetch_ms)[:MAX_OBSERVERS // 10]:
                del self.observers[rid]

    # --- DescribeQuorum ------------------------------------------------------------------------
    def describe_quorum(self, req: DescribeQuorumRequest, version: int) -> DescribeQuorumResponse:
        response = DescribeQuorumResponse()
        for t in req.topics:
            out = QuorumTopic(topic_name=t.topic_name)
            response.topics.append(out)
            for p in t.partitions:
                if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                    out.partitions.append(QuorumPartition(partition_index=p.partition_index,
                                                          error_code=Error.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                part = self._quorum_partition()
                if version < 2:
                    # Directory ids came with v2 (KIP-853): older answers carry none, as Kafka's.
                    for replica in (*part.current_voters, *part.observers):
                        replica.replica_directory_id = ZERO_UUID
                out.partitions.append(part)
        if version >= 2:
            # Where the voters, this node and the leader listen; this node's own endpoint is its
            # advertised listener, whatever the voters say.
            known = {*self.quorum.voter_set.ids, self.node_id, self.leader_id}
            endpoints = {n: address for n in known if n >= 0 and (address := self.quorum.address_of(n)) is not None}
            response.nodes = [Node(node_id=n, listeners=[Listener(name=self.listener_name, host=h, port=p)])
                              for n, (h, p) in sorted(endpoints.items())]
        return response

    def _quorum_partition(self) -> QuorumPartition:
        progress = self.quorum.replica_progress()
        if not self.leading or progress is None:
            # Only the leader knows every replica's progress, as in Kafka.
            return QuorumPartition(partition_index=0, error_code=Error.NOT_LEADER_OR_FOLLOWER,
                                   leader_id=self.leader_id, leader_epoch=self.epoch)

        keys = {k.id: k.directory_id for k in self.quorum.voter_set.keys}

        def state(rid: int, p: ReplicaProgress | None) -> ReplicaState:
            directory = keys.get(rid, p.directory_id if p is not None else ZERO_UUID)
            if p is None:
                return ReplicaState(replica_id=rid, replica_directory_id=directory, log_end_offset=-1,
                                    last_fetch_timestamp=-1, last_caught_up_timestamp=-1)
            return ReplicaState(replica_id=rid, replica_directory_id=directory, log_end_offset=p.log_end_offset,
                                last_fetch_timestamp=p.last_fetch_ms, last_caught_up_timestamp=p.last_caught_up_ms)

        # Observers: controllers fetching from the Raft core (joining ones), then brokers.
        watchers = {**{rid: p for rid, p in progress.items() if rid not in keys}, **self.observers}
        voters = [state(v, progress.get(v)) for v in sorted(keys)]
        observers = [state(rid, p) for rid, p in sorted(watchers.items()) if rid not in keys]
        return QuorumPartition(partition_index=0, leader_id=self.node_id, leader_epoch=self.epoch,
                               high_watermark=self.high_watermark, current_voters=voters, observers=observers)
