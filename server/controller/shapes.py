"""One partition change decided for every partition of a shape, copied to each of them.

Fencing a fleet changes a million partitions that fall into a few thousand shapes (the same
shared lists, leader and configs): the change is decided once per shape, and each partition
gets a copy that shares the decided lists and the decided record's encoding. Every version of
a PartitionChangeRecord begins with the partition id and the topic id, so a copy encodes as
those two, then the bytes that followed them in the shape's own record.

Replaying a change sets the partition's fields from the record alone, and moves it in the
indexes by what its ISR, ELR, leader and reassignment were: copies replayed on partitions in
the same state do the same thing, which the shape works out once (``ShapeReplay``).
"""

from __future__ import annotations

import struct
from operator import attrgetter
from typing import Any

from protocol.constants import NO_LEADER
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.records import frame_metadata_record
from server.controller.partitions import PartitionState

# Partition id and topic id: the head of a PartitionChangeRecord in every version.
_HEAD = struct.Struct(">i16s")

# The fields of a partition's state that a change may set, its epochs aside.
_SETTABLE = ("isr", "leader", "replicas", "removing", "adding", "recovery", "directories", "elr",
             "last_known_elr")
# The fields that say where a partition is in the indexes.
_INDEXED = ("isr", "elr", "leader", "adding", "removing")


class Shape:
    """A change decided for partitions of one shape, and the lists that shape is made of,
    held so that no other list takes their identity while the shape is remembered."""

    __slots__ = ("change", "lists", "version", "frame", "tail", "replay")

    def __init__(self, change: PartitionChangeRecord | None, version: int, lists: tuple[list[int], ...]) -> None:
        self.change = change
        self.lists = lists
        self.version = version
        self.frame = self.tail = b""
        # How a copy replays, learnt from the first one replayed: it serves every copy whose
        # partition is in the state that one found.
        self.replay: ShapeReplay | None = None
        if change is not None:
            encoded = change.encode(version)
            head = _HEAD.pack(change.partition_id, change.topic_id)
            if not encoded.startswith(head):
                raise AssertionError(f"PartitionChangeRecord v{version} does not begin with its partition")
            self.tail = encoded[len(head):]
            framed = frame_metadata_record(change, version)
            self.frame = framed[:len(framed) - len(encoded)]

    def copy_to(self, p: PartitionState) -> "CopiedChange":
        """The shape's change made to partition ``p``."""
        return CopiedChange(p.partition_id, p.topic_id, self)

    def learn_replay(self, p: PartitionState) -> "ShapeReplay":
        """What replaying the change does to ``p``, kept for the copies replayed after it."""
        assert self.change is not None
        self.replay = ShapeReplay(self.change, p)
        return self.replay


class ShapeReplay:
    """A change replayed on a partition in one given state (``before``, as ``read`` reads it):
    the fields it sets and their values, how far the leader epoch moves, and who the partition
    leaves and joins in the ISR index and the leaderless set, each with its way back. Replaying
    a change sets fields from the record alone, and moves the partition in the indexes by what
    its ISR, ELR, leader and reassignment were: partitions that read alike end alike. ``plain``
    is false for a change that moves eligible leader replicas or a reassignment, which the
    plain replay serves."""

    __slots__ = ("read", "before", "fields", "after", "restore", "leader_bump", "isr_out", "isr_in",
                 "leaderless", "plain")

    def __init__(self, change: PartitionChangeRecord, p: PartitionState) -> None:
        after = p.copy()
        after.apply_change(change)
        self.fields = tuple(f for f in _SETTABLE if getattr(after, f) is not getattr(p, f))
        self.read = attrgetter(*dict.fromkeys(_INDEXED + self.fields))
        self.before: tuple[Any, ...] = self.read(p)
        self.after = tuple(getattr(after, f) for f in self.fields)
        self.restore = tuple(getattr(p, f) for f in self.fields)
        self.leader_bump = after.leader_epoch - p.leader_epoch
        self.isr_out = [b for b in p.isr if b not in after.isr]
        self.isr_in = [b for b in after.isr if b not in p.isr]
        # +1: the partition becomes leaderless, -1: it gets a leader, 0: neither.
        self.leaderless = (after.leader == NO_LEADER) - (p.leader == NO_LEADER)
        self.plain = after.elr == p.elr and (bool(after.adding or after.removing) == bool(p.adding or p.removing))


class CopiedChange(PartitionChangeRecord):
    """A PartitionChangeRecord that is its shape's change made to another partition. Like
    every record on its way to the log it is never changed, so its encoding stays the shape's."""

    __slots__ = ("shape",)

    def __init__(self, partition_id: int, topic_id: bytes, shape: Shape) -> None:
        change = shape.change
        assert change is not None
        self.partition_id = partition_id
        self.topic_id = topic_id
        self.isr = change.isr
        self.leader = change.leader
        self.replicas = change.replicas
        self.removing_replicas = change.removing_replicas
        self.adding_replicas = change.adding_replicas
        self.leader_recovery_state = change.leader_recovery_state
        self.directories = change.directories
        self.eligible_leader_replicas = change.eligible_leader_replicas
        self.last_known_elr = change.last_known_elr
        self.unknown_tagged_fields = None
        self.shape = shape

    def encode_into(self, out: bytearray, version: int) -> None:
        shape = self.shape
        if version != shape.version:
            super().encode_into(out, version)
            return
        out += _HEAD.pack(self.partition_id, self.topic_id)
        out += shape.tail

    def framed(self, version: int) -> bytes:
        """``frame_metadata_record`` of the copy: the shape's frame, the copy's partition,
        the shape's tail, joined at once."""
        shape = self.shape
        if version != shape.version:
            return frame_metadata_record(self, version)
        return shape.frame + _HEAD.pack(self.partition_id, self.topic_id) + shape.tail

    def plain(self) -> PartitionChangeRecord:
        """The same record as the generated class holds it."""
        return PartitionChangeRecord(*(getattr(self, s) for s in PartitionChangeRecord.__slots__))

    # Equal to, and shown as, the plain record with the same fields: the shape is how it is
    # made, not what it says.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PartitionChangeRecord):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in PartitionChangeRecord.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.plain())
