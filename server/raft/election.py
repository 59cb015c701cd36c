"""Elections as KIP-595 and KIP-996 run them: asking for (pre-)votes, granting them, and the
leader's BeginQuorumEpoch and EndQuorumEpoch with their answers. Whether a vote may be granted
is each epoch state's own answer (``server.raft.state``); here is what a request must be to be
looked at, and what its answer moves."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from protocol.error_codes import Error
from protocol.generated.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.generated.messages.begin_quorum_epoch_response import BeginQuorumEpochResponse
from protocol.generated.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.generated.messages.end_quorum_epoch_response import EndQuorumEpochResponse
from protocol.generated.messages.vote_request import VoteRequest
from protocol.generated.messages.vote_response import VoteResponse
from protocol.primitives import ZERO_UUID
from server.raft import messages as rpc
from server.raft.base import CoreBase
from server.raft.outbox import Kind
from server.raft.replication import successor_backoff
from server.raft.state import NO_ID, Candidate, Follower, Leader, Prospective, Resigned, Unattached
from server.raft.types import ReplicaKey
from server.raft.voters import KRAFT_VERSION_DYNAMIC


class ElectionRpcs(CoreBase):
    """The Vote, BeginQuorumEpoch and EndQuorumEpoch handlers of the core."""

    def _send_votes(self, state: Prospective | Candidate, now: int) -> None:
        pre_vote = isinstance(state, Prospective)
        kind = Kind.PRE_VOTE if pre_vote else Kind.VOTE
        for voter in state.tally.unrecorded():
            node = self.voter_set.node(voter)
            message = rpc.vote_request(self.config.cluster_id, self.epoch, self.local_key,
                                       node.key if node is not None else voter,
                                       self.log.last_epoch, self.log.end_offset, pre_vote)
            self._send(voter, message, kind, now)

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
        granted = self.state.can_grant_vote(ReplicaKey(candidate, part.candidate_directory_id), up_to_date, pre_vote)
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
