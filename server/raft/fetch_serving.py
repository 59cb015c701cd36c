"""The leader's side of reading the log: Fetch from every fetcher by its policy
(``server.raft.fetch``), FetchSnapshot, DescribeQuorum, parked fetches and the high watermark
they move."""

from __future__ import annotations

from dataclasses import replace

from protocol.error_codes import Error
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_response import FetchResponse, SnapshotId as FetchSnapshotId
from protocol.generated.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.generated.messages.fetch_snapshot_response import FetchSnapshotResponse
from server.raft import messages as rpc
from server.raft.base import CoreBase, NotLeader
from server.raft.describe import QuorumView, describe_quorum
from server.raft.fetch import FetchPolicy, LeaderView, has_answer, policy_of, read_for_reader
from server.raft.leader import forget_observers, quorum_high_watermark, reported_high_watermark, track_fetch
from server.raft.outputs import BecameLeader
from server.raft.replication import fetch_position
from server.raft.state import Leader, ParkedFetch, ReplicaProgress
from server.raft.types import OffsetAndEpoch, ReplicaKey


class FetchServing(CoreBase):
    """The Fetch, FetchSnapshot and DescribeQuorum handlers of the core, as the leader answers them."""

    def _on_fetch_request(self, source: int, correlation_id: int, request: FetchRequest, now: int,
                          version: int) -> None:
        if not self.cluster_id_matches(rpc.fetch_replica_id(request), request.cluster_id, request.NAME):
            self.respond(source, correlation_id, FetchResponse(error_code=Error.INCONSISTENT_CLUSTER_ID))
            return
        policy = policy_of(request, self.voters)
        fetch = ParkedFetch(source, correlation_id, now + request.max_wait_ms, request, version, policy)
        if policy is FetchPolicy.READER:
            self._serve_reader(fetch, now, waited=False)
            return
        part = rpc.only_partition(request.topics, "topic")
        if part is None:
            self.respond(source, correlation_id, FetchResponse(error_code=Error.INVALID_REQUEST))
            return
        if request.max_wait_ms < 0 or part.fetch_offset < 0 or part.last_fetched_epoch < 0 \
                or part.last_fetched_epoch > part.current_leader_epoch:
            self.answer_fetch(fetch, self.fetch_error(Error.INVALID_REQUEST))
            return
        state = self.state
        error = self.leader_error(part.current_leader_epoch)
        if error != Error.NONE or not isinstance(state, Leader):
            self.answer_fetch(fetch, self.fetch_error(error))
            return
        replica = rpc.fetch_replica_key(request)
        response = self._read_for(state, replica, part.fetch_offset, part.last_fetched_epoch, now)
        if has_answer(response) or request.max_wait_ms == 0:
            self.answer_fetch(fetch, response)
            return
        state.parked.append(fetch)

    def _serve_reader(self, fetch: ParkedFetch, now: int, waited: bool) -> None:
        """A fetcher that is no Raft replica (``server.raft.fetch``): answered at once when
        there is something to say, else parked until the next commit or its MaxWaitMs."""
        state = self.state
        leading = isinstance(state, Leader) and not self.shutting_down
        view = LeaderView(self.epoch, self.leader_id, leading, self.high_watermark, self.address_of(self.leader_id))
        read = read_for_reader(self.log, fetch.request, fetch.version, view)
        if read.progress is not None and isinstance(state, Leader):
            # Caught up means at the high watermark: a reader is never sent further.
            track_fetch(state, rpc.fetch_replica_key(fetch.request), read.progress, self.high_watermark,
                        self.voter_set, self.node_id, self.config.fetch_timeout_ms, now)
        if waited or not isinstance(state, Leader) or fetch.request.max_wait_ms <= 0 or has_answer(read.response):
            self.respond(fetch.source, fetch.correlation_id, read.response)
        else:
            state.parked.append(fetch)

    def _on_describe_quorum_request(self, source: int, correlation_id: int, request: DescribeQuorumRequest,
                                    now: int, version: int) -> None:
        state = self.state
        progress = None
        if isinstance(state, Leader):
            forget_observers(state, self.voters, now)
            # Kept in monotonic time, reported in wall-clock time.
            shift = self.wall_time(now) - now
            progress = {replica: replace(p, last_fetch_ms=p.last_fetch_ms + shift if p.last_fetch_ms >= 0 else -1,
                                         last_caught_up_ms=p.last_caught_up_ms + shift
                                         if p.last_caught_up_ms >= 0 else -1)
                        for replica, p in self.replica_progress(now).items()}
        # This node's own endpoint is its advertised listener, whatever the voters say.
        known = {*self.voters, self.node_id, self.leader_id}
        endpoints = {n: address for n in known if n >= 0 and (address := self.address_of(n)) is not None}
        self.respond(source, correlation_id, describe_quorum(request, version, QuorumView(
            self.node_id, self.epoch, self.leader_id, self.high_watermark,
            {key.id: key.directory_id for key in self.voter_set.keys}, progress, self.config.listener_name,
            endpoints)))

    def replica_progress(self, now_ms: int) -> dict[int, ReplicaProgress]:
        """Every replica that fetched in this epoch, and the leader itself, for DescribeQuorum
        (which only the leader answers)."""
        state = self.state
        if not isinstance(state, Leader):
            raise NotLeader(f"node {self.node_id} is not the leader (leader {self.leader_id}, epoch {self.epoch})")
        progress = {replica: replace(p) for replica, p in state.replicas.items()}
        progress[self.node_id] = ReplicaProgress(self.log.end_offset, now_ms, now_ms, self.local_key.directory_id)
        return progress

    def _track_fetch(self, state: Leader, key: ReplicaKey, offset: int, now: int) -> None:
        track_fetch(state, key, offset, self.log.end_offset, self.voter_set, self.node_id,
                    self.config.fetch_timeout_ms, now)

    def _read_for(self, state: Leader, replica: ReplicaKey, offset: int, last_epoch: int,
                  now: int) -> FetchResponse:
        position = fetch_position(self.log, offset, last_epoch)
        address = self.address_of(self.node_id)
        high_watermark = reported_high_watermark(state, self.high_watermark)
        if position.snapshot is not None:
            response = rpc.fetch_response(Error.NONE, self.epoch, self.node_id, high_watermark,
                                          self.log.start_offset, leader_address=address)
            response.responses[0].partitions[0].snapshot_id = FetchSnapshotId(end_offset=position.snapshot.offset,
                                                                              epoch=position.snapshot.epoch)
            return response
        if position.diverging is not None:
            return rpc.fetch_response(Error.NONE, self.epoch, self.node_id, high_watermark,
                                      self.log.start_offset, diverging=position.diverging, leader_address=address)
        self._track_fetch(state, replica, offset, now)
        if replica.id in self.voters:
            self._update_high_watermark(state, now)
        records = self.log.read(offset, self.config.fetch_max_bytes) if offset < self.log.end_offset else b""
        # This fetch may have moved the high watermark.
        return rpc.fetch_response(Error.NONE, self.epoch, self.node_id,
                                  reported_high_watermark(state, self.high_watermark), self.log.start_offset,
                                  records, leader_address=address)

    def _answer_parked(self, state: Leader, now: int, appended: bool = False, committed: bool = False) -> None:
        """Answer the parked fetches that something new is for: those whose MaxWaitMs ran
        out; a replica's on new records (``appended``) or a new high watermark; a reader's
        only on a new high watermark, since it reads committed batches alone."""
        if not state.parked:
            return
        waiting, state.parked = state.parked, []
        for parked in waiting:
            due = parked.deadline <= now
            reader = parked.policy is FetchPolicy.READER
            if not (due or committed or (appended and not reader)):
                state.parked.append(parked)
            elif reader:
                self._serve_reader(parked, now, waited=due)  # parked again while nothing committed
            else:
                part = parked.request.topics[0].partitions[0]
                self.answer_fetch(parked, self._read_for(state, rpc.fetch_replica_key(parked.request),
                                                         part.fetch_offset, part.last_fetched_epoch, now))

    def _update_high_watermark(self, state: Leader, now: int) -> None:
        candidate = quorum_high_watermark(state, self.voters, self.node_id, self.log.flushed_offset,
                                          self.high_watermark)
        if candidate is None:
            return
        self._advance_high_watermark(candidate)
        if not state.announced:
            state.announced = True
            self.outputs.append(BecameLeader(self.epoch, state.epoch_start_offset))
        self.membership.committed(state, now)
        self._answer_parked(state, now, committed=True)

    def _on_fetch_snapshot_request(self, source: int, correlation_id: int, request: FetchSnapshotRequest,
                                   now: int) -> None:
        if not self.cluster_id_matches(request.replica_id, request.cluster_id, request.NAME):
            self.respond(source, correlation_id, FetchSnapshotResponse(error_code=Error.INCONSISTENT_CLUSTER_ID))
            return
        part = rpc.only_partition(request.topics, "name")
        if part is None:
            self.respond(source, correlation_id, FetchSnapshotResponse(error_code=Error.INVALID_REQUEST))
            return
        snapshot = OffsetAndEpoch(part.snapshot_id.end_offset, part.snapshot_id.epoch)

        def reply(error: int, size: int = 0, chunk: bytes = b"") -> None:
            self.respond(source, correlation_id, rpc.fetch_snapshot_response(
                error, self.epoch, self.leader_id, snapshot, size, part.position, chunk))

        state = self.state
        # An observer that knows no epoch (-1) is not checked against one, as a broker's
        # replica fetcher is not.
        epoch = part.current_leader_epoch if part.current_leader_epoch >= 0 else self.epoch
        error = self.leader_error(epoch)
        if error != Error.NONE or not isinstance(state, Leader):
            reply(error)
            return
        found = self.log.read_snapshot(snapshot, max(part.position, 0), request.max_bytes)
        if found is None:
            reply(Error.SNAPSHOT_NOT_FOUND)
            return
        chunk, size = found
        if not 0 <= part.position < size:
            reply(Error.POSITION_OUT_OF_RANGE)
            return
        # It counts as following for check quorum, but its log end is unknown until it
        # fetches again after installing the snapshot.
        self._track_fetch(state, ReplicaKey(request.replica_id, part.replica_directory_id), -1, now)
        reply(Error.NONE, size, chunk)
