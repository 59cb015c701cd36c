"""The KRaft quorum state machine for the __cluster_metadata partition.

``RaftCore`` takes received requests and responses, the controller's prepared batches and the
passing of time (every call carries ``now_ms``; nothing here reads a clock or opens a socket)
and leaves what the shell must do in ``outputs`` (see ``server.raft.outputs``).

Its I/O model is Kafka's: the log is called inline through ``RaftLog`` (reads, appends,
truncations, snapshot installs), and durability is explicit in three places only. A follower
flushes what it fetched before it asks again, since the leader counts its fetch offset
towards commits; a leader starts its own flush in the poll (``begin_flush``), which the log
completes off the caller's thread and reports as ``flushed_offset``; and a leader losing its
leadership flushes before anything else, so that no state after it reports unflushed records.
A failing log call raises OSError out of the core; the shell stops the process then, as
Kafka's fault handler does, except for the leader's own appends, which resign instead
(``AppendFailed``). Tests give the core an in-memory log. The leader owns the log's offsets: the controller's batches take
theirs from ``next_offset`` and wait in the leader's state until the core's next step appends
them (``prepare_append``, Kafka's accumulator), and the quorum records the leader writes itself
(LeaderChange, a voter change) take the next ones in the same order. Behaviour follows
Kafka's KafkaRaftClient: KIP-595 elections and Fetch-based replication (FetchSnapshot for a
follower behind the leader's log start), KIP-996 pre-vote, a leader that resigns when a
majority stops fetching from it (check quorum), graceful resignation with EndQuorumEpoch, and
KIP-853 voter changes (``server.raft.reconfig``); a replica outside the voter set observes.
Every fetcher of the log is served here (``server.raft.fetch``), voters, joining controllers,
brokers and tools alike, each by its policy.
A single voter is a quorum of one: it stands and wins at once, and commits what it has
flushed, through the same states and outputs as any leader.

This module holds dispatch, the poll loop and the leader's appends; the RPC handlers live by
concern in ``server.raft.election``, ``server.raft.fetch_serving`` and ``server.raft.follower``
over the shared state of ``server.raft.base``. The core is composed of ``Transitions`` (state
changes and their persistence), ``Outbox`` (requests in flight and backoff), ``Membership``
and the leader's bookkeeping in ``server.raft.leader``.

Every reply to a request is built after the state it reports is persisted, and a response is
acted on only if it answers the request in flight now (correlation ids), so duplicated, late
or reordered messages cannot count twice or land in the wrong election.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from protocol.api_keys import APIS
from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.generated.messages.begin_quorum_epoch_response import BeginQuorumEpochResponse
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.generated.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.generated.messages.end_quorum_epoch_response import EndQuorumEpochResponse
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_response import FetchResponse
from protocol.generated.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.generated.messages.fetch_snapshot_response import FetchSnapshotResponse
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.generated.messages.update_raft_voter_request import UpdateRaftVoterRequest
from protocol.generated.messages.update_raft_voter_response import UpdateRaftVoterResponse
from protocol.generated.messages.vote_request import VoteRequest
from protocol.generated.messages.vote_response import VoteResponse
from protocol.message import Message, api_key_of
from protocol.records import read_batch_header
from server.raft import messages as rpc
from server.raft.base import NotLeader
from server.raft.election import ElectionRpcs
from server.raft.fetch_serving import FetchServing
from server.raft.follower import FollowerReplication
from server.raft.leader import check_quorum
from server.raft.log import RaftLog
from server.raft.reconfig.membership import Membership
from server.raft.outbox import Kind, Outbox
from server.raft.outputs import AppendFailed, ControlAppended, LostLeadership, Output
from server.raft.quorum_config import QuorumConfig
from server.raft.replication import bootstrap_quorum_records, control_batch, leader_change_batch
from server.raft.state import (
    NO_ID, Candidate, Election, EpochState, Follower, Leader, Prospective, Resigned, Unattached)
from server.raft.transitions import TransitionHooks, Transitions
from server.raft.types import ReplicaKey
from server.raft.voters import VoterSet, read_history



def _any_kind(handler: Callable[[int, Any, int], bool]) -> Callable[[int, Kind, Any, int], bool]:
    """A response handler that does not need to know which kind of request it answers."""
    return lambda source, _, response, now: handler(source, response, now)


class RaftCore(ElectionRpcs, FetchServing, FollowerReplication):
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

    def take_outputs(self) -> list[Output]:
        out = list(self.outputs)
        self.outputs.clear()
        return out

    def _left(self, old: EpochState, new: EpochState, now: int) -> None:
        # Requests of the old state are no longer wanted; their responses will be ignored.
        self.outbox.clear()
        if isinstance(old, Leader) and not isinstance(new, Leader):
            # A replica only ever reports what is on disk (a leader counts a voter's fetch
            # offset towards commits), and a leader's last appends may not be yet.
            self._flush()
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

    def leadership_lapsed(self, now_ms: int) -> bool:
        """A leader that a majority has not fetched from within the check-quorum time: it
        resigns at its next step."""
        state = self.state
        return isinstance(state, Leader) and now_ms >= state.check_quorum_deadline

    def begin_shutdown(self, now_ms: int) -> None:
        """Stop taking part in elections; a leader resigns and tells the voters."""
        self.shutting_down = True
        self._poll(now_ms)

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

    def _on_api_versions_response(self, source: int, response: ApiVersionsResponse, now: int) -> bool:
        self.membership.on_api_versions(source, response, now)
        return True

    def send_api_versions(self, node_id: int, address: tuple[str, int], now: int) -> None:
        """Ask a node about to be added which kraft.version levels it supports."""
        self._learnt[node_id] = address
        self.outbox.forgive(node_id)
        self._send(node_id, ApiVersionsRequest(client_software_name="kraftwire", client_software_version="1"),
                   Kind.API_VERSIONS, now)
