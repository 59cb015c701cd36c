"""Partition state and the one place where a partition change is decided.

``PartitionChange`` takes targets (ISR, replicas, reassignment sets) and works out the leader
(clean, then eligible leader replicas of KIP-966, then unclean of KIP-704 when allowed), the
ELR and the leader recovery state, and emits a PartitionChangeRecord holding only what
changed. Every path that touches a partition (AlterPartition, elections, fencing, controlled
shutdown, reassignment) goes through it, so the rules live once.
"""

from __future__ import annotations

from typing import Callable

from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.constants import DIRECTORY_MIGRATING, NO_LEADER, NO_LEADER_CHANGE, LeaderRecoveryState
from server.controller.shared_lists import SharedLists

# tools.broker imports these two from here.
RECOVERED, RECOVERING = LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING


class PartitionState:
    __slots__ = ("topic_id", "partition_id", "replicas", "isr", "removing", "adding", "leader",
                 "leader_epoch", "partition_epoch", "recovery", "elr", "last_known_elr", "directories")

    def __init__(self, topic_id: bytes, partition_id: int, replicas: list[int], isr: list[int],
                 leader: int, leader_epoch: int = 0, partition_epoch: int = 0,
                 removing: list[int] | None = None, adding: list[int] | None = None,
                 recovery: int = LeaderRecoveryState.RECOVERED, elr: list[int] | None = None,
                 last_known_elr: list[int] | None = None, directories: list[bytes] | None = None) -> None:
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.replicas = replicas
        self.isr = isr
        self.removing = [] if removing is None else removing
        self.adding = [] if adding is None else adding
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.recovery = recovery
        self.elr = [] if elr is None else elr
        self.last_known_elr = [] if last_known_elr is None else last_known_elr
        self.directories = [] if directories is None else directories

    @classmethod
    def from_record(cls, rec: PartitionRecord, shared: SharedLists | None = None) -> "PartitionState":
        # Records from before directory assignment carry none: every replica's directory is
        # then unassigned, which is what a newer record would say explicitly.
        directories = rec.directories or [DIRECTORY_MIGRATING] * len(rec.replicas)
        if shared is None:
            return cls(rec.topic_id, rec.partition_id, rec.replicas, rec.isr, rec.leader, rec.leader_epoch,
                       rec.partition_epoch, rec.removing_replicas, rec.adding_replicas,
                       rec.leader_recovery_state, rec.eligible_leader_replicas, rec.last_known_elr, directories)
        of = shared.of
        return cls(rec.topic_id, rec.partition_id, of(rec.replicas), of(rec.isr), rec.leader, rec.leader_epoch,
                   rec.partition_epoch, of(rec.removing_replicas), of(rec.adding_replicas),
                   rec.leader_recovery_state, of(rec.eligible_leader_replicas or ()),
                   of(rec.last_known_elr or ()), of(directories))

    def to_record(self, version: int) -> PartitionRecord:
        rec = PartitionRecord(
            partition_id=self.partition_id, topic_id=self.topic_id, replicas=list(self.replicas),
            isr=list(self.isr), removing_replicas=list(self.removing), adding_replicas=list(self.adding),
            leader=self.leader, leader_recovery_state=self.recovery, leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch)
        if version >= 1:
            rec.directories = list(self.directories)
        if version >= 2:
            rec.eligible_leader_replicas = list(self.elr) if self.elr else None
            rec.last_known_elr = list(self.last_known_elr) if self.last_known_elr else None
        return rec

    def copy(self) -> "PartitionState":
        """A copy to work changes out on: lists in state are replaced, never edited in place,
        so they are shared."""
        copy = PartitionState.__new__(PartitionState)
        for name in PartitionState.__slots__:
            setattr(copy, name, getattr(self, name))
        return copy

    def apply_change(self, rec: PartitionChangeRecord) -> None:
        """Replay: Kafka bumps the leader epoch whenever the record names a leader."""
        if rec.isr is not None:
            self.isr = rec.isr
        if rec.leader != NO_LEADER_CHANGE:
            self.leader = rec.leader
            self.leader_epoch += 1
        if rec.replicas is not None:
            self.replicas = rec.replicas
            if not rec.directories:
                self.directories = [DIRECTORY_MIGRATING] * len(rec.replicas)
        if rec.removing_replicas is not None:
            self.removing = rec.removing_replicas
        if rec.adding_replicas is not None:
            self.adding = rec.adding_replicas
        if rec.leader_recovery_state != LeaderRecoveryState.NO_CHANGE:
            self.recovery = rec.leader_recovery_state
        if rec.directories:
            self.directories = rec.directories
        if rec.eligible_leader_replicas is not None:
            self.elr = rec.eligible_leader_replicas
        if rec.last_known_elr is not None:
            self.last_known_elr = rec.last_known_elr
        self.partition_epoch += 1

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def target_replicas(self) -> list[int]:
        """Where an ongoing reassignment is heading."""
        return [r for r in self.replicas if r not in self.removing]

    def original_replicas(self) -> list[int]:
        """Where an ongoing reassignment started."""
        return [r for r in self.replicas if r not in self.adding]


class Election:
    NORMAL = "normal"  # keep the leader if it may stay, else elect from the ISR (then ELR)
    PREFERRED = "preferred"  # move leadership to the first replica if it is in the ISR
    UNCLEAN = "unclean"  # as NORMAL, but fall back to any live replica (KIP-704)


