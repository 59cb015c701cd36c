"""The states a KRaft voter moves through (KIP-595, with KIP-996's prospective state), and the
part of them that must survive a restart.

Only ``Election`` is persisted: the epoch, the vote given in it and the leader known for it.
Everything else (timers, tallies, replica progress) is rebuilt after a restart, which is why
a restarted leader comes back resigned and a restarted candidate comes back a candidate of
the same epoch: neither may vote for someone else in an epoch it already voted in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from protocol.generated.messages.fetch_request import FetchRequest
from protocol.primitives import ZERO_UUID
from server.raft.fetch import FetchPolicy
from server.raft.types import Endpoints, OffsetAndEpoch, ReplicaKey
from server.raft.voters import VoterNode, VoterSet

NO_ID = -1


@dataclass(frozen=True)
class Election:
    """What the quorum-state file holds."""

    epoch: int
    leader_id: int = NO_ID
    voted_id: int = NO_ID
    # The directory of the replica voted for (KIP-853): a voter whose disk was replaced comes
    # back under the same id with another directory, and is not the replica that got the vote.
    # Zero when the vote predates directory ids, which matches any directory of that id.
    voted_directory_id: bytes = ZERO_UUID

    def carried_to(self, epoch: int, leader_id: int = NO_ID) -> Election:
        """This election's vote in ``epoch``, where it still holds (one vote per epoch)."""
        if epoch != self.epoch:
            return Election(epoch, leader_id)
        return Election(epoch, leader_id, self.voted_id, self.voted_directory_id)

    def voted_for(self, candidate: int, directory_id: bytes) -> bool:
        """Whether the vote of this epoch went to the replica ``candidate`` in ``directory_id``."""
        return self.voted_id == candidate and self.voted_directory_id in (ZERO_UUID, directory_id)


@dataclass
class Tally:
    """Votes (or pre-votes) collected in one election."""

    voters: frozenset[int]
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def won(self) -> bool:
        return len(self.granted) >= self.majority

    @property
    def lost(self) -> bool:
        """Too many rejections for a majority to be possible any more."""
        return len(self.voters) - len(self.rejected) < self.majority

    def record(self, voter: int, granted: bool) -> None:
        if voter in self.voters and voter not in self.granted and voter not in self.rejected:
            (self.granted if granted else self.rejected).add(voter)

    def unrecorded(self) -> list[int]:
        return sorted(self.voters - self.granted - self.rejected)


class _NoLeaderYet:
    """Unattached and Prospective: may still give this epoch's vote."""

    election: Election

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        """A pre-vote only asks whether the candidate's log is as good; a vote is given once an
        epoch, and not while a leader of the epoch is known."""
        if pre_vote:
            return log_up_to_date
        if self.election.voted_id != NO_ID:
            return self.election.voted_for(candidate.id, candidate.directory_id)
        return self.election.leader_id == NO_ID and log_up_to_date


@dataclass
class Unattached(_NoLeaderYet):
    """No leader known for the epoch; "voted" when ``election.voted_id`` is set."""

    election: Election
    election_deadline: int


@dataclass
class Prospective(_NoLeaderYet):
    """Asking for pre-votes without raising the epoch (KIP-996); keeps the leader and vote
    it had, so losing the pre-vote leaves everything as it was."""

    election: Election
    election_deadline: int
    tally: Tally


@dataclass
class Candidate:
    election: Election  # voted for itself in the raised epoch
    election_deadline: int
    tally: Tally

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and log_up_to_date  # its real vote went to itself


@dataclass
class SnapshotDownload:
    """A snapshot being fetched from the leader (FetchSnapshot), chunk by chunk."""

    snapshot: OffsetAndEpoch
    data: bytearray = field(default_factory=bytearray)


@dataclass
class Follower:
    election: Election
    fetch_deadline: int
    # A follower that has heard from its leader refuses pre-votes: the leader is alive.
    has_fetched: bool = False
    # Set while the leader's log starts after this one ends.
    download: SnapshotDownload | None = None
    # This voter asked the leader (UpdateRaftVoter) to record its current listeners.
    update_sent: bool = False

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        # A follower still hearing from its leader denies pre-votes, so a voter coming back
        # from a partition cannot start an election against a live leader.
        return pre_vote and not self.has_fetched and log_up_to_date


@dataclass
class ParkedFetch:
    """A Fetch with nothing to return yet, answered on new data, a new high watermark or
    its MaxWaitMs (KafkaRaftClient's fetch purgatory)."""

    source: int
    correlation_id: int
    deadline: int
    request: FetchRequest
    version: int  # the request's, which the answer must fit
    policy: FetchPolicy


@dataclass
class ReplicaProgress:
    """What a leader knows of one replica's fetching (DescribeQuorum's ReplicaState)."""

    log_end_offset: int = -1  # the fetch offset of its last valid Fetch in this epoch
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1  # the last time it fetched from the leader's log end
    directory_id: bytes = ZERO_UUID  # as its Fetch named it (v17+)


@dataclass
class Leader:
    election: Election
    epoch_start_offset: int
    granting_voters: frozenset[int]
    check_quorum_deadline: int
    begin_epoch_due: int
    # Voters and observers that fetched in this epoch. A voter's log end offset is flushed
    # there, so it counts towards the high watermark.
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)
    voters_fetched: set[int] = field(default_factory=set)  # since the check-quorum timer was reset
    begin_epoch_acked: set[int] = field(default_factory=set)
    parked: list[ParkedFetch] = field(default_factory=list)
    announced: bool = False  # BecameLeader sent, once the epoch start is committed
    resign_requested: bool = False
    # The one voter change in flight (AddRaftVoter, RemoveRaftVoter), if any.
    change: "VoterChange | None" = None
    # Batches taken by ``prepare_append``, appended at the core's next step; the offset after them.
    prepared: list[bytes] = field(default_factory=list)
    prepared_end: int = -1
    # Under kraft.version 0, the voters' keys and listeners as their UpdateRaftVoter told them:
    # what the upgrade to kraft.version 1 writes as the first voter set.
    learnt_voters: dict[int, VoterNode] = field(default_factory=dict)

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        return False  # it leads (or led) this epoch


class ChangeKind(Enum):
    ADD = "AddRaftVoter"
    REMOVE = "RemoveRaftVoter"


@dataclass
class VoterChange:
    """A membership change the leader works on: answered once its VotersRecord (appended at
    ``last_offset``) commits, or failed when ``deadline`` passes or leadership goes."""

    kind: ChangeKind
    source: int
    correlation_id: int
    deadline: int
    key: ReplicaKey  # the voter added or removed
    endpoints: Endpoints = ()
    last_offset: int | None = None  # None: not in the log yet (ApiVersions pending)
    voters: VoterSet | None = None  # the voter set written, once it is


@dataclass
class Resigned:
    """A leader stepping down: it tells the voters (EndQuorumEpoch) and never leads this
    epoch again."""

    election: Election
    election_deadline: int
    unacked: set[int]
    successors: list[int]

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool) -> bool:
        return False  # it leads (or led) this epoch


EpochState = Unattached | Prospective | Candidate | Follower | Leader | Resigned
