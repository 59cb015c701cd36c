"""The Raft core's moves between epoch states (``server.raft.state``), and their persistence.

Every change of state goes through ``set_state``: the new election is persisted (an output
the shell makes durable before anything after it), requests of the old state are forgotten,
a leader that steps down answers its parked fetches, and a new leader or epoch is reported.
Which state a restarted node comes back in is decided here too (``initial_state``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.error_codes import Error
from server.raft.leader import check_quorum_deadline
from server.raft.outputs import LeaderChanged, LostLeadership, PersistElection
from server.raft.replication import bootstrap_quorum_records, leader_change_batch
from server.raft.state import (
    NO_ID, Candidate, Election, EpochState, Follower, Leader, Prospective, Resigned, Tally, Unattached)

if TYPE_CHECKING:
    from server.raft.core import RaftCore


class Transitions:
    """Composed into RaftCore, whose state it changes: it reads the core's log, voters and
    config, and leaves its outputs in the core's."""

    def __init__(self, core: "RaftCore", persisted: Election | None) -> None:
        self.core = core
        self._persisted = persisted
        self._reported_leader = (-1, NO_ID)
        # Elections lost in a row: the wait before the next one grows with them (Kafka's
        # binary exponential election backoff), so that split votes resolve quickly.
        self._lost_elections = 0

    def initial_state(self, persisted: Election, now: int) -> EpochState:
        log_epoch = self.core.log.last_epoch
        if not self.core.is_voter:
            # An observer (a controller not yet added, or removed): it follows the leader it
            # knows, or asks the bootstrap servers for one.
            epoch = max(persisted.epoch, log_epoch)
            if persisted.leader_id not in (NO_ID, self.core.node_id) and persisted.epoch == epoch:
                return Follower(Election(epoch, persisted.leader_id), now + self.core.config.fetch_timeout_ms)
            return Unattached(Election(epoch), now)
        if self.core.only_voter:
            # Nobody else can lead or vote: it stands at its first poll, in an epoch above
            # any it led (a restarted leader never leads its epoch again).
            return Unattached(Election(max(persisted.epoch, log_epoch)), now)
        if persisted.epoch < log_epoch:
            # The log saw a later epoch than the file (the file is the one that lags): take
            # the log's epoch and no vote. A candidate of that epoch cannot win this node,
            # whose log holds a batch of the epoch the candidate's cannot.
            return Unattached(Election(log_epoch), self.election_deadline(now))
        if persisted.leader_id == self.core.node_id:
            # A restarted leader never leads that epoch again: unflushed records of its may
            # be gone, and new ones at the same offsets would break log matching.
            return Resigned(persisted, self.election_deadline(now), set(self.core.voters - {self.core.node_id}),
                            [])
        if persisted.leader_id != NO_ID:
            return Follower(persisted, now + self.core.config.fetch_timeout_ms)
        if persisted.voted_id == self.core.node_id:
            return Candidate(persisted, self.election_deadline(now), self.tally())
        return Unattached(persisted, self.election_deadline(now))

    def election_deadline(self, now: int) -> int:
        timeout = self.core.config.election_timeout_ms
        return now + timeout + (self.core.rng.randrange(timeout) if timeout else 0)

    def tally(self) -> Tally:
        tally = Tally(self.core.voters)
        tally.record(self.core.node_id, True)
        return tally

    def set_state(self, new: EpochState, now: int) -> None:
        old = self.core.state
        self.persist(new.election)
        self.core.state = new
        # Requests of the old state are no longer wanted; their responses will be ignored.
        self.core.outbox.clear()
        if isinstance(old, Leader) and not isinstance(new, Leader):
            self.core.membership.leadership_lost(old)
            self.core.outputs.append(LostLeadership(old.election.epoch))
            for parked in old.parked:
                self.core.answer_fetch(parked, self.core.fetch_error(Error.NOT_LEADER_OR_FOLLOWER))
        self.report_leader()

    def persist(self, election: Election) -> None:
        if election != self._persisted:
            self._persisted = election
            self.core.outputs.append(PersistElection(election))

    def report_leader(self) -> None:
        current = (self.core.epoch, self.core.leader_id)
        if current != self._reported_leader:
            self._reported_leader = current
            self.core.outputs.append(LeaderChanged(*current))

    def to_unattached(self, epoch: int, now: int) -> None:
        # Within the same epoch the vote stays: a voter votes once per epoch.
        self.set_state(Unattached(self.core.state.election.carried_to(epoch), self.election_deadline(now)), now)

    def to_follower(self, epoch: int, leader_id: int, now: int) -> None:
        self.set_state(Follower(self.core.state.election.carried_to(epoch, leader_id),
                                now + self.core.config.fetch_timeout_ms), now)

    def to_prospective(self, now: int) -> None:
        # Nothing to persist: a pre-vote changes neither the epoch nor the vote.
        self.set_state(Prospective(self.core.state.election, self.election_deadline(now), self.tally()), now)
        self.check_tally(now)

    def to_candidate(self, now: int) -> None:
        election = Election(self.core.epoch + 1, NO_ID, self.core.node_id, self.core.config.directory_id)
        self.set_state(Candidate(election, self.election_deadline(now), self.tally()), now)
        self.check_tally(now)

    def to_leader(self, granting: frozenset[int], now: int) -> None:
        start = self.core.log.end_offset
        election = Election(self.core.epoch, self.core.node_id, self.core.node_id, self.core.config.directory_id)
        leader = Leader(election, start, granting,
                        check_quorum_deadline=check_quorum_deadline(self.core.config.fetch_timeout_ms, now),
                        begin_epoch_due=now)
        self.set_state(leader, now)
        self._lost_elections = 0
        # The epoch's first batch names its leader; committing it is what lets the high
        # watermark move in this epoch.
        self.core.append([leader_change_batch(start, self.core.epoch, self.core.node_id, self.core.voters,
                                              granting, self.core.wall_time(now),
                                              bootstrap_quorum_records(self.core.history, self.core.log))])
        self.core.flush_due = now

    def to_resigned(self, leader: Leader, now: int) -> None:
        # Hand over to the most caught-up voters first.
        def fetched(voter: int) -> int:
            return leader.replicas[voter].log_end_offset if voter in leader.replicas else -1
        successors = sorted(self.core.voters - {self.core.node_id}, key=lambda v: (-fetched(v), v))
        self.set_state(Resigned(leader.election, self.election_deadline(now), set(successors), successors), now)

    def maybe_transition(self, leader_id: int, epoch: int, now: int) -> None:
        """Follow what a message says of an epoch at least as new as ours."""
        if leader_id == self.core.node_id:
            return  # only this node can claim that; a message saying so is stale or wrong
        if epoch > self.core.epoch:
            if leader_id != NO_ID:
                self.to_follower(epoch, leader_id, now)
            else:
                self.to_unattached(epoch, now)
        elif epoch == self.core.epoch and leader_id != NO_ID and self.core.leader_id == NO_ID:
            self.to_follower(epoch, leader_id, now)

    def check_tally(self, now: int) -> None:
        state = self.core.state
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
                limit = min(self.core.config.election_backoff_max_ms,
                            self.core.config.retry_backoff_ms << min(self._lost_elections - 1, 20))
                state.election_deadline = min(state.election_deadline,
                                              now + self.core.rng.randrange(max(1, limit)))

    def after_lost_pre_vote(self, now: int) -> None:
        # Back to where it was, without having raised the epoch: this is what keeps a voter
        # that was cut off from deposing a healthy leader when it returns.
        if self.core.leader_id == self.core.node_id:
            # It led this epoch and resigned: it waits again, never following itself.
            election = self.core.state.election
            self.set_state(Resigned(election, self.election_deadline(now), set(), []), now)
        elif self.core.leader_id != NO_ID:
            self.to_follower(self.core.epoch, self.core.leader_id, now)
        else:
            self.to_unattached(self.core.epoch, now)
