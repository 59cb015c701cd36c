"""The KRaft quorum state machine for the __cluster_metadata partition, without I/O.

``RaftCore`` takes received requests and responses, the controller's prepared batches and the
passing of time (every call carries ``now_ms``; nothing here reads a clock), changes the log
through ``RaftLog`` and leaves what the shell must do in ``outputs`` (see
``server.raft.outputs``). The leader owns the log's offsets: the controller's batches take
theirs from ``next_offset`` and wait in the leader's state until the core's next step appends
them (``prepare_append``, Kafka's accumulator), and the quorum records the leader writes itself
(LeaderChange, a voter change) take the next ones in the same order. Behaviour follows
Kafka's KafkaRaftClient: KIP-595 elections and Fetch-based replication (FetchSnapshot for a
follower behind the leader's log start), KIP-996 pre-vote, a leader that resigns when a
majority stops fetching from it (check quorum), graceful resignation with EndQuorumEpoch, and
KIP-853 voter changes (``server.raft.membership``); a replica outside the voter set observes.
Every fetcher of the log is served here (``server.raft.fetch``), voters, joining controllers,
brokers and tools alike, each by its policy.
A single voter is a quorum of one: it stands and wins at once, and commits what it has
flushed, through the same states and outputs as any leader.

The core handles the RPCs and the poll loop; it is composed of ``Transitions`` (state changes
and their persistence), ``Outbox`` (requests in flight and backoff), ``Membership`` and the
leader's bookkeeping in ``server.raft.leader``.

Every reply to a request is built after the state it reports is persisted, and a response is
acted on only if it answers the request in flight now (correlation ids), so duplicated, late
or reordered messages cannot count twice or land in the wrong election.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, Callable

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.generated.messages.update_raft_voter_request import KRaftVersionFeature as UpdateKRaftVersionFeature
from protocol.generated.messages.update_raft_voter_request import Listener as UpdateListener
from protocol.generated.messages.update_raft_voter_request import UpdateRaftVoterRequest
from protocol.generated.messages.update_raft_voter_response import UpdateRaftVoterResponse
from protocol.generated.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.generated.messages.begin_quorum_epoch_response import BeginQuorumEpochResponse
from protocol.generated.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.generated.messages.end_quorum_epoch_response import EndQuorumEpochResponse
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_response import FetchResponse
from protocol.generated.messages.fetch_response import SnapshotId as FetchSnapshotId
from protocol.generated.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.generated.messages.fetch_snapshot_response import FetchSnapshotResponse
from protocol.generated.messages.vote_request import VoteRequest
from protocol.generated.messages.vote_response import VoteResponse
from protocol.api_keys import APIS
from protocol.message import Message, api_key_of
from protocol.primitives import ZERO_UUID
from protocol.records import read_batch_header
from server.raft import messages as rpc
from server.raft.describe import QuorumView, describe_quorum
from server.raft.fetch import FetchPolicy, LeaderView, fit_to_version, has_answer, policy_of, read_for_reader
from server.raft.leader import (
    check_quorum, forget_observers, quorum_high_watermark, reported_high_watermark, track_fetch)
from server.raft.log import RaftLog, split_batches
from server.raft.membership import Membership
from server.raft.outbox import Kind, Outbox
from server.raft.outputs import (
    AppendFailed, BecameLeader, Committed, ControlAppended, LostLeadership, Output, Refused, SendRequest,
    SendResponse, SnapshotInstalled)
from server.raft.quorum_config import QuorumConfig
from server.raft.replication import (
    bootstrap_quorum_records, control_batch, fetch_position, leader_change_batch, successor_backoff,
    truncation_offset)
from server.raft.state import (
    NO_ID, Candidate, Election, EpochState, Follower, Leader, ParkedFetch, Prospective, ReplicaProgress, Resigned,
    SnapshotDownload, Unattached)
from server.raft.transitions import TransitionHooks, Transitions
from server.raft.voters import (
    KRAFT_VERSION_DYNAMIC, SUPPORTED_KRAFT_VERSIONS, VoterSet, quorum_messages, read_history, snapshot_quorum_messages)
from server.raft.types import OffsetAndEpoch, ReplicaKey

class NotLeader(Exception):
    """A proposal reached a node that is not the leader."""

def _any_kind(handler: Callable[[int, Any, int], bool]) -> Callable[[int, Kind, Any, int], bool]:
    """A response handler that does not need to know which kind of request it answers."""
    return lambda source, _, response, now: handler(source, response, now)

class RaftCore:
    def __init__(self, node_id: int, config: QuorumConfig, log: RaftLog, persisted: Election | None,
                 rng: random.Random, now_ms: int, wall_time: Callable[[int], int] = lambda now: now) -> None:
        """``now_ms`` and every later ``now_ms`` are monotonic; ``wall_time`` turns one into
        the wall-clock milliseconds that batch timestamps carry. Nothing is done until the
        first call (``tick``), so the shell decides when the node starts to act."""
        if config.election_timeout_ms <= 0 or config.fetch_timeout_ms <= 0:
            raise ValueError("the election and fetch timeouts must be positive")
        self.node_id = node_id
        self.local_key = ReplicaKey(node_id, config.directory_id)
        self.config = config
        self.log = log
        self.rng = rng
        self.wall_time = wall_time
        # The voter set and kraft.version as the log holds them (the configured static voters
        # until a VotersRecord says otherwise).
        self.history = read_history(log, VoterSet.static(config.voter_addresses, config.voters, config.listener_name),
                                    configured=bool(config.voters))
        # Where leaders and bootstrap servers were learnt to listen, by id (bootstrap servers
        # have ids below -1, as in Kafka).
        self._learnt: dict[int, tuple[str, int]] = {}
        self._next_bootstrap = 0
        self.membership = Membership(self)
        # One list for the whole life of the core: the transitions write into it too.
        self.outputs: list[Output] = []
        # Offsets below it are committed. Not persisted: after a restart it is learnt again
        # from the leader, as in Kafka.
        self.high_watermark = 0
        self.shutting_down = False
        self.outbox = Outbox(config.request_timeout_ms, config.retry_backoff_ms)
        self.flush_due: int | None = None
        # What each message received is handled by; a response handler says whether it
        # succeeded (if not, its sender is backed off).
        self._request_handlers: dict[type[Message], Callable[[int, int, Any, int], None]] = {
            VoteRequest: self._on_vote_request,
            BeginQuorumEpochRequest: self._on_begin_epoch_request,
            EndQuorumEpochRequest: self._on_end_epoch_request,
            FetchSnapshotRequest: self._on_fetch_snapshot_request,
            AddRaftVoterRequest: self.membership.receive_request,
            RemoveRaftVoterRequest: self.membership.receive_request,
            UpdateRaftVoterRequest: self.membership.receive_request,
        }
        # Those whose answer depends on the version the request came in at.
        self._versioned_handlers: dict[type[Message], Callable[[int, int, Any, int, int], None]] = {
            FetchRequest: self._on_fetch_request,
            DescribeQuorumRequest: self._on_describe_quorum_request,
        }
        self._response_handlers: dict[type[Message], Callable[[int, Kind, Any, int], bool]] = {
            VoteResponse: self._on_vote_response,
            FetchResponse: _any_kind(self._on_fetch_response),
            BeginQuorumEpochResponse: _any_kind(self._on_begin_epoch_response),
            EndQuorumEpochResponse: _any_kind(self._on_end_epoch_response),
            FetchSnapshotResponse: _any_kind(self._on_fetch_snapshot_response),
            ApiVersionsResponse: _any_kind(self._on_api_versions_response),
            UpdateRaftVoterResponse: _any_kind(lambda _, response, __: bool(response.error_code == Error.NONE)),
        }
        self.transitions = Transitions(self.local_key, config, self.history, log, rng, self.outputs,
                                       TransitionHooks(self._left, self._elected), persisted, now_ms)

    # --- public API ------------------------------------------------------------------------
    @property
    def state(self) -> EpochState:
        return self.transitions.state

    @property
    def epoch(self) -> int:
        return self.state.election.epoch

    @property
    def leader_id(self) -> int:
        return self.state.election.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, Leader)

    @property
    def voter_set(self) -> VoterSet:
        return self.history.latest

    @property
    def voters(self) -> frozenset[int]:
        return self.history.latest.ids

    @property
    def is_voter(self) -> bool:
        """Whether this replica (id and directory) is in the latest voter set; an observer
        only fetches, and never stands or votes."""
        return self.transitions.is_voter

    @property
    def only_voter(self) -> bool:
        return self.transitions.only_voter

    def take_outputs(self) -> list[Output]:
        out = list(self.outputs)
        self.outputs.clear()
        return out

    def _left(self, old: EpochState, new: EpochState, now: int) -> None:
        # Requests of the old state are no longer wanted; their responses will be ignored.
        self.outbox.clear()
        if isinstance(old, Leader) and not isinstance(new, Leader):
            self.membership.leadership_lost(old)
            self.outputs.append(LostLeadership(old.election.epoch))
            for parked in old.parked:
                self.answer_fetch(parked, self.fetch_error(Error.NOT_LEADER_OR_FOLLOWER))

    def _elected(self, state: Leader, now: int) -> None:
        # The epoch's first batch names its leader; committing it is what lets the high
        # watermark move in this epoch.
        self.append([leader_change_batch(state.epoch_start_offset, self.epoch, self.node_id, self.voters,
                                         state.granting_voters, self.wall_time(now),
                                         bootstrap_quorum_records(self.history, self.log))])
        self.flush_due = now

    def receive_request(self, source: int, correlation_id: int, message: Message, now_ms: int,
                        version: int | None = None) -> None:
        """``version``: the one the request came in at, which its answer must fit; None: the
        newest (a peer of this implementation)."""
        versioned = self._versioned_handlers.get(type(message))
        if versioned is not None:
            versioned(source, correlation_id, message, now_ms,
                      APIS[api_key_of(message)].max_version if version is None else version)
        else:
            handler = self._request_handlers.get(type(message))
            if handler is None:
                raise ValueError(f"the Raft core does not handle {message.NAME}")
            handler(source, correlation_id, message, now_ms)
        self._poll(now_ms)

    def receive_response(self, source: int, correlation_id: int, message: Message, now_ms: int) -> None:
        sent = self.outbox.finish(correlation_id, source)
        if sent is None:
            return  # not asked for any more: from an earlier state, or a duplicate
        handler = self._response_handlers.get(type(message))
        if handler is not None and not handler(source, sent.kind, message, now_ms):
            self.outbox.back_off(source, now_ms)
        self._poll(now_ms)

    def request_failed(self, correlation_id: int, now_ms: int) -> None:
        """The shell could not deliver a request or its connection broke."""
        self.outbox.fail(correlation_id, now_ms)
        self._poll(now_ms)

    def tick(self, now_ms: int) -> None:
        self._poll(now_ms)

    @property
    def next_offset(self) -> int:
        """The offset the next prepared record gets: after the log and what is prepared but not
        appended yet."""
        state = self.state
        return state.prepared_end if isinstance(state, Leader) and state.prepared else self.log.end_offset

    def prepare_append(self, batches: list[bytes], now_ms: int) -> int:
        """Take batches encoded by the controller (base offsets from ``next_offset`` on, this
        epoch's leader epoch) to be appended with everything else prepared before the core's
        next step; returns the offset of the last record. They are committed once
        ``Committed`` reaches it. Kafka's RaftClient.prepareAppend."""
        state = self.state
        if not isinstance(state, Leader) or state.resign_requested or self.shutting_down:
            raise NotLeader(f"node {self.node_id} is not the leader (leader {self.leader_id}, epoch {self.epoch})")
        end = self.next_offset
        for raw in batches:
            header = read_batch_header(raw)
            if header.partition_leader_epoch != self.epoch:
                raise ValueError(f"a batch of epoch {header.partition_leader_epoch} prepared in epoch {self.epoch}")
            if header.base_offset != end:
                raise ValueError(f"a batch at offset {header.base_offset} prepared where the log goes on at {end}")
            end = header.base_offset + header.last_offset_delta + 1
        state.prepared.extend(batches)
        state.prepared_end = end
        return end - 1

    def append_control(self, messages: list[Message], now: int) -> int:
        """The leader writes a quorum record itself (a voter change), in a control batch after
        everything prepared; returns the offset of its last record. The shell hears of it
        (``ControlAppended``) so that an active controller replays it in order."""
        base = self.next_offset
        self.prepare_append([control_batch(base, self.epoch, messages, self.wall_time(now))], now)
        self.outputs.append(ControlAppended(base, tuple(messages)))
        return base + len(messages) - 1

    def _append_prepared(self, state: Leader, now: int) -> None:
        if not state.prepared:
            return
        batches, state.prepared = state.prepared, []
        try:
            self.append(batches)
        except OSError as exc:
            # The log cannot take them: step down, so that their waiters fail, the controller
            # goes back to what is committed and a healthy voter takes over.
            self.outputs.append(AppendFailed(f"{len(batches)} batches from offset "
                                             f"{read_batch_header(batches[0]).base_offset}: {exc}"))
            state.resign_requested = True
            return
        if self.flush_due is None:
            # Alone, its own flush is the commit: lingering would only delay it. Appends made
            # while a flush runs join the next one (group commit).
            self.flush_due = now + (0 if self.only_voter else self.config.append_linger_ms)
        self._answer_parked(state, now, appended=True)

    def kraft_upgrade(self, level: int) -> tuple[int, str | None, list[Message]]:
        """The records that raise kraft.version to ``level`` as the leader, or why not."""
        return self.membership.kraft_upgrade(level)

    def begin_shutdown(self, now_ms: int) -> None:
        """Stop taking part in elections; a leader resigns and tells the voters."""
        self.shutting_down = True
        self._poll(now_ms)

    def replica_progress(self, now_ms: int) -> dict[int, ReplicaProgress]:
        """Every replica that fetched in this epoch, and the leader itself, for DescribeQuorum
        (which only the leader answers)."""
        state = self.state
        if not isinstance(state, Leader):
            raise NotLeader(f"node {self.node_id} is not the leader (leader {self.leader_id}, epoch {self.epoch})")
        progress = {replica: replace(p) for replica, p in state.replicas.items()}
        progress[self.node_id] = ReplicaProgress(self.log.end_offset, now_ms, now_ms, self.local_key.directory_id)
        return progress

    @property
    def shutdown_complete(self) -> bool:
        """The node may stop: another node leads, or there is nobody to hand over to."""
        return self.shutting_down and (
            not self.is_voter or len(self.voters) == 1 or self.leader_id not in (NO_ID, self.node_id))

    def next_deadline(self) -> int:
        """The latest time the shell must call ``tick`` by, if nothing arrives before."""
        state = self.state
        times = self.outbox.deadlines()
        if isinstance(state, Follower):
            times.append(state.fetch_deadline)
        elif isinstance(state, Leader):
            times.append(state.check_quorum_deadline)
            times.append(state.begin_epoch_due)
            times.extend(p.deadline for p in state.parked)
            if state.change is not None:
                times.append(state.change.deadline)
            if self.flush_due is not None:
                times.append(self.flush_due)
        else:
            times.append(state.election_deadline)
        return min(times)

    def append(self, batches: list[bytes]) -> None:
        """Every append goes through here, so that the voter set follows the log."""
        self.log.append(batches)
        for raw in batches:
            for offset, message in quorum_messages(raw):
                self.history.add(offset, message)

    # --- the poll loop: timers and requests to send -------------------------------------------
    def _poll(self, now: int) -> None:
        self.outbox.expire(now)
        state = self.state
        if self.only_voter and not self.shutting_down and isinstance(state, (Unattached, Candidate)):
            # A quorum of one needs no votes, and no pre-vote: it stands and wins at once.
            if isinstance(state, Candidate):
                self.transitions.check_tally(now)
            else:
                self.transitions.to_candidate(now)
            state = self.state
        if isinstance(state, Leader):
            self._poll_leader(state, now)
        elif not self.is_voter and isinstance(state, (Follower, Unattached)):
            self._poll_observer(state, now)
        elif isinstance(state, Follower):
            if now >= state.fetch_deadline and not self.shutting_down:
                self.transitions.to_prospective(now)
                self._poll(now)
            else:
                self._send_fetch(state, now)
        elif isinstance(state, (Prospective, Candidate)):
            if now >= state.election_deadline:
                if isinstance(state, Candidate):
                    self.transitions.to_prospective(now)
                else:
                    self.transitions.after_lost_pre_vote(now)
                self._poll(now)
            elif not state.tally.lost:
                self._send_votes(state, now)
        elif isinstance(state, Unattached):
            if now >= state.election_deadline and not self.shutting_down:
                self.transitions.to_prospective(now)
                self._poll(now)
        else:
            self._poll_resigned(state, now)

    def _poll_observer(self, state: Follower | Unattached, now: int) -> None:
        """An observer never stands: it fetches from the leader it knows, and when that
        leader goes silent (or it knows none) asks a bootstrap server or a known voter in
        turn, whose answer names the leader, as Kafka's observers do."""
        if isinstance(state, Follower):
            if now < state.fetch_deadline:
                self._send_fetch(state, now)
                return
            self.transitions.set_state(Unattached(Election(self.epoch), now), now)
        unattached = self.state
        assert isinstance(unattached, Unattached)
        if not self.outbox.idle:
            # The answer (or its failure) wakes it; the timer need not.
            unattached.election_deadline = now + self.config.request_timeout_ms
            return
        # Asked again after a backoff whatever happens, so that nothing spins while no
        # bootstrap server answers.
        unattached.election_deadline = now + max(1, self.config.retry_backoff_ms)
        # The bootstrap servers, then the voters the log names: a leader that removed itself
        # may have only itself as a bootstrap server, and the voters left know the new leader.
        own = self.address_of(self.node_id)
        targets = [-2 - i for i, server in enumerate(self.config.bootstrap_servers) if tuple(server) != own]
        targets += sorted(v for v in self.voters if v != self.node_id)
        if not targets:
            return
        target = targets[self._next_bootstrap % len(targets)]
        self._next_bootstrap += 1
        self._send(target, self._fetch_request(), Kind.FETCH, now)

    def _poll_leader(self, state: Leader, now: int) -> None:
        self._append_prepared(state, now)
        if self.flush_due is not None and now >= self.flush_due:
            # The leader's own copy need not be on disk before it is replicated, only before
            # it counts towards a majority: the flush may complete later (the shell ticks).
            self.log.begin_flush()
            self.flush_due = None
        self._update_high_watermark(state, now)
        check_quorum(state, self.voters, self.node_id, self.config.fetch_timeout_ms, now)
        self.membership.poll(state, now)
        if self.shutting_down or state.resign_requested or now >= state.check_quorum_deadline:
            self.transitions.to_resigned(state, now)
            self._poll(now)
            return
        self._answer_parked(state, now)
        if now >= state.begin_epoch_due:
            for node in self.voter_set.nodes:
                if node.key.id in state.begin_epoch_acked or node.key.id == self.node_id:
                    continue
                self._send(node.key.id, rpc.begin_epoch_request(self.config.cluster_id, self.epoch, self.node_id,
                                                                 node.key, self.config.endpoints),
                           Kind.BEGIN_EPOCH, now)
            state.begin_epoch_due = now + self.config.fetch_timeout_ms // 2

    def _poll_resigned(self, state: Resigned, now: int) -> None:
        if now >= state.election_deadline and not self.shutting_down:
            # Leave the epoch for good: this node may not lead or follow itself in it again.
            # A pre-vote first, as Kafka's resigned leader does (KIP-996): the epoch is raised
            # only by the election that can win it, so a restarted quorum uses one epoch, not two.
            if self.only_voter:
                self.transitions.to_candidate(now)
            elif self.is_voter:
                self.transitions.to_prospective(now)
            else:
                # It removed itself from the voters: it never stands again, and observes in
                # the next epoch, so that no Fetch answer names it leader of this one.
                self.transitions.to_unattached(self.epoch + 1, now)
            self._poll(now)
            return
        for voter in sorted(state.unacked):
            self._send(voter, rpc.end_epoch_request(self.config.cluster_id, self.epoch, self.node_id,
                                                    state.successors), Kind.END_EPOCH, now)

    def _send_votes(self, state: Prospective | Candidate, now: int) -> None:
        pre_vote = isinstance(state, Prospective)
        kind = Kind.PRE_VOTE if pre_vote else Kind.VOTE
        for voter in state.tally.unrecorded():
            node = self.voter_set.node(voter)
            message = rpc.vote_request(self.config.cluster_id, self.epoch, self.local_key,
                                       node.key if node is not None else voter,
                                       self.log.last_epoch, self.log.end_offset, pre_vote)
            self._send(voter, message, kind, now)

    def _send_fetch(self, state: Follower, now: int) -> None:
        if self.outbox.busy(state.election.leader_id):
            return
        if state.download is not None:
            self._send(state.election.leader_id, rpc.fetch_snapshot_request(
                self.config.cluster_id, self.local_key, self.epoch, state.download.snapshot,
                len(state.download.data), self.config.fetch_max_bytes), Kind.FETCH_SNAPSHOT, now)
            return
        if not state.update_sent and state.has_fetched and self._maybe_update_voter(state, now):
            return  # the next fetch goes once the leader has answered it
        self._send(state.election.leader_id, self._fetch_request(), Kind.FETCH, now)

    def _fetch_request(self) -> FetchRequest:
        # A voter only ever reports what is on disk, the leader counts it towards commits;
        # a former leader may still hold records it never flushed.
        self._flush()
        return rpc.fetch_request(
            self.config.cluster_id, self.local_key, self.epoch, self.log.end_offset, self.log.last_epoch,
            self.log.start_offset, self.config.fetch_max_wait_ms, self.config.fetch_max_bytes)

    def _maybe_update_voter(self, state: Follower, now: int) -> bool:
        """A voter whose entry in the voter set names other listeners than it has (it moved,
        or was added before it knew them) asks the leader to record its own, once an epoch."""
        node = self.voter_set.node(self.node_id)
        if node is None or not self.is_voter or not self.config.endpoints \
                or self.local_key.directory_id == ZERO_UUID:
            return False
        # Under kraft.version 1 only a change is said; under 0 the leader learns every voter's
        # key and listeners this way, which the upgrade to kraft.version 1 needs.
        if self.history.kraft_version >= KRAFT_VERSION_DYNAMIC and set(node.endpoints) == set(self.config.endpoints):
            return False
        state.update_sent = self._send(state.election.leader_id, UpdateRaftVoterRequest(
            cluster_id=self.config.cluster_id, current_leader_epoch=self.epoch, voter_id=self.node_id,
            voter_directory_id=self.local_key.directory_id,
            listeners=[UpdateListener(name=n, host=h, port=p) for n, h, p in self.config.endpoints],
            k_raft_version_feature=UpdateKRaftVersionFeature(min_supported_version=SUPPORTED_KRAFT_VERSIONS[0],
                                                             max_supported_version=SUPPORTED_KRAFT_VERSIONS[-1])),
                   Kind.UPDATE_VOTER, now)
        return state.update_sent

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        """Where ``node_id`` listens, as this node knows it."""
        if node_id <= -2:
            index = -2 - node_id
            servers = self.config.bootstrap_servers
            return servers[index] if index < len(servers) else None
        if node_id == self.node_id:
            own = next(((h, p) for n, h, p in self.config.endpoints if n == self.config.listener_name), None)
            if own is not None:
                return own
        node = self.voter_set.node(node_id)
        found = node.address(self.config.listener_name) if node is not None else None
        return found or self.config.voter_addresses.get(node_id) or self._learnt.get(node_id)

    def _send(self, destination: int, message: Message, kind: Kind, now: int) -> bool:
        """Whether it went (see ``Outbox.send``)."""
        correlation_id = self.outbox.send(destination, kind, now)
        if correlation_id is None:
            return False
        self.outputs.append(SendRequest(destination, correlation_id, message, self.address_of(destination)))
        return True

    def _flush(self) -> None:
        self.log.flush()
        self.flush_due = None

    def respond(self, destination: int, correlation_id: int, message: Message) -> None:
        self.outputs.append(SendResponse(destination, correlation_id, message))

    def _on_api_versions_response(self, source: int, response: ApiVersionsResponse, now: int) -> bool:
        self.membership.on_api_versions(source, response, now)
        return True

    def send_api_versions(self, node_id: int, address: tuple[str, int], now: int) -> None:
        """Ask a node about to be added which kraft.version levels it supports."""
        self._learnt[node_id] = address
        self.outbox.forgive(node_id)
        self._send(node_id, ApiVersionsRequest(client_software_name="kraftwire", client_software_version="1"),
                   Kind.API_VERSIONS, now)

    # --- Vote ---------------------------------------------------------------------------------
    def _refusal(self, source: int, cluster_id: str | None, one_partition: bool, api: str) -> int:
        """The error a quorum request gets as a whole: another cluster's, or not about exactly
        the metadata partition; NONE when its partition is to be looked at."""
        if not self.cluster_id_matches(source, cluster_id, api):
            return Error.INCONSISTENT_CLUSTER_ID
        return Error.NONE if one_partition else Error.INVALID_REQUEST

    def cluster_id_matches(self, source: int, cluster_id: str | None, api: str) -> bool:
        """Whether a request is of this cluster; if not, the operator hears of it here as
        well as on the other side (INCONSISTENT_CLUSTER_ID)."""
        if cluster_id is None or cluster_id == self.config.cluster_id:
            return True
        self.outputs.append(Refused(f"refused {api} from node {source}: its cluster id {cluster_id!r} is not this "
                                    f"cluster's {self.config.cluster_id!r} (INCONSISTENT_CLUSTER_ID)"))
        return False

    def _addressed_here(self, voter_id: int, directory_id: bytes) -> bool:
        """A request naming a voter key that is not this replica's is refused
        (INVALID_VOTER_KEY): it was meant for another incarnation of this node."""
        if voter_id >= 0 and voter_id != self.node_id:
            return False
        return directory_id == ZERO_UUID or self.local_key.directory_id == ZERO_UUID \
            or directory_id == self.local_key.directory_id

    def _on_vote_request(self, source: int, correlation_id: int, request: VoteRequest, now: int) -> None:
        def reply(error: int, granted: bool = False) -> None:
            self.respond(source, correlation_id, rpc.vote_response(error, self.epoch, self.leader_id, granted))

        part = rpc.only_partition(request.topics)
        refusal = self._refusal(source, request.cluster_id, part is not None, request.NAME)
        if refusal != Error.NONE or part is None:
            self.respond(source, correlation_id, VoteResponse(error_code=refusal))
            return
        candidate, epoch, pre_vote = part.candidate_id, part.candidate_epoch, part.pre_vote
        last_epoch, last_offset = part.last_offset_epoch, part.last_offset
        # A candidate has raised its epoch past everything in its log; a prospective has not.
        illegal_epoch = last_epoch > epoch if pre_vote else last_epoch >= epoch
        if last_offset < 0 or last_epoch < 0 or illegal_epoch or candidate < 0:
            reply(Error.INVALID_REQUEST)
            return
        if not self._addressed_here(request.voter_id, part.voter_directory_id):
            reply(Error.INVALID_VOTER_KEY)
            return
        if epoch < self.epoch:
            reply(Error.FENCED_LEADER_EPOCH)
            return
        if epoch > self.epoch:
            self.transitions.to_unattached(epoch, now)
        # A static quorum knows its voters; a dynamic one may not know a new voter yet, but an
        # observer never votes.
        static = self.history.kraft_version < KRAFT_VERSION_DYNAMIC
        if (static and candidate not in self.voters) or candidate == self.node_id or not self.is_voter:
            reply(Error.NONE)
            return
        up_to_date = (last_epoch, last_offset) >= (self.log.last_epoch, self.log.end_offset)
        granted = self._can_grant(candidate, part.candidate_directory_id, up_to_date, pre_vote)
        if granted and not pre_vote:
            state = self.state
            if isinstance(state, (Unattached, Prospective)) and state.election.voted_id == NO_ID:
                # Persisted (by _set_state) before the reply goes out, and the timer restarts:
                # the candidate has as good a chance as this node.
                election = replace(state.election, voted_id=candidate,
                                   voted_directory_id=part.candidate_directory_id)
                if isinstance(state, Unattached):
                    self.transitions.set_state(Unattached(election, self.transitions.election_deadline(now)), now)
                else:
                    self.transitions.set_state(Prospective(election, self.transitions.election_deadline(now),
                                                           self.transitions.tally()), now)
        reply(Error.NONE, granted)

    def _can_grant(self, candidate: int, directory_id: bytes, up_to_date: bool, pre_vote: bool) -> bool:
        state = self.state
        if isinstance(state, (Unattached, Prospective)):
            if pre_vote:
                return up_to_date
            if state.election.voted_id != NO_ID:
                return state.election.voted_for(candidate, directory_id)
            return state.election.leader_id == NO_ID and up_to_date
        if isinstance(state, Candidate):
            return pre_vote and up_to_date  # its real vote went to itself
        if isinstance(state, Follower):
            # A follower still hearing from its leader denies pre-votes, so a voter coming
            # back from a partition cannot start an election against a live leader.
            return pre_vote and not state.has_fetched and up_to_date
        return False

    def _on_vote_response(self, source: int, kind: Kind, response: VoteResponse, now: int) -> bool:
        if response.error_code == Error.UNSUPPORTED_VERSION and kind is Kind.PRE_VOTE \
                and isinstance(self.state, Prospective):
            # A voter too old for pre-vote (VoteRequest before v2) cannot answer one: stand
            # for election at once, as Kafka does. The shell reports this when the voter's
            # ApiVersions says so.
            self.transitions.to_candidate(now)
            return True

        def count(part: Any) -> None:
            state = self.state
            if (kind is Kind.PRE_VOTE and isinstance(state, Prospective)) or \
                    (kind is Kind.VOTE and isinstance(state, Candidate)):
                state.tally.record(source, bool(part.vote_granted))
                self.transitions.check_tally(now)
        return self._quorum_response(response.error_code, rpc.only_partition(response.topics), count, now)

    def _quorum_response(self, error_code: int, part: Any | None, action: Callable[[Any], None], now: int) -> bool:
        """A Vote, BeginQuorumEpoch or EndQuorumEpoch response: its one partition, what every
        quorum response says (``_common_response``), then ``action`` if it succeeded. False:
        back off."""
        if error_code != Error.NONE or part is None:
            return False
        handled = self._common_response(part.error_code, part.leader_id, part.leader_epoch, now)
        if handled is not None:
            return handled
        if part.error_code != Error.NONE:
            return False
        action(part)
        return True

    def _common_response(self, error: int, leader_id: int, epoch: int, now: int) -> bool | None:
        """What every quorum response says about epochs and leaders, as Kafka's
        maybeHandleCommonResponse: True or False when the response is dealt with (False:
        back off), None when its own handler should go on."""
        if epoch < self.epoch or error == Error.UNKNOWN_LEADER_EPOCH:
            return True  # about an epoch this node has left
        if epoch > self.epoch or error in (Error.FENCED_LEADER_EPOCH, Error.NOT_LEADER_OR_FOLLOWER):
            before = self.state
            self.transitions.maybe_transition(leader_id, epoch, now)
            # Nothing learnt (a resigned leader still saying it is not leading): back off
            # rather than ask again at once.
            return self.state is not before
        if leader_id not in (NO_ID, self.node_id) and self.leader_id == NO_ID:
            self.transitions.to_follower(epoch, leader_id, now)
            return None if error == Error.NONE else True
        if error == Error.BROKER_NOT_AVAILABLE:
            return False
        return None

    # --- BeginQuorumEpoch and EndQuorumEpoch ----------------------------------------------------
    def _on_begin_epoch_request(self, source: int, correlation_id: int, request: BeginQuorumEpochRequest,
                                now: int) -> None:
        part = rpc.only_partition(request.topics)
        refusal = self._refusal(source, request.cluster_id, part is not None, request.NAME)
        if refusal != Error.NONE or part is None:
            self.respond(source, correlation_id, BeginQuorumEpochResponse(error_code=refusal))
            return
        error = self._check_voter_request(part.leader_id, part.leader_epoch)
        if error == Error.NONE and not self._addressed_here(request.voter_id, part.voter_directory_id):
            error = Error.INVALID_VOTER_KEY
        if error == Error.NONE:
            for endpoint in request.leader_endpoints:
                if endpoint.name == self.config.listener_name:
                    self._learnt[part.leader_id] = (endpoint.host, endpoint.port)
            self.transitions.maybe_transition(part.leader_id, part.leader_epoch, now)
        self.respond(source, correlation_id, rpc.begin_epoch_response(error, self.epoch, self.leader_id))

    def _on_begin_epoch_response(self, source: int, response: BeginQuorumEpochResponse, now: int) -> bool:
        def acked(_: Any) -> None:
            if isinstance(self.state, Leader):
                self.state.begin_epoch_acked.add(source)
        return self._quorum_response(response.error_code, rpc.only_partition(response.topics), acked, now)

    def _on_end_epoch_request(self, source: int, correlation_id: int, request: EndQuorumEpochRequest,
                              now: int) -> None:
        part = rpc.only_partition(request.topics)
        refusal = self._refusal(source, request.cluster_id, part is not None, request.NAME)
        if refusal != Error.NONE or part is None:
            self.respond(source, correlation_id, EndQuorumEpochResponse(error_code=refusal))
            return
        error = self._check_voter_request(part.leader_id, part.leader_epoch)
        if error == Error.NONE:
            self.transitions.maybe_transition(part.leader_id, part.leader_epoch, now)
            state = self.state
            if isinstance(state, Follower) and state.election.leader_id == part.leader_id:
                # The leader is leaving: its successors in order start elections sooner, and
                # its liveness no longer speaks against a pre-vote.
                state.fetch_deadline = now + successor_backoff(
                    self.node_id, rpc.end_epoch_successors(part), self.config.election_backoff_max_ms)
                state.has_fetched = False
        self.respond(source, correlation_id, rpc.end_epoch_response(error, self.epoch, self.leader_id))

    def _on_end_epoch_response(self, source: int, response: EndQuorumEpochResponse, now: int) -> bool:
        def acked(_: Any) -> None:
            if isinstance(self.state, Resigned):
                self.state.unacked.discard(source)
        return self._quorum_response(response.error_code, rpc.only_partition(response.topics), acked, now)

    def _check_voter_request(self, leader_id: int, epoch: int) -> int:
        if epoch < self.epoch:
            return Error.FENCED_LEADER_EPOCH
        static = self.history.kraft_version < KRAFT_VERSION_DYNAMIC
        if leader_id < 0 or (static and leader_id not in self.voters) or leader_id == self.node_id:
            return Error.INVALID_REQUEST
        return Error.NONE

    # --- Fetch: serving as the leader -----------------------------------------------------------
    def fetch_error(self, error: int) -> FetchResponse:
        return rpc.fetch_response(error, self.epoch, self.leader_id, -1, self.log.start_offset,
                                  leader_address=self.address_of(self.leader_id))

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

    def answer_fetch(self, fetch: ParkedFetch, response: FetchResponse) -> None:
        self.respond(fetch.source, fetch.correlation_id, fit_to_version(response, fetch.version))

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

    def leader_error(self, request_epoch: int) -> int:
        """Why a request for the leader's log cannot be served here, or NONE."""
        if request_epoch < self.epoch:
            return Error.FENCED_LEADER_EPOCH
        if request_epoch > self.epoch:
            return Error.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, Leader) or self.shutting_down:
            return Error.NOT_LEADER_OR_FOLLOWER
        return Error.NONE

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

    def _advance_high_watermark(self, offset: int) -> None:
        self.high_watermark = offset
        self.outputs.append(Committed(offset - 1))

    # --- Fetch: replicating as a follower -------------------------------------------------------
    def _on_fetch_response(self, source: int, response: FetchResponse, now: int) -> bool:
        for endpoint in response.node_endpoints:
            if endpoint.node_id != self.node_id:
                self._learnt[endpoint.node_id] = (endpoint.host, endpoint.port)
        if response.error_code == Error.INCONSISTENT_CLUSTER_ID:
            self.outputs.append(Refused(f"node {source} refuses this node's Fetch: this node's cluster id "
                                        f"{self.config.cluster_id!r} is not that node's (INCONSISTENT_CLUSTER_ID)"))
        part = rpc.only_partition(response.responses, "topic")
        if response.error_code != Error.NONE or part is None:
            return False
        leader = part.current_leader
        handled = self._common_response(part.error_code, leader.leader_id, leader.leader_epoch, now)
        if handled is not None:
            return handled
        state = self.state
        if not isinstance(state, Follower) or state.election.leader_id != source:
            return True
        if part.error_code != Error.NONE:
            return False
        if part.diverging_epoch.epoch >= 0:
            self._truncate_diverging(part.diverging_epoch.epoch, part.diverging_epoch.end_offset)
        elif part.snapshot_id.epoch >= 0 or part.snapshot_id.end_offset >= 0:
            if part.snapshot_id.epoch < 0 or part.snapshot_id.end_offset < 0:
                return False
            # The leader's log starts after this one ends: fetch its snapshot first.
            state.download = SnapshotDownload(OffsetAndEpoch(part.snapshot_id.end_offset, part.snapshot_id.epoch))
        else:
            batches = split_batches(part.records)
            if batches and not self._append_fetched(batches):
                return False
            if part.high_watermark >= 0:
                # The leader found this log matching its own up to the fetch offset and sent
                # what follows, so its high watermark holds here as far as this log reaches.
                # Not after a truncation: what is left may still differ from the leader's.
                offset = min(part.high_watermark, self.log.end_offset)
                if offset > self.high_watermark:
                    self._advance_high_watermark(offset)
        state.has_fetched = True
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        return True

    def _truncate_diverging(self, epoch: int, end_offset: int) -> None:
        offset = truncation_offset(self.log, epoch, end_offset)
        if offset < self.high_watermark:
            raise RuntimeError(f"node {self.node_id}: the leader asks to truncate to {offset}, "
                               f"below the high watermark {self.high_watermark}")
        self.log.truncate_to(offset)
        self.history.truncate(offset)

    def _append_fetched(self, batches: list[bytes]) -> bool:
        first = read_batch_header(batches[0])
        if first.base_offset != self.log.end_offset:
            return False  # not where this log stands: an answer to an older question
        for raw in batches:
            if read_batch_header(raw).partition_leader_epoch > self.epoch:
                return False
        self.append(batches)
        self._flush()
        return True

    # --- FetchSnapshot --------------------------------------------------------------------------
    def _on_fetch_snapshot_request(self, source: int, correlation_id: int, request: FetchSnapshotRequest,
                                   now: int) -> None:
        if not self.cluster_id_matches(request.replica_id, request.cluster_id, request.NAME):
            self.respond(source, correlation_id, FetchSnapshotResponse(error_code=Error.INCONSISTENT_CLUSTER_ID))
            return
        part = rpc.only_partition(request.topics, "name")
        if part is None:
            self.respond(source, correlation_id, FetchSnapshotResponse(error_code=Error.INVALID_REQUEST))
            return
        snapshot = (part.snapshot_id.end_offset, part.snapshot_id.epoch)

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

    def _on_fetch_snapshot_response(self, source: int, response: FetchSnapshotResponse, now: int) -> bool:
        part = rpc.only_partition(response.topics, "name")
        if response.error_code != Error.NONE or part is None:
            return False
        leader = part.current_leader
        handled = self._common_response(part.error_code, leader.leader_id, leader.leader_epoch, now)
        if handled is not None:
            return handled
        state = self.state
        if not isinstance(state, Follower) or state.election.leader_id != source or state.download is None:
            return True
        download = state.download
        if part.error_code == Error.SNAPSHOT_NOT_FOUND:
            # The leader took a newer snapshot meanwhile: fetch again to be sent to it.
            state.download = None
        elif part.error_code != Error.NONE:
            return False
        elif (part.snapshot_id.end_offset, part.snapshot_id.epoch) != download.snapshot \
                or part.position != len(download.data):
            return False
        else:
            download.data += part.unaligned_records
            if len(download.data) >= part.size:
                self._install_snapshot(state, download)
        state.has_fetched = True
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        return True

    def _install_snapshot(self, state: Follower, download: SnapshotDownload) -> None:
        end_offset, epoch = download.snapshot
        if end_offset < self.high_watermark:
            raise RuntimeError(f"node {self.node_id}: snapshot ending at {end_offset} is below "
                               f"the high watermark {self.high_watermark}")
        self.log.install_snapshot(download.snapshot, bytes(download.data))
        self.history.restart(snapshot_quorum_messages(bytes(download.data)))
        state.download = None
        self.outputs.append(SnapshotInstalled(end_offset, epoch))
        # A snapshot holds committed records only.
        if end_offset > self.high_watermark:
            self._advance_high_watermark(end_offset)
