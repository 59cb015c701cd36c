"""The names the Raft layer's domain has: a replica, a position in the log, where a node
listens. A leaf module: it imports nothing of the Raft layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from protocol.primitives import ZERO_UUID, uuid_to_str

# Where a node listens: (listener name, host, port) for each of its listeners.
Endpoints = tuple[tuple[str, str, int], ...]


@dataclass(frozen=True, order=True)
class ReplicaKey:
    id: int
    directory_id: bytes = ZERO_UUID  # the zero UUID: not known (a kraft.version 0 voter)

    def matches(self, other: "ReplicaKey") -> bool:
        """The same replica, where a key without a directory id matches any directory."""
        return self.id == other.id and (
            self.directory_id == ZERO_UUID or other.directory_id == ZERO_UUID
            or self.directory_id == other.directory_id)

    def __str__(self) -> str:
        if self.directory_id == ZERO_UUID:
            return f"{self.id}"
        return f"{self.id}@{uuid_to_str(self.directory_id)}"


class OffsetAndEpoch(NamedTuple):
    """A position in the log, as Kafka's OffsetAndEpoch: a snapshot's end offset and epoch, or
    where an epoch ends."""

    offset: int
    epoch: int
