"""What every part of the Raft core shares: the replica's identity, configuration, log and voter
history, its place in the quorum (``Transitions``), the requests in flight and the outputs the
shell performs, with the few operations every RPC handler uses (sending, answering, refusing
another cluster, the checks every quorum response and every request for the leader's log
share).

The core is one object, as Kafka's KafkaRaftClient is, but its handlers live by concern:
``server.raft.election`` (Vote, BeginQuorumEpoch, EndQuorumEpoch), ``server.raft.fetch_serving``
(the leader's side of Fetch, FetchSnapshot and DescribeQuorum), ``server.raft.follower`` (the
fetching side) and ``server.raft.core`` (dispatch, the poll loop and the leader's appends).
"""

from __future__ import annotations

import random
from typing import Callable

from protocol.error_codes import Error
from protocol.generated.messages.fetch_response import FetchResponse
from protocol.message import Message
from server.raft import messages as rpc
from server.raft.fetch import fit_to_version
from server.raft.log import RaftLog
from server.raft.reconfig.membership import Membership
from server.raft.outbox import Kind, Outbox
from server.raft.outputs import Committed, Output, Refused, SendRequest, SendResponse
from server.raft.quorum_config import QuorumConfig
from server.raft.state import NO_ID, EpochState, Leader, ParkedFetch
from server.raft.transitions import Transitions
from server.raft.types import ReplicaKey
from server.raft.voters import VoterHistory, VoterSet, quorum_messages


class NotLeader(Exception):
    """A proposal reached a node that is not the leader."""


class CoreBase:
    """The state behind every handler; ``RaftCore`` fills it in."""

    node_id: int
    local_key: ReplicaKey
    config: QuorumConfig
    log: RaftLog
    rng: random.Random
    wall_time: Callable[[int], int]
    history: VoterHistory
    membership: Membership
    transitions: Transitions
    outbox: Outbox
    outputs: list[Output]
    # Offsets below it are committed. Not persisted: after a restart it is learnt again
    # from the leader, as in Kafka.
    high_watermark: int
    shutting_down: bool
    flush_due: int | None
    # Where leaders and bootstrap servers were learnt to listen, by id (bootstrap servers
    # have ids below -1, as in Kafka).
    _learnt: dict[int, tuple[str, int]]
    _next_bootstrap: int

    @property
    def state(self) -> EpochState:
        return self.transitions.state

    @property
    def epoch(self) -> int:
        return self.transitions.epoch

    @property
    def leader_id(self) -> int:
        return self.transitions.leader_id

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

    def append(self, batches: list[bytes]) -> None:
        """Every append goes through here, so that the voter set follows the log."""
        self.log.append(batches)
        for raw in batches:
            for offset, message in quorum_messages(raw):
                self.history.add(offset, message)

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
        sender = f"node {source}" if source >= 0 else "a client"
        self.outputs.append(Refused(f"refused {api} from {sender}: its cluster id {cluster_id!r} is not this "
                                    f"cluster's {self.config.cluster_id!r} (INCONSISTENT_CLUSTER_ID)"))
        return False

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

    def leader_error(self, request_epoch: int) -> int:
        """Why a request for the leader's log cannot be served here, or NONE."""
        if request_epoch < self.epoch:
            return Error.FENCED_LEADER_EPOCH
        if request_epoch > self.epoch:
            return Error.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, Leader) or self.shutting_down:
            return Error.NOT_LEADER_OR_FOLLOWER
        return Error.NONE

    def fetch_error(self, error: int) -> FetchResponse:
        return rpc.fetch_response(error, self.epoch, self.leader_id, -1, self.log.start_offset,
                                  leader_address=self.address_of(self.leader_id))

    def _advance_high_watermark(self, offset: int) -> None:
        self.high_watermark = offset
        self.outputs.append(Committed(offset - 1))

    def answer_fetch(self, fetch: ParkedFetch, response: FetchResponse) -> None:
        self.respond(fetch.source, fetch.correlation_id, fit_to_version(response, fetch.version))
