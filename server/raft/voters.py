"""Who votes (KIP-853): the voter set as the log holds it, and kraft.version.

A replica is a key: its node id and the directory id its metadata log directory was formatted
with (meta.properties ``directory.id``). Under kraft.version 0 the voters are the static
``controller.quorum.voters`` and their directory ids are unknown (the zero UUID). Under
kraft.version 1 the voters are whatever the last VotersRecord in the log says, committed or
not, as in Kafka: a leader counts a new voter from the moment its record is appended, and a
truncation that drops the record takes the change back.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Protocol

from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.generated.metadata.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from protocol.message import Message
from protocol.records import (
    HEADER_SIZE, ControlType, control_message_class, decode_batch, parse_control_key, parse_control_value, read_batch_header)
from server.raft.types import Endpoints, ReplicaKey

# kraft.version levels: 0 is the static quorum, 1 the dynamic one (KIP-853).
KRAFT_VERSION_STATIC = 0
KRAFT_VERSION_DYNAMIC = 1
SUPPORTED_KRAFT_VERSIONS = (0, 1)


@dataclass(frozen=True)
class VoterNode:
    key: ReplicaKey
    endpoints: Endpoints = ()
    kraft_versions: tuple[int, int] = (0, 0)  # the kraft.version range the node supports

    def address(self, listener: str) -> tuple[str, int] | None:
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


@dataclass(frozen=True)
class VoterSet:
    nodes: tuple[VoterNode, ...]  # by node id

    @classmethod
    def of(cls, nodes: Iterable[VoterNode]) -> "VoterSet":
        return cls(tuple(sorted(nodes, key=lambda n: n.key.id)))

    @classmethod
    def static(cls, endpoints: dict[int, tuple[str, int]], ids: Iterable[int], listener: str) -> "VoterSet":
        """controller.quorum.voters: ids and addresses, no directory ids."""
        return cls.of(VoterNode(ReplicaKey(i), ((listener, *endpoints[i]),) if i in endpoints else ())
                      for i in ids)

    @cached_property
    def ids(self) -> frozenset[int]:
        return frozenset(n.key.id for n in self.nodes)

    @property
    def keys(self) -> list[ReplicaKey]:
        return [n.key for n in self.nodes]

    def node(self, node_id: int) -> VoterNode | None:
        return next((n for n in self.nodes if n.key.id == node_id), None)

    def is_voter(self, key: ReplicaKey) -> bool:
        node = self.node(key.id)
        return node is not None and node.key.matches(key)

    def add(self, node: VoterNode) -> "VoterSet | None":
        if node.key.id in self.ids:
            return None
        return VoterSet.of([*self.nodes, node])

    def remove(self, key: ReplicaKey) -> "VoterSet | None":
        """None when ``key`` is not a voter, or is the last one (a quorum cannot be empty)."""
        if not self.is_voter(key) or len(self.nodes) == 1:
            return None
        return VoterSet.of(n for n in self.nodes if n.key.id != key.id)

    def update(self, node: VoterNode) -> "VoterSet | None":
        """The voter's listeners and kraft.version range replaced; None if it is not a voter."""
        if not self.is_voter(node.key):
            return None
        return VoterSet.of(node if n.key.id == node.key.id else n for n in self.nodes)

    def to_record(self) -> VotersRecord:
        return VotersRecord(version=0, voters=[
            Voter(voter_id=n.key.id, voter_directory_id=n.key.directory_id,
                  endpoints=[Endpoint(name=name, host=host, port=port) for name, host, port in n.endpoints],
                  k_raft_version_feature=KRaftVersionFeature(min_supported_version=n.kraft_versions[0],
                                                             max_supported_version=n.kraft_versions[1]))
            for n in self.nodes])

    @classmethod
    def from_record(cls, record: VotersRecord) -> "VoterSet":
        return cls.of(VoterNode(ReplicaKey(v.voter_id, v.voter_directory_id),
                                tuple((e.name, e.host, e.port) for e in v.endpoints),
                                (v.k_raft_version_feature.min_supported_version,
                                 v.k_raft_version_feature.max_supported_version))
                      for v in record.voters)

    def describe(self) -> str:
        return "[" + ", ".join(str(k) for k in self.keys) + "]"


