"""Replication control: topics, partitions, ISR, elections and reassignments.

Replayed state: topics and their partitions. Derived indexes (kept by replay only): which
partitions each broker is in the ISR and the ELR of, which partitions have no leader, and
which are being reassigned, so that fencing or registering a broker or listing reassignments
never scans every partition.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import Callable, Iterable, Iterator, NamedTuple

from protocol.constants import NO_LEADER, NO_LEADER_CHANGE, ElectionType, LeaderRecoveryState
from protocol.error_codes import Error
from protocol.generated.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from protocol.generated.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse, ReassignablePartitionResponse, ReassignableTopicResponse)
from protocol.generated.messages.alter_partition_request import AlterPartitionRequest
from protocol.generated.messages.alter_partition_request import PartitionData as AlterPartitionData
from protocol.generated.messages.alter_partition_response import AlterPartitionResponse
from protocol.generated.messages.alter_partition_response import PartitionData as AlterPartitionResult
from protocol.generated.messages.alter_partition_response import TopicData as AlterPartitionTopicResult
from protocol.generated.messages.elect_leaders_request import ElectLeadersRequest
from protocol.generated.messages.elect_leaders_response import (
    ElectLeadersResponse, PartitionResult, ReplicaElectionResult)
from protocol.generated.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from protocol.generated.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse, OngoingPartitionReassignment, OngoingTopicReassignment)
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.remove_topic_record import RemoveTopicRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.primitives import uuid_to_str
from server.controller import event_log
from server.controller.cluster import ClusterControl
from server.controller.configs import ConfigControl
from server.controller.features import MV_3_6_IV0, FeatureControl
from server.controller.offsets import OffsetControl, UndoEntry, restore_key
from server.controller.partitions import Election, PartitionChange, PartitionState
from server.controller.result import SLICE_RECORDS, ControllerResult, VersionedRecord
from server.controller.shapes import CopiedChange, Shape, ShapeReplay
from server.controller.shared_lists import SharedLists


# min.insync.replicas, eligible leader replicas enabled, unclean leader election enabled
TopicSettings = tuple[int, bool, bool]


class Refusal(NamedTuple):
    """Why AlterPartition refuses a partition, at the level Kafka's ReplicationControlManager
    logs it (a sender ahead of this controller is routine; an ISR without its leader is not)."""
    code: int
    level: int
    reason: str


@dataclass
class TopicState:
    name: str
    topic_id: bytes
    partitions: list[PartitionState] = field(default_factory=list)


class ReplicationControl:
    def __init__(self, cluster: ClusterControl, features: FeatureControl, configs: ConfigControl,
                 offsets: OffsetControl | None = None, slice_records: int = SLICE_RECORDS) -> None:
        self.offsets = offsets or OffsetControl()
        # Above this many records, moving leaderships or electing leaders is written in slices.
        self.slice_records = slice_records
        self.cluster = cluster
        self.features = features
        self.configs = configs
        self.topics: dict[bytes, TopicState] = {}
        self.names: dict[str, bytes] = {}
        # Topic names by their form with '.' read as '_': the two collide in metric names,
        # so Kafka refuses a new topic whose form another topic already has.
        self.collisions: dict[str, set[str]] = {}
        self.isr_of: dict[int, set[PartitionState]] = {}
        self.elr_of: dict[int, set[PartitionState]] = {}  # eligible leader replicas (KIP-966)
        self.leaderless: set[PartitionState] = set()
        self.reassigning: set[PartitionState] = set()
        self.partition_count = 0
        # Equal replica lists, ISRs and directory lists of different partitions are one object.
        self.shared = SharedLists()

    # --- replay ------------------------------------------------------------------------------
    def replay_topic(self, rec: TopicRecord) -> None:
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self.topics, rec.topic_id))
            self.offsets.on_undo(restore_key(self.names, rec.name))
        self.topics[rec.topic_id] = TopicState(rec.name, rec.topic_id)
        self.names[rec.name] = rec.topic_id
        self._index_collision(rec.name)

    def replay_partition(self, rec: PartitionRecord) -> None:
        self.add_partition(PartitionState.from_record(rec, self.shared))

    def add_partition(self, p: PartitionState) -> None:
        """Replay a PartitionRecord already turned into state (see partition_values)."""
        topic = self.topics[p.topic_id]
        if p.partition_id < len(topic.partitions):
            old = topic.partitions[p.partition_id]
            self._unindex(old)
            topic.partitions[p.partition_id] = p
            if self.offsets.recording:
                self.offsets.on_undo(lambda: self._put_partition(topic, old))
        else:
            topic.partitions.append(p)
            self.partition_count += 1
            if self.offsets.recording:
                self.offsets.on_undo(lambda: self._drop_last_partition(topic))
        self._index(p)

    def _put_partition(self, topic: TopicState, p: PartitionState) -> None:
        self._unindex(topic.partitions[p.partition_id])
        topic.partitions[p.partition_id] = p
        self._index(p)

    def _drop_last_partition(self, topic: TopicState) -> None:
        self._unindex(topic.partitions.pop())
        self.partition_count -= 1

    def replay_partition_change(self, rec: PartitionChangeRecord) -> None:
        p = self.topics[rec.topic_id].partitions[rec.partition_id]
        if self.offsets.recording:
            self.offsets.on_undo(partial(self._restore_partition, p, _partition_values(p)))
        isr, elr, leader = p.isr, p.elr, p.leader
        reassigning = bool(p.adding or p.removing)
        p.apply_change(rec)
        # Only what the change moved is re-indexed: fencing a fleet replays a million changes
        # that each take one or two brokers out of an ISR.
        if p.isr is not isr:
            self._move_index(self.isr_of, p, isr, p.isr)
        if p.elr is not elr:
            self._move_index(self.elr_of, p, elr, p.elr)
        if p.leader != leader:
            if p.leader == NO_LEADER:
                self.leaderless.add(p)
            elif leader == NO_LEADER:
                self.leaderless.discard(p)
        if bool(p.adding or p.removing) != reassigning:
            if reassigning:
                self.reassigning.discard(p)
            else:
                self.reassigning.add(p)

    def replay_copies(self, records: list[VersionedRecord], start: int, base_offset: int) -> int:
        """Replay the run of copied changes (``CopiedChange``) that begins at ``records[start]``,
        ``records[0]`` being at ``base_offset``; returns where the run ends. Each copy replays
        as its shape's change replayed on a partition in the same state, worked out once per
        shape: the same fields take the same values and the same brokers move in the indexes,
        and its undo puts back what the shape found. A copy whose partition is in another state
        replays as any change does."""
        offsets = self.offsets
        recording = offsets.recording
        topics, isr_of, leaderless = self.topics, self.isr_of, self.leaderless
        unreplay = self._unreplay_copy
        undos: list[UndoEntry] = []
        i = start
        try:
            for i in range(start, len(records)):
                rec = records[i][0]
                if rec.__class__ is not CopiedChange:
                    break
                p = topics[rec.topic_id].partitions[rec.partition_id]
                replay = rec.shape.replay or rec.shape.learn_replay(p)
                if not replay.plain or replay.read(p) != replay.before:
                    offsets.add_undos(undos)
                    undos = []
                    offsets.replaying(base_offset + i)
                    self.replay_partition_change(rec)
                    continue
                for name, value in zip(replay.fields, replay.after):
                    setattr(p, name, value)
                p.leader_epoch += replay.leader_bump
                p.partition_epoch += 1
                for b in replay.isr_out:
                    isr_of[b].discard(p)
                for b in replay.isr_in:
                    members = isr_of.get(b)
                    if members is None:
                        members = isr_of[b] = set()
                    members.add(p)
                if replay.leaderless > 0:
                    leaderless.add(p)
                elif replay.leaderless < 0:
                    leaderless.discard(p)
                if recording:
                    undos.append((base_offset + i, unreplay, p, replay))
            else:
                i = len(records)
        finally:
            offsets.add_undos(undos)
        offsets.replayed(base_offset + i - 1)
        return i

    def _unreplay_copy(self, p: PartitionState, replay: ShapeReplay) -> None:
        for name, value in zip(replay.fields, replay.restore):
            setattr(p, name, value)
        p.leader_epoch -= replay.leader_bump
        p.partition_epoch -= 1
        for b in replay.isr_in:
            self.isr_of[b].discard(p)
        for b in replay.isr_out:
            self.isr_of.setdefault(b, set()).add(p)
        if replay.leaderless > 0:
            self.leaderless.discard(p)
        elif replay.leaderless < 0:
            self.leaderless.add(p)

    @staticmethod
    def _move_index(index: dict[int, set[PartitionState]], p: PartitionState,
                    before: list[int], after: list[int]) -> None:
        for b in before:
            if b not in after:
                members = index.get(b)
                if members is not None:
                    members.discard(p)
        for b in after:
            if b not in before:
                members = index.get(b)
                if members is None:
                    members = index[b] = set()
                members.add(p)

    def _restore_partition(self, p: PartitionState, values: tuple[object, ...]) -> None:
        self._unindex(p)
        for name, value in zip(PartitionState.__slots__, values):
            setattr(p, name, value)
        self._index(p)

    def replay_remove_topic(self, rec: RemoveTopicRecord) -> None:
        topic = self.topics.pop(rec.topic_id)
        del self.names[topic.name]
        self._unindex_collision(topic.name)
        for p in topic.partitions:
            self._unindex(p)
        self.partition_count -= len(topic.partitions)
        if self.offsets.recording:
            self.offsets.on_undo(lambda: self._restore_topic(topic))
        self.configs.forget_topic(topic.name)

    def _restore_topic(self, topic: TopicState) -> None:
        self.topics[topic.topic_id] = topic
        self.names[topic.name] = topic.topic_id
        self._index_collision(topic.name, record_undo=False)
        for p in topic.partitions:
            self._index(p)
        self.partition_count += len(topic.partitions)

    def _index_collision(self, name: str, record_undo: bool = True) -> None:
        if "." not in name and "_" not in name:
            return
        key = collision_key(name)
        if record_undo and self.offsets.recording:
            self.offsets.on_undo(lambda: self._unindex_collision(name))
        self.collisions.setdefault(key, set()).add(name)

    def _unindex_collision(self, name: str) -> None:
        names = self.collisions.get(collision_key(name))
        if names is not None:
            names.discard(name)
            if not names:
                del self.collisions[collision_key(name)]

    def colliding_topic(self, name: str) -> str | None:
        """An existing topic other than ``name`` whose name collides with it, or None."""
        others = self.collisions.get(collision_key(name), set()) - {name}
        return min(others) if others else None

    def _index(self, p: PartitionState) -> None:
        isr_of = self.isr_of
        for b in p.isr:
            members = isr_of.get(b)
            if members is None:
                members = isr_of[b] = set()
            members.add(p)
        for b in p.elr:
            self.elr_of.setdefault(b, set()).add(p)
        if p.leader == NO_LEADER:
            self.leaderless.add(p)
        if p.adding or p.removing:
            self.reassigning.add(p)

    def _unindex(self, p: PartitionState) -> None:
        for b in p.isr:
            members = self.isr_of.get(b)
            if members is not None:
                members.discard(p)
        for b in p.elr:
            eligible = self.elr_of.get(b)
            if eligible is not None:
                eligible.discard(p)
        self.leaderless.discard(p)
        self.reassigning.discard(p)

    # --- building changes ----------------------------------------------------------------------
    def change(self, p: PartitionState, usable: Callable[[int], bool] | None = None,
               settings: TopicSettings | None = None) -> PartitionChange:
        min_isr, elr_enabled, unclean_allowed = settings or self.settings(p.topic_id)
        return PartitionChange(
            p, usable or self.cluster.is_usable,
            min_isr=min_isr, elr_enabled=elr_enabled, unclean_allowed=unclean_allowed,
            record_version=self.features.partition_record_version(),
            bump_epoch_on_isr_shrink=self.features.metadata_version < MV_3_6_IV0,
            default_dir=self.cluster.default_dir)

    def settings(self, topic_id: bytes) -> TopicSettings:
        """The topic's configs that elections follow: min.insync.replicas, eligible leader
        replicas, unclean elections."""
        name = self.topics[topic_id].name
        return (self.configs.min_insync_replicas(name), self.configs.elr_enabled(name),
                self.configs.unclean_leader_election(name))

    def _record(self, change: PartitionChange) -> list[VersionedRecord]:
        rec = change.build()
        return [] if rec is None else [(rec, change.version)]

    # --- leadership, as the broker lifecycle needs it -----------------------------------------
    def leads_any(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for p in self.isr_of.get(broker_id, ()))

    def move_leadership_away(self, broker_id: int,
                             only: Iterable[PartitionState] | None = None) -> list[VersionedRecord]:
        """Take ``broker_id`` out of every ISR (or those of ``only``) and elect new leaders
        where it led.

        Without eligible leader replicas the last ISR member stays in the ISR (the partition
        goes leaderless), so that it can lead again when it comes back; with them enabled the
        ISR may empty and the member is remembered in the ELR instead.
        """
        return list(self.leadership_moves(broker_id, only))

    def leadership_moves(self, broker_id: int, only: Iterable[PartitionState] | None = None) -> Iterator[VersionedRecord]:
        """``move_leadership_away``, one partition at a time: each change is built when it is
        asked for, on the state as it is then, so that the work can be cut into slices that
        are applied in between. A partition that left the broker's ISR meanwhile (changed,
        deleted) is passed over."""
        def usable(b: int) -> bool:
            return b != broker_id and self.cluster.is_usable(b)

        members = self.isr_of.get(broker_id, set())
        topic_id, settings = b"", None
        for p in sorted(members if only is None else members.intersection(only), key=_order):
            if p not in members:
                continue
            if p.topic_id != topic_id or settings is None:
                # Partitions come topic by topic, and the configs are read once per topic: a
                # topic's partitions move as under one reading of its configs, as they would
                # in one command.
                topic_id, settings = p.topic_id, self.settings(p.topic_id)
            change = self._without(p, broker_id, usable, settings)
            rec = change.build()
            if rec is not None:
                yield rec, change.version

    def _without(self, p: PartitionState, broker_id: int, electable: Callable[[int], bool],
                 settings: TopicSettings) -> PartitionChange:
        """``broker_id`` out of the ISR of ``p``; without eligible leader replicas the last
        member stays, so that it can lead again when it comes back."""
        change = self.change(p, electable, settings)
        remaining = [r for r in p.isr if r != broker_id]
        if remaining or change.elr_enabled:
            change.isr = remaining
        return change

    def fencing_moves(self, brokers: list[int], fencing: Callable[[int], bool]) -> Iterator[VersionedRecord | None]:
        """Take ``brokers``, whose leases ran out together, out of every ISR and elect new
        leaders where they led, in one pass over the partitions: each partition's change is
        built when it is asked for, on the state as it is then, and a partition gets one
        record however many of them it held. ``brokers`` is the order in which Kafka fences
        them, one at a time; the state each partition ends in (leader, ISR, ELR, recovery)
        is the one Kafka's order leaves. ``fencing(b)`` turns false for a broker that is
        fenced, registers again or goes away meanwhile: it is left where it is from then on;
        it reads replayed state only, so it is asked again only once something was replayed.
        A partition looked at that needs no change yields None, so that a slice can count the
        partitions it looks at, and not only the records it writes.

        Kafka hands a partition from one dead broker to the next before a live replica gets
        it; a broker fenced in this pass is passed over instead, which ends where Kafka's last
        move ends. Where passing over would leave the partition leaderless while eligible
        leader replicas are kept or unclean elections allowed, the moves are worked out one
        broker at a time as Kafka makes them (Kafka's moves may then elect a dead replica
        uncleanly, and decide the last known leader), and written as one record."""
        order = {b: i for i, b in enumerate(brokers)}
        cluster = self.cluster
        usable = cluster.is_usable
        offsets, features = self.offsets, self.features
        replayed_to = -1
        still: frozenset[int] = frozenset()
        # Partitions in the same state (the same shared lists, leader, configs, and replicas
        # as usable) get the same change: it is decided once per such shape, so a fleet's
        # million partitions cost a few thousand decisions and a copy each.
        shapes: dict[tuple[object, ...], Shape] = {}
        topic_id: bytes = b""
        settings: TopicSettings = (0, False, False)
        versions = (0, 0)  # the record version, and metadata.version
        # The configs and versions a decision is made under, numbered: a shape's key holds
        # the number, hashed for every partition, rather than the tuples themselves.
        contexts: dict[tuple[TopicSettings, tuple[int, int]], int] = {}
        context = 0
        # Which replicas of a list are usable, by the list's identity, for as long as nothing
        # is replayed and the brokers leaving stay the same (nothing else changes who is usable).
        usable_in: dict[int, tuple[list[int], tuple[bool, ...]]] = {}
        leaving = cluster.leaving
        # The settings of topics that set none of their own, read once until something is
        # replayed: a million partitions are in ten thousand topics.
        cluster_settings: TopicSettings | None = None
        for p in self._partitions_of(brokers):
            if offsets.next_offset != replayed_to or cluster.leaving is not leaving:
                replayed_to, leaving = offsets.next_offset, cluster.leaving
                usable_in, cluster_settings = {}, None
                now = frozenset(b for b in brokers if fencing(b))
                if now != still:
                    still, shapes = now, {}
                versions = (features.partition_record_version(), features.metadata_version)
                context = contexts.setdefault((settings, versions), len(contexts))
            if p.topic_id != topic_id:
                # Partitions come topic by topic, and the configs are read once per topic: a
                # topic's partitions move as under one reading of its configs, as they would
                # in one command.
                topic_id = p.topic_id
                if self.configs.has_topic_configs(self.topics[topic_id].name):
                    settings = self.settings(topic_id)
                else:
                    settings = cluster_settings = cluster_settings or self.settings(topic_id)
                context = contexts.setdefault((settings, versions), len(contexts))
            if settings[1] or settings[2] or p.adding or p.removing:
                dead = [r for r in p.isr if r in still]
                if not dead:
                    yield None
                    continue
                dead.sort(key=order.__getitem__)
                # Kafka's moves may elect a broker fenced later in the pass, which must then
                # leave the ISR it joined in turn.
                rec = self._one_by_one(p, [b for b in brokers[order[dead[0]]:] if b in still], order, settings)
                yield None if rec is None else (rec, versions[0])
                continue
            # Lists in state are shared and never changed in place: who they are says what
            # they hold, as long as the shape keeps them alive.
            replicas = p.replicas
            known = usable_in.get(id(replicas))
            if known is None or known[0] is not replicas:
                known = usable_in[id(replicas)] = (replicas, tuple(map(usable, replicas)))
            key = (id(p.isr), id(replicas), id(p.elr), id(p.last_known_elr), p.leader, p.recovery, context, known[1])
            shape = shapes.get(key)
            if shape is None:
                if len(shapes) >= _MAX_SHAPES:
                    shapes.clear()
                shape = shapes[key] = Shape(self._without_dead(p, still, order, settings), versions[0],
                                            (p.isr, p.replicas, p.elr, p.last_known_elr))
            yield None if shape.change is None else (shape.copy_to(p), versions[0])

    def _without_dead(self, p: PartitionState, still: frozenset[int], order: dict[int, int],
                      settings: TopicSettings) -> PartitionChangeRecord | None:
        """The change that takes the brokers of ``still`` out of the ISR of ``p``, neither
        eligible leader replicas nor unclean elections being allowed: every step of Kafka's
        order shrinks the ISR by one dead member (the last one stays) and keeps or elects a
        live leader, so the last step's state is reached at once."""
        dead = [r for r in p.isr if r in still]
        if not dead:
            return None
        dead.sort(key=order.__getitem__)
        isr = [r for r in p.isr if r not in dead] or [dead[-1]]
        if isr == p.isr and p.leader == NO_LEADER:
            return None  # already where the moves end: nothing to write
        change = self.change(p, self.cluster.is_usable, settings)
        change.isr = isr
        return change.build()

    def _partitions_of(self, brokers: list[int]) -> Iterator[PartitionState]:
        """The partitions whose ISR holds any of ``brokers``, as ``_in_partition_order`` gives
        them."""
        held = sum(len(self.isr_of.get(b, ())) for b in brokers)
        return self._in_partition_order(held, lambda: set().union(*(self.isr_of.get(b, ()) for b in brokers)))

    def _in_partition_order(self, count: int, members: Callable[[], Iterable[PartitionState]]
                            ) -> Iterator[PartitionState]:
        """The partitions ``members()`` gives (``count`` of them), topic by topic in partition
        order, each as it is when it is reached. When they are a good share of all
        partitions, every topic is walked in its own order rather than sorting them all at
        once: a sort of a million partitions would hold the event loop for a second. The walk
        gives the other partitions too, which a slice counts as work done."""
        if count * _WALK_SHARE < self.partition_count:
            for p in sorted(members(), key=_order):
                topic = self.topics.get(p.topic_id)
                if topic is not None and p.partition_id < len(topic.partitions) \
                        and topic.partitions[p.partition_id] is p:
                    yield p
            return
        for topic_id in list(self.topics):
            topic = self.topics.get(topic_id)
            i = 0
            while topic is not None and self.topics.get(topic_id) is topic and i < len(topic.partitions):
                yield topic.partitions[i]
                i += 1

    def _one_by_one(self, p: PartitionState, fenced: list[int], order: dict[int, int],
                    settings: TopicSettings) -> PartitionChangeRecord | None:
        """Kafka's moves for ``p`` as it fences ``fenced`` one at a time, worked out on a copy
        and folded into one record. While one of them is fenced, those after it in ``order``
        are still in service for Kafka: they are passed over where that ends as Kafka ends,
        and elected where Kafka's choice must stand."""
        state = p.copy()
        folded: PartitionChangeRecord | None = None
        for broker_id in fenced:
            if broker_id not in state.isr:
                continue
            position = order[broker_id]

            def usable(b: int) -> bool:
                later = order.get(b)
                if later is None:
                    return self.cluster.is_usable(b)
                registration = self.cluster.brokers.get(b)
                return later > position and registration is not None and not registration.fenced \
                    and not registration.in_controlled_shutdown

            def passing_over(b: int) -> bool:
                return b not in order and usable(b)

            if state.isr == [broker_id] and state.leader == NO_LEADER and not state.elr \
                    and not state.reassigning and not settings[1] and not settings[2]:
                continue  # it keeps its last ISR member and nobody may lead it
            change = self._without(state, broker_id, passing_over, settings)
            rec = change.build()
            if change.leader == NO_LEADER and (change.elr_enabled or change.unclean_allowed):
                # Left without a leader, the partition goes through Kafka's moves: they may
                # elect uncleanly a replica still in service for Kafka, fenced later in the
                # pass, and they decide the last known leader. An unclean leader passing over
                # finds is the one Kafka's last move elects, once every dead replica is out.
                change = self._without(state, broker_id, usable, settings)
                rec = change.build()
            if rec is not None:
                state.apply_change(rec)
                folded = rec if folded is None else fold(folded, rec)
        return folded

    def many_moves(self, broker_id: int) -> bool:
        """Whether moving the broker's leaderships away may take more than one slice."""
        return len(self.isr_of.get(broker_id, ())) > self.slice_records

    def many_elections(self) -> bool:
        """Whether electing leaders for the leaderless partitions may take more than one slice."""
        return len(self.leaderless) > self.slice_records

    def elect_after_unfence(self, broker_id: int) -> list[VersionedRecord]:
        """A broker coming back may lead the partitions that had no leader without it."""
        return [r for r in self.elections_after_unfence(broker_id) if r is not None]

    def elections_after_unfence(self, broker_id: int) -> Iterator[VersionedRecord | None]:
        """``elect_after_unfence``, one partition at a time, each built when asked for: KIP-704
        unclean recovery and ELR elections of many partitions are written in slices. A partition
        that found a leader meanwhile is passed over. A partition looked at that gets no
        election yields None, so that a slice counts it: after a fleet was fenced a million
        partitions may wait without a leader, and finding the returning broker's among them
        is work to cut into slices too."""
        def usable(b: int) -> bool:
            return b == broker_id or self.cluster.is_usable(b)

        leaderless = self.leaderless
        for p in self._in_partition_order(len(leaderless), lambda: leaderless):
            if p in leaderless and broker_id in p.replicas:
                yield from self._record(self.change(p, usable))
            else:
                yield None

    def forget_unclean_broker(self, broker_id: int) -> list[VersionedRecord]:
        """KIP-966: a broker that did not shut down cleanly may have lost unflushed data, so it
        is no longer an eligible leader anywhere."""
        records: list[VersionedRecord] = []
        if self.features.partition_record_version() < 2:
            return records
        for p in sorted(self.elr_of.get(broker_id, ()), key=_order):
            elr = [r for r in p.elr if r != broker_id]
            # The last known leader stays: it may still be elected when nobody else can.
            records.append((PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id,
                                                  eligible_leader_replicas=elr), 2))
        return records

    # --- AlterPartition ------------------------------------------------------------------------
    def alter_partition(self, req: AlterPartitionRequest, version: int) -> ControllerResult:
        broker = self.cluster.brokers.get(req.broker_id)
        if broker is None or req.broker_epoch != broker.epoch:
            return ControllerResult([], AlterPartitionResponse(error_code=Error.STALE_BROKER_EPOCH))
        records: list[VersionedRecord] = []
        response = AlterPartitionResponse()
        for t in req.topics:
            topic_id = t.topic_id if version >= 2 else self.names.get(t.topic_name)
            topic = self.topics.get(topic_id) if topic_id is not None else None
            out = AlterPartitionTopicResult(topic_name=t.topic_name, topic_id=t.topic_id)
            response.topics.append(out)
            if topic is None:
                event_log.alter_partition_unknown(f"topic ID {uuid_to_str(t.topic_id)} or name {t.topic_name}")
            for pd in t.partitions:
                if topic is None:
                    code = Error.UNKNOWN_TOPIC_ID if version >= 2 else Error.UNKNOWN_TOPIC_OR_PARTITION
                    out.partitions.append(AlterPartitionResult(partition_index=pd.partition_index, error_code=code))
                    continue
                result, recs = self._alter_one(req.broker_id, topic, pd, version)
                out.partitions.append(result)
                records += recs
        return ControllerResult(records, response)

    def _alter_one(self, broker_id: int, topic: TopicState, pd: AlterPartitionData, version: int
                   ) -> tuple[AlterPartitionResult, list[VersionedRecord]]:
        """Kafka's checks, in Kafka's order, then the change itself."""
        if not 0 <= pd.partition_index < len(topic.partitions):
            event_log.alter_partition_unknown(f"partition {topic.name}-{pd.partition_index}")
            return AlterPartitionResult(partition_index=pd.partition_index,
                                        error_code=Error.UNKNOWN_TOPIC_OR_PARTITION), []
        refusal = self._refuse_alter(broker_id, topic, pd, version)
        if refusal is not None:
            event_log.alter_partition_refused(broker_id, topic.name, pd.partition_index, refusal.level, refusal.reason)
            return AlterPartitionResult(partition_index=pd.partition_index, error_code=refusal.code), []
        p = topic.partitions[pd.partition_index]
        was_reassigning = p.reassigning
        change = self.change(p)
        if change.unclean_allowed:
            change.election = Election.UNCLEAN
        change.isr = _new_isr(pd, version)
        change.recovery = pd.leader_recovery_state if version >= 1 else LeaderRecoveryState.RECOVERED
        records = self._record(change)
        first = records[0][0] if records else None
        bumped = isinstance(first, PartitionChangeRecord) and first.leader != NO_LEADER_CHANGE
        if bumped and change.leader != broker_id:
            # Completing a reassignment moved the leadership away from the sender: it must
            # learn the new state from the metadata log before it tries again.
            code = Error.NEW_LEADER_ELECTED if version >= 2 else Error.FENCED_LEADER_EPOCH
            event_log.reassignment_completed(broker_id, topic.name, pd.partition_index, code)
            return AlterPartitionResult(partition_index=pd.partition_index, error_code=code), records
        if was_reassigning and records and not (change.adding or change.removing):
            event_log.reassignment_completed(broker_id, topic.name, pd.partition_index, None)
        return AlterPartitionResult(
            partition_index=pd.partition_index, error_code=Error.NONE, leader_id=change.leader,
            leader_epoch=p.leader_epoch + (1 if bumped else 0), isr=change.isr_after,
            leader_recovery_state=change.recovery if records else p.recovery,
            partition_epoch=p.partition_epoch + (1 if records else 0)), records

    def _refuse_alter(self, broker_id: int, topic: TopicState, pd: AlterPartitionData, version: int
                      ) -> Refusal | None:
        p = topic.partitions[pd.partition_index]
        if pd.leader_epoch > p.leader_epoch:
            # The sender knows a newer state than this controller: this is likely no longer
            # the active controller.
            return Refusal(Error.NOT_CONTROLLER, logging.DEBUG,
                           f"its leader epoch {pd.leader_epoch} is newer than the current {p.leader_epoch}")
        if pd.partition_epoch > p.partition_epoch:
            return Refusal(Error.NOT_CONTROLLER, logging.DEBUG,
                           f"its partition epoch {pd.partition_epoch} is newer than the current {p.partition_epoch}")
        if pd.leader_epoch < p.leader_epoch:
            return Refusal(Error.FENCED_LEADER_EPOCH, logging.DEBUG,
                           f"the current leader epoch is {p.leader_epoch}, not {pd.leader_epoch}")
        if broker_id != p.leader:
            return Refusal(Error.INVALID_REQUEST, logging.INFO, f"the current leader is {p.leader}")
        if pd.partition_epoch < p.partition_epoch:
            return Refusal(Error.INVALID_UPDATE_VERSION, logging.INFO,
                           f"the current partition epoch is {p.partition_epoch}, not {pd.partition_epoch}")
        new_isr = _new_isr(pd, version)
        if len(set(new_isr)) != len(new_isr) or any(r not in p.replicas for r in new_isr):
            return Refusal(Error.INVALID_REQUEST, logging.ERROR, f"it specified an invalid ISR {new_isr}")
        if p.leader not in new_isr:
            return Refusal(Error.INVALID_REQUEST, logging.ERROR,
                           f"it specified an invalid ISR {new_isr} that doesn't include itself")
        recovery = pd.leader_recovery_state if version >= 1 else LeaderRecoveryState.RECOVERED
        if recovery == LeaderRecoveryState.RECOVERING and len(new_isr) > 1:
            # KIP-704: no ISR growth before recovery ends
            return Refusal(Error.INVALID_REQUEST, logging.INFO,
                           f"the ISR {new_isr} had more than one replica while the leader was still "
                           f"recovering from an unclean leader election")
        if p.recovery == LeaderRecoveryState.RECOVERED and recovery == LeaderRecoveryState.RECOVERING:
            return Refusal(Error.INVALID_REQUEST, logging.INFO,
                           "the leader recovery state cannot change from RECOVERED to RECOVERING")
        epochs = {s.broker_id: s.broker_epoch for s in pd.new_isr_with_epochs} if version >= 3 else {}
        ineligible = []
        for r in new_isr:
            # Every member is checked, not only the new ones, and a given broker epoch must be
            # the registration's (-1 skips the check).
            b = self.cluster.brokers.get(r)
            if b is None or not self.cluster.is_usable(r) or epochs.get(r, -1) not in (-1, b.epoch):
                ineligible.append(r)
        if ineligible:
            return Refusal(Error.INELIGIBLE_REPLICA if version >= 2 else Error.OPERATION_NOT_ATTEMPTED, logging.INFO,
                           f"it specified ineligible replicas {ineligible} in the new ISR {new_isr}")
        return None

    # --- ElectLeaders ------------------------------------------------------------------------
    def elect_leaders(self, req: ElectLeadersRequest, version: int) -> ControllerResult:
        election_type = req.election_type if version >= 1 else ElectionType.PREFERRED
        if election_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
            # The whole request fails, as in Kafka: each named partition carries the error too.
            unknown = f"Unknown election type {election_type}"
            return ControllerResult([], ElectLeadersResponse(
                error_code=Error.INVALID_REQUEST, replica_election_results=[
                    ReplicaElectionResult(topic=tp.topic, partition_result=[
                        PartitionResult(partition_id=pid, error_code=Error.INVALID_REQUEST, error_message=unknown)
                        for pid in tp.partitions])
                    for tp in req.topic_partitions or ()]))
        if req.topic_partitions is None:
            wanted = [(t.name, p.partition_id) for t in self.topics.values() for p in t.partitions]
            wanted.sort()
        else:
            wanted = [(tp.topic, pid) for tp in req.topic_partitions for pid in tp.partitions]
        records: list[VersionedRecord] = []
        results: dict[str, ReplicaElectionResult] = {}
        for name, pid in wanted:
            code, message, recs = self._elect_one(name, pid, election_type)
            records += recs
            entry = results.setdefault(name, ReplicaElectionResult(topic=name))
            entry.partition_result.append(PartitionResult(partition_id=pid, error_code=code, error_message=message))
        if req.topic_partitions is None:
            # "All partitions" reports only those whose election was needed, as Kafka does;
            # every topic is listed, even one left with no partition to report.
            for entry in results.values():
                entry.partition_result = [r for r in entry.partition_result
                                          if r.error_code != Error.ELECTION_NOT_NEEDED]
            for name in self.names:
                results.setdefault(name, ReplicaElectionResult(topic=name))
            return ControllerResult(records, ElectLeadersResponse(
                replica_election_results=[results[n] for n in sorted(results)]))
        return ControllerResult(records, ElectLeadersResponse(replica_election_results=list(results.values())))

    def _elect_one(self, name: str, pid: int, election_type: int) -> tuple[int, str | None, list[VersionedRecord]]:
        topic_id = self.names.get(name)
        if topic_id is None:
            return Error.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}", []
        if not 0 <= pid < len(self.topics[topic_id].partitions):
            return Error.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{pid}", []
        p = self.topics[topic_id].partitions[pid]
        change = self.change(p)
        if election_type == ElectionType.PREFERRED:
            if p.leader == p.replicas[0]:
                return Error.ELECTION_NOT_NEEDED, "the preferred replica already leads", []
            change.election = Election.PREFERRED
            recs = self._record(change)
            if not recs:
                return Error.PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not in the ISR or not live", []
            # Kafka keeps any change the election made, even one that elects another replica
            # of a leaderless partition because the preferred one cannot lead.
            return Error.NONE, None, recs
        if p.leader != NO_LEADER:
            return Error.ELECTION_NOT_NEEDED, "the partition has a leader", []
        change.election = Election.UNCLEAN
        recs = self._record(change)
        if not recs:
            return Error.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica can lead", []
        return Error.NONE, None, recs

    # --- reassignments -------------------------------------------------------------------------
    def alter_reassignments(self, req: AlterPartitionReassignmentsRequest) -> ControllerResult:
        records: list[VersionedRecord] = []
        response = AlterPartitionReassignmentsResponse()
        for t in req.topics:
            out = ReassignableTopicResponse(name=t.name)
            response.responses.append(out)
            for rp in t.partitions:
                code, message, recs = self._reassign_one(t.name, rp.partition_index, rp.replicas)
                records += recs
                out.partitions.append(ReassignablePartitionResponse(
                    partition_index=rp.partition_index, error_code=code, error_message=message))
        return ControllerResult(records, response)

    def _reassign_one(self, name: str, pid: int, target: list[int] | None
                      ) -> tuple[int, str | None, list[VersionedRecord]]:
        topic_id = self.names.get(name)
        if topic_id is None:
            return Error.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.", []
        if not 0 <= pid < len(self.topics[topic_id].partitions):
            return Error.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{pid}.", []
        p = self.topics[topic_id].partitions[pid]
        change = self.change(p)
        if target is None:
            return self._cancel_reassignment(name, p, change)
        problem = self.assignment_problem(target)
        if problem is not None:
            return Error.INVALID_REPLICA_ASSIGNMENT, problem, []
        # Kafka's PartitionReassignmentReplicas: the current replica list, an ongoing
        # reassignment's additions included, is what the new target is measured against.
        removing = sorted(set(p.replicas) - set(target))
        change.replicas = list(target) + removing
        change.removing = removing
        change.adding = sorted(set(target) - set(p.replicas))
        return Error.NONE, None, self._record(change)

    def _cancel_reassignment(self, name: str, p: PartitionState, change: PartitionChange
                             ) -> tuple[int, str | None, list[VersionedRecord]]:
        """Kafka's PartitionReassignmentRevert: back to the original replicas and the ISR
        without the replicas being added; if that leaves no ISR, the first original replica
        alone, which only a topic allowing unclean elections accepts."""
        if not p.reassigning:
            return Error.NO_REASSIGNMENT_IN_PROGRESS, None, []
        replicas = p.original_replicas()
        isr = [r for r in p.isr if r not in p.adding]
        if not isr:
            if not replicas:
                return Error.INVALID_REPLICA_ASSIGNMENT, "addingReplicas contains all replicas", []
            if not change.unclean_allowed:
                return (Error.INVALID_REPLICA_ASSIGNMENT,
                        f"Unable to revert partition assignment for {name}:{p.partition_id} because "
                        "it would require an unclean leader election.", [])
            isr = replicas[:1]
        if change.unclean_allowed:
            change.election = Election.UNCLEAN
        change.replicas, change.isr = replicas, isr
        change.removing, change.adding = [], []
        return Error.NONE, None, self._record(change)

    def assignment_problem(self, target: list[int]) -> str | None:
        """Why a manual replica assignment cannot be used, or None: Kafka's
        validateManualPartitionAssignment, in its order (brokers by id) and words."""
        if not target:
            return "The manual partition assignment includes an empty replica list."
        previous = None
        for broker_id in sorted(target):
            if broker_id not in self.cluster.brokers:
                return (f"The manual partition assignment includes broker {broker_id}, but no such "
                        "broker is registered.")
            if broker_id == previous:
                return f"The manual partition assignment includes the broker {broker_id} more than once."
            previous = broker_id
        return None

    def list_reassignments(self, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
        by_topic: dict[str, OngoingTopicReassignment] = {}
        if req.topics is None:
            chosen = sorted(self.reassigning, key=_order)
        else:
            chosen = []
            for t in req.topics:
                topic_id = self.names.get(t.name)
                if topic_id is None:
                    continue
                parts = self.topics[topic_id].partitions
                chosen += [parts[i] for i in t.partition_indexes if 0 <= i < len(parts) and parts[i].reassigning]
        for p in chosen:
            name = self.topics[p.topic_id].name
            entry = by_topic.setdefault(name, OngoingTopicReassignment(name=name))
            entry.partitions.append(OngoingPartitionReassignment(
                partition_index=p.partition_id, replicas=list(p.replicas),
                adding_replicas=list(p.adding), removing_replicas=list(p.removing)))
        return ListPartitionReassignmentsResponse(topics=list(by_topic.values()))

    # --- snapshots -------------------------------------------------------------------------
    def snapshot_records(self) -> Iterable[VersionedRecord]:
        version = self.features.partition_record_version()
        for topic in sorted(self.topics.values(), key=lambda t: t.name):
            yield TopicRecord(name=topic.name, topic_id=topic.topic_id), 0
            for p in topic.partitions:
                yield p.to_record(version), version


def _new_isr(pd: AlterPartitionData, version: int) -> list[int]:
    if version >= 3:
        return [s.broker_id for s in pd.new_isr_with_epochs]
    return list(pd.new_isr)


def collision_key(name: str) -> str:
    return name.replace(".", "_")


def _order(p: PartitionState) -> tuple[bytes, int]:
    return p.topic_id, p.partition_id


# Every slot of a partition's state, read in one C call: the undo of a replayed change.
_partition_values = attrgetter(*PartitionState.__slots__)

# Fencing walks every partition, rather than sorting those of the fenced brokers, once they
# hold at least one partition in this many.
_WALK_SHARE = 64
# Fencing forgets the changes it decided once it has this many shapes of partition in mind,
# so that what it holds stays bounded whatever the partitions look like.
_MAX_SHAPES = 10_000


def fold(first: PartitionChangeRecord, then: PartitionChangeRecord) -> PartitionChangeRecord:
    """One record that leaves a partition as ``first`` and then ``then`` leave it, but for
    its epochs: each field takes the last value written to it."""
    rec = PartitionChangeRecord(partition_id=first.partition_id, topic_id=first.topic_id)
    for name in _CHANGE_FIELDS:
        later, earlier = getattr(then, name), getattr(first, name)
        setattr(rec, name, earlier if later == getattr(rec, name) else later)
    return rec


# A PartitionChangeRecord's fields that say what changes; each holds its default when it
# changes nothing.
_CHANGE_FIELDS = ("isr", "leader", "replicas", "removing_replicas", "adding_replicas",
                  "leader_recovery_state", "directories", "eligible_leader_replicas", "last_known_elr")
