"""One partition change decided for every partition of a shape, copied to each of them.

Fencing a fleet changes a million partitions that fall into a few thousand shapes (the same
shared lists, leader and configs): the change is decided once per shape, and each partition
gets a copy that shares the decided lists and the decided record's encoding. Every version of
a PartitionChangeRecord begins with the partition id and the topic id, so a copy encodes as
those two, then the bytes that followed them in the shape's own record.
"""

from __future__ import annotations

import struct

from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from server.controller.partitions import PartitionState

# Partition id and topic id: the head of a PartitionChangeRecord in every version.
_HEAD = struct.Struct(">i16s")


class Shape:
    """A change decided for partitions of one shape, and the lists that shape is made of,
    held so that no other list takes their identity while the shape is remembered."""

    __slots__ = ("change", "lists", "version", "tail")

    def __init__(self, change: PartitionChangeRecord | None, version: int, lists: tuple[list[int], ...]) -> None:
        self.change = change
        self.lists = lists
        self.version = version
        self.tail = b""
        if change is not None:
            encoded = change.encode(version)
            head = _HEAD.pack(change.partition_id, change.topic_id)
            if not encoded.startswith(head):
                raise AssertionError(f"PartitionChangeRecord v{version} does not begin with its partition")
            self.tail = encoded[len(head):]

    def copy_to(self, p: PartitionState) -> "CopiedChange":
        """The shape's change made to partition ``p``."""
        return CopiedChange(p.partition_id, p.topic_id, self)


class CopiedChange(PartitionChangeRecord):
    """A PartitionChangeRecord that is its shape's change made to another partition. Like
    every record on its way to the log it is never changed, so its encoding stays the shape's."""

    __slots__ = ("_shape",)

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
        self._shape = shape

    def encode_into(self, out: bytearray, version: int) -> None:
        shape = self._shape
        if version != shape.version:
            super().encode_into(out, version)
            return
        out += _HEAD.pack(self.partition_id, self.topic_id)
        out += shape.tail

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
