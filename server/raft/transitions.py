"""The Raft core's moves between epoch states (``server.raft.state``), and their persistence.

Every change of state goes through ``set_state``: the new election is persisted (an output
the shell makes durable before anything after it), the core is told what was left (it forgets
the old state's requests, and a leader that steps down answers its parked fetches), and a new
leader or epoch is reported. Which state a restarted node comes back in is decided here too
(``initial_state``). It owns the state; the core reads it and asks for moves, and it knows
nothing of the core: what else a move means is the core's, through ``TransitionHooks``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from server.raft.leader import check_quorum_deadline
from server.raft.log import RaftLog
from server.raft.outputs import LeaderChanged, Output, PersistElection
from server.raft.quorum_config import QuorumConfig
from server.raft.state import (
    NO_ID, Candidate, Election, EpochState, Follower, Leader, Prospective, Resigned, Tally, Unattached)
from server.raft.types import ReplicaKey
from server.raft.voters import VoterHistory


@dataclass(frozen=True)
class TransitionHooks:
    """The core's part of a move: ``left(old, new, now)`` after every change of state,
    ``elected(leader, now)`` once a new leader's state is in place (it writes the epoch's
    first batch)."""

    left: Callable[[EpochState, EpochState, int], None]
    elected: Callable[[Leader, int], None]


class Transitions:
    def __init__(self, local_key: ReplicaKey, config: QuorumConfig, history: VoterHistory, log: RaftLog,
                 rng: random.Random, outputs: list[Output], hooks: TransitionHooks, persisted: Election | None,
                 now: int) -> None:
        """``history``: the voter set as the log holds it, kept up to date by the core; the
        log is only read (its last epoch, where a new leader's epoch starts); ``outputs``:
        where persisting and reporting go."""
        self.node_id = local_key.id
        self.local_key = local_key
        self.config = config
        self.history = history
        self.log = log
        self.rng = rng
        self.outputs = outputs
        self.hooks = hooks
        self._persisted = persisted
        self._reported_leader = (-1, NO_ID)
        # Elections lost in a row: the wait before the next one grows with them (Kafka's
        # binary exponential election backoff), so that split votes resolve quickly.
        self._lost_elections = 0
        self.state: EpochState = self.initial_state(persisted or Election(0), now)
        self.persist(self.state.election)
        self.report_leader()

    @property
    def epoch(self) -> int:
        return self.state.election.epoch

    @property
    def leader_id(self) -> int:
        return self.state.election.leader_id

    @property
    def voters(self) -> frozenset[int]:
        return self.history.latest.ids

    @property
    def is_voter(self) -> bool:
        return self.history.latest.is_voter(self.local_key)

    @property
    def only_voter(self) -> bool:
        return self.voters == {self.node_id} and self.is_voter

    def initial_state(self, persisted: Election, now: int) -> EpochState:
        log_epoch = self.log.last_epoch
        if not self.is_voter:
            # An observer (a controller not yet added, or removed): it follows the leader it
            # knows, or asks the bootstrap servers for one.
            epoch = max(persisted.epoch, log_epoch)
            if persisted.leader_id not in (NO_ID, self.node_id) and persisted.epoch == epoch:
                return Follower(Election(epoch, persisted.leader_id), now + self.config.fetch_timeout_ms)
            return Unattached(Election(epoch), now)
        if self.only_voter:
            # Nobody else can lead or vote: it stands at its first poll, in an epoch above
            # any it led (a restarted leader never leads its epoch again).
            return Unattached(Election(max(persisted.epoch, log_epoch)), now)
        if persisted.epoch < log_epoch:
            # The log saw a later epoch than the file (the file is the one that lags): take
            # the log's epoch and no vote. A candidate of that epoch cannot win this node,
            # whose log holds a batch of the epoch the candidate's cannot.
            return Unattached(Election(log_epoch), self.election_deadline(now))
        if persisted.leader_id == self.node_id:
            # A restarted leader never leads that epoch again: unflushed records of its may
            # be gone, and new ones at the same offsets would break log matching.
            return Resigned(persisted, self.election_deadline(now), set(self.voters - {self.node_id}),
                            [])
        if persisted.leader_id != NO_ID:
            return Follower(persisted, now + self.config.fetch_timeout_ms)
        if persisted.voted_id == self.node_id:
            return Candidate(persisted, self.election_deadline(now), self.tally())
        return Unattached(persisted, self.election_deadline(now))

    def election_deadline(self, now: int) -> int:
        timeout = self.config.election_timeout_ms
        return now + timeout + (self.rng.randrange(timeout) if timeout else 0)

    def tally(self) -> Tally:
        tally = Tally(self.voters)
        tally.record(self.node_id, True)
        return tally

    def set_state(self, new: EpochState, now: int) -> None:
        old = self.state
        self.persist(new.election)
        self.state = new
        self.hooks.left(old, new, now)
        self.report_leader()

    def persist(self, election: Election) -> None:
        if election != self._persisted:
            self._persisted = election
            self.outputs.append(PersistElection(election))

    def report_leader(self) -> None:
        current = (self.epoch, self.leader_id)
        if current != self._reported_leader:
            self._reported_leader = current
            self.outputs.append(LeaderChanged(*current))

    def to_unattached(self, epoch: int, now: int) -> None:
        # Within the same epoch the vote stays: a voter votes once per epoch.
        self.set_state(Unattached(self.state.election.carried_to(epoch), self.election_deadline(now)), now)

    def to_follower(self, epoch: int, leader_id: int, now: int) -> None:
        self.set_state(Follower(self.state.election.carried_to(epoch, leader_id),
                                now + self.config.fetch_timeout_ms), now)

    def to_prospective(self, now: int) -> None:
        # Nothing to persist: a pre-vote changes neither the epoch nor the vote.
        self.set_state(Prospective(self.state.election, self.election_deadline(now), self.tally()), now)
        self.check_tally(now)

    def to_candidate(self, now: int) -> None:
        election = Election(self.epoch + 1, NO_ID, self.node_id, self.config.directory_id)
        self.set_state(Candidate(election, self.election_deadline(now), self.tally()), now)
        self.check_tally(now)

    def to_leader(self, granting: frozenset[int], now: int) -> None:
        election = Election(self.epoch, self.node_id, self.node_id, self.config.directory_id)
        leader = Leader(election, self.log.end_offset, granting,
                        check_quorum_deadline=check_quorum_deadline(self.config.fetch_timeout_ms, now),
                        begin_epoch_due=now)
        self.set_state(leader, now)
        self._lost_elections = 0
        self.hooks.elected(leader, now)

    def to_resigned(self, leader: Leader, now: int) -> None:
        # Hand over to the most caught-up voters first.
        def fetched(voter: int) -> int:
            return leader.replicas[voter].log_end_offset if voter in leader.replicas else -1
        successors = sorted(self.voters - {self.node_id}, key=lambda v: (-fetched(v), v))
        self.set_state(Resigned(leader.election, self.election_deadline(now), set(successors), successors), now)

    def maybe_transition(self, leader_id: int, epoch: int, now: int) -> None:
        """Follow what a message says of an epoch at least as new as ours."""
        if leader_id == self.node_id:
            return  # only this node can claim that; a message saying so is stale or wrong
        if epoch > self.epoch:
            if leader_id != NO_ID:
                self.to_follower(epoch, leader_id, now)
            else:
                self.to_unattached(epoch, now)
        elif epoch == self.epoch and leader_id != NO_ID and self.leader_id == NO_ID:
            self.to_follower(epoch, leader_id, now)

    def check_tally(self, now: int) -> None:
        state = self.state
        if isinstance(state, Prospective):
            if state.tally.won:
                self.to_candidate(now)
            elif state.tally.lost:
                self.after_lost_pre_vote(now)
        elif isinstance(state, Candidate):
            if state.tally.won:
                self.to_leader(frozenset(state.tally.granted), now)
            elif state.tally.lost:
                # Another candidate split the vote: stand again after a random backoff that
                # doubles with each lost election, rather than a whole election timeout.
                self._lost_elections += 1
                limit = min(self.config.election_backoff_max_ms,
                            self.config.retry_backoff_ms << min(self._lost_elections - 1, 20))
                state.election_deadline = min(state.election_deadline,
                                              now + self.rng.randrange(max(1, limit)))

    def after_lost_pre_vote(self, now: int) -> None:
        # Back to where it was, without having raised the epoch: this is what keeps a voter
        # that was cut off from deposing a healthy leader when it returns.
        if self.leader_id == self.node_id:
            # It led this epoch and resigned: it waits again, never following itself.
            election = self.state.election
            self.set_state(Resigned(election, self.election_deadline(now), set(), []), now)
        elif self.leader_id != NO_ID:
            self.to_follower(self.epoch, self.leader_id, now)
        else:
            self.to_unattached(self.epoch, now)