class PartitionChange:
    def __init__(self, partition: PartitionState, usable: Callable[[int], bool], *,
                 min_isr: int, elr_enabled: bool, unclean_allowed: bool, record_version: int,
                 bump_epoch_on_isr_shrink: bool = False,
                 default_dir: Callable[[int], bytes] = lambda broker_id: DIRECTORY_MIGRATING) -> None:
        self.p = partition
        self.usable = usable
        self.default_dir = default_dir
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled and record_version >= 2
        self.unclean_allowed = unclean_allowed
        self.version = record_version
        self.isr = list(partition.isr)
        self.replicas = list(partition.replicas)
        self.removing = list(partition.removing)
        self.adding = list(partition.adding)
        self.recovery = partition.recovery
        self.election = Election.NORMAL
        self.bump_leader_epoch = False
        # Before metadata.version 3.6-IV0 brokers needed a new leader epoch whenever the ISR
        # shrank (KAFKA-15021), so Kafka's controller gives them one.
        self.bump_epoch_on_isr_shrink = bump_epoch_on_isr_shrink
        self.unclean = False  # set by build(): the leader was elected uncleanly
        # Set after build(): the leader the change ends with.
        self.leader = partition.leader
        self.isr_after = self.isr

    def build(self) -> PartitionChangeRecord | None:
        p = self.p
        self._complete_reassignment()
        isr = [r for r in self.isr if r in self.replicas]
        elr = [r for r in p.elr if r in self.replicas and r not in isr]
        leader, isr, elr, recovery = self._elect(isr, elr)
        elr = self._eligible_replicas(isr, elr)
        last_known = self._last_known_leader(isr, leader)
        self.leader = leader
        self.isr_after = isr
        rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id)
        changed = False
        if isr != p.isr:
            rec.isr = isr
            changed = True
        shrinks = rec.isr is not None and any(r not in isr for r in p.isr)
        if leader != p.leader or self.bump_leader_epoch or any(r not in self.replicas for r in p.replicas) \
                or (shrinks and self.bump_epoch_on_isr_shrink):
            rec.leader = leader
            changed = True
        if self.replicas != p.replicas:
            rec.replicas = self.replicas
            if self.version >= 1:
                # A replica that stays keeps its directory; a new one gets its broker's default.
                dirs = dict(zip(p.replicas, p.directories))
                rec.directories = [dirs[r] if r in dirs else self.default_dir(r) for r in self.replicas]
            changed = True
        if self.removing != p.removing:
            rec.removing_replicas = self.removing
            changed = True
        if self.adding != p.adding:
            rec.adding_replicas = self.adding
            changed = True
        if recovery != p.recovery:
            rec.leader_recovery_state = recovery
            changed = True
        if self.version >= 2:
            if elr != p.elr:
                rec.eligible_leader_replicas = elr
                changed = True
            if last_known != p.last_known_elr:
                rec.last_known_elr = last_known
                changed = True
        return rec if changed else None

    def _complete_reassignment(self) -> None:
        """Kafka's PartitionReassignmentReplicas.maybeCompleteReassignment: once the ISR
        without the replicas being removed holds every replica that stays, the reassignment
        is over, whichever change brought the ISR there."""
        if not self.removing and not self.adding:
            return
        isr = [r for r in self.isr if r not in self.removing]
        replicas = [r for r in self.replicas if r not in self.removing]
        if isr and replicas and all(r in isr for r in replicas):
            self.isr, self.replicas, self.removing, self.adding = isr, replicas, [], []

    def _elect(self, isr: list[int], elr: list[int]) -> tuple[int, list[int], list[int], int]:
        p = self.p
        recovery = self.recovery
        current = p.leader
        keep = current in isr and current in self.replicas and self.usable(current)
        if self.election == Election.PREFERRED:
            preferred = self.replicas[0]
            if preferred in isr and self.usable(preferred):
                return preferred, isr, elr, recovery
        if keep:
            return current, isr, elr, recovery
        for r in self.replicas:
            if r in isr and self.usable(r):
                return r, isr, elr, recovery
        if self.elr_enabled:
            for r in self.replicas:
                if r in elr and self.usable(r):
                    # An eligible leader replica holds everything committed: a clean election.
                    return r, [r], [e for e in elr if e != r], recovery
        last = p.last_known_elr
        if self.elr_enabled and not isr and not elr and len(last) == 1 and self.usable(last[0]):
            # KIP-966's balanced recovery: with nobody eligible left, the last leader is the
            # replica most likely to hold everything; it leads uncleanly, as Kafka elects it.
            self.unclean = True
            return last[0], [last[0]], [], LeaderRecoveryState.RECOVERING
        if self.unclean_allowed or self.election == Election.UNCLEAN:
            for r in self.replicas:
                if self.usable(r):
                    # KIP-704: data may be lost; the new leader must recover before the ISR grows.
                    self.unclean = True
                    return r, [r], [], LeaderRecoveryState.RECOVERING
        return NO_LEADER, isr, elr, recovery

    def _eligible_replicas(self, isr: list[int], elr: list[int]) -> list[int]:
        """KIP-966: members leaving an ISR smaller than min.insync.replicas stay eligible."""
        p = self.p
        if not self.elr_enabled or self.unclean:
            # After an unclean election nobody is known to hold everything committed.
            return []
        min_isr = min(self.min_isr, len(self.replicas))
        if len(isr) >= min_isr:
            return []
        leaving = [r for r in p.isr if r not in isr and r in self.replicas]
        return [r for r in self.replicas if (r in elr or r in leaving) and r not in isr]

    def _last_known_leader(self, isr: list[int], leader: int) -> list[int]:
        """Kafka's LastKnownElr with useLastKnownLeaderInBalancedRecovery: the leader the
        partition had when its ISR emptied, kept while it stays leaderless (an unclean
        restart of that broker included) and cleared once it has a leader again."""
        p = self.p
        if not self.elr_enabled:
            return list(p.last_known_elr)
        if p.isr and not isr and p.leader != NO_LEADER:
            return [p.leader]
        if leader != NO_LEADER:
            return []
        return list(p.last_known_elr)