# Where a voter set or kraft.version that came with the latest snapshot is said to be.
IN_SNAPSHOT = -1


class VoterHistory:
    """The voter sets and kraft.version levels the log has held, each from the offset of the
    record that set it, so that a truncation takes back exactly what it drops. Before any
    record, the static voters of the configuration hold (at offset None)."""

    def __init__(self, static: VoterSet, configured: bool = False) -> None:
        """``configured``: the static voters are controller.quorum.voters, which a VotersRecord
        in the log does not override (a directory taken over with other voters)."""
        self.static = static
        self.configured = configured
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []
        self._kraft_offsets: list[int] = []
        self._kraft: list[int] = []

    @property
    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self.static

    @property
    def latest_offset(self) -> int | None:
        """The offset of the last VotersRecord (IN_SNAPSHOT: the snapshot's); None if the
        voters are the static ones."""
        return self._offsets[-1] if self._offsets else None

    @property
    def kraft_version(self) -> int:
        return self._kraft[-1] if self._kraft else KRAFT_VERSION_STATIC

    def at(self, offset: int) -> VoterSet:
        """The voter set in force at ``offset`` (a record at that offset included)."""
        i = bisect_left(self._offsets, offset + 1)
        return self._sets[i - 1] if i else self.static

    def add(self, offset: int, message: Message) -> None:
        if isinstance(message, VotersRecord):
            if self.configured and self.kraft_version < KRAFT_VERSION_DYNAMIC:
                return
            self._offsets.append(offset)
            self._sets.append(VoterSet.from_record(message))
        elif isinstance(message, KRaftVersionRecord):
            self._kraft_offsets.append(offset)
            self._kraft.append(message.k_raft_version)

    def truncate(self, offset: int) -> None:
        """Forget what the log held at ``offset`` and after."""
        i = bisect_left(self._offsets, offset)
        del self._offsets[i:], self._sets[i:]
        i = bisect_left(self._kraft_offsets, offset)
        del self._kraft_offsets[i:], self._kraft[i:]

    def restart(self, quorum_records: Iterable[Message]) -> None:
        """The log now starts from a snapshot holding ``quorum_records``."""
        self._offsets, self._sets, self._kraft_offsets, self._kraft = [], [], [], []
        for message in quorum_records:
            self.add(IN_SNAPSHOT, message)


def quorum_messages(raw: bytes) -> list[tuple[int, Message]]:
    """The kraft.version and voter-set control records of one batch, with their offsets; none
    for a batch of metadata records (only control batches are decoded)."""
    if not read_batch_header(raw).is_control:
        return []
    batch, _ = decode_batch(raw)
    found: list[tuple[int, Message]] = []
    for i, record in enumerate(batch.records):
        control_type = parse_control_key(record.key or b"")
        if control_type in (ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS):
            cls = control_message_class(control_type)
            if cls is not None:
                found.append((batch.base_offset + i, parse_control_value(record.value, cls)))
    return found


def snapshot_quorum_messages(data: bytes) -> list[Message]:
    """The kraft.version and voter set that a snapshot's bytes carry (Kafka puts them in the
    header batch); only control batches are decoded."""
    found: list[Message] = []
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        header = read_batch_header(data, pos)
        found.extend(message for _, message in quorum_messages(data[pos:pos + header.size]))
        pos += header.size
    # Anything else (bytes that are not batches) is the controller's to refuse when it loads
    # the snapshot; the voters are only read from what is readable.
    return found


class QuorumRecordSource(Protocol):
    """A log that can list its kraft.version and voter-set records (``RaftLog`` is one)."""

    def quorum_messages(self) -> list[tuple[int, Message]]: ...


def read_history(log: QuorumRecordSource, static: VoterSet, configured: bool = False) -> VoterHistory:
    """The voter history a log holds, from ``static`` voters (see ``VoterHistory``)."""
    history = VoterHistory(static, configured)
    for offset, message in log.quorum_messages():
        history.add(offset, message)
    return history
