"""The log rules of KRaft replication, apart from who sends what to whom: where a fetcher's
log stands against the leader's, where a follower cuts its own, what a majority holds, when
a resigning leader's successors stand, and the batches a leader writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, cast

from protocol.generated.metadata.leader_change_message import LeaderChangeMessage, Voter
from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.records import (
    CONTROL_FLAG, ControlMessage, Record, RecordBatch, control_key, control_type_of, control_value, encode_batch)
from protocol.message import Message
from server.raft.log import RaftLog
from server.raft.types import OffsetAndEpoch
from server.raft.voters import IN_SNAPSHOT, KRAFT_VERSION_DYNAMIC, VoterHistory


@dataclass(frozen=True)
class FetchPosition:
    """Where a Fetch at (offset, last fetched epoch) stands against the leader's log: it may
    read on (neither set), must first truncate after ``diverging`` (where that epoch ends
    here), or must first fetch ``snapshot``."""

    diverging: OffsetAndEpoch | None = None
    snapshot: OffsetAndEpoch | None = None


def fetch_position(log: RaftLog, offset: int, last_epoch: int) -> FetchPosition:
    if offset == 0 and log.start_offset == 0:
        # An empty log (what a new observer fetches with, epoch 0 or not) agrees with any log
        # that still starts at 0.
        return FetchPosition()
    end, epoch = log.end_offset_for_epoch(last_epoch)
    snapshot = log.latest_snapshot
    if snapshot is not None and (offset < log.start_offset or epoch == 0 < log.start_offset):
        # What the fetcher needs next is gone from the log, or its epoch is older than
        # anything left: only the snapshot can bring it up.
        return FetchPosition(snapshot=snapshot)
    if epoch != last_epoch or offset > end:
        # The fetcher's log parts from this one after (epoch, end).
        return FetchPosition(diverging=OffsetAndEpoch(end, epoch))
    return FetchPosition()


def truncation_offset(log: RaftLog, epoch: int, end_offset: int) -> int:
    """Where a follower cuts its log when the leader says it diverges after (epoch, end)."""
    local_end, local_epoch = log.end_offset_for_epoch(epoch)
    return min(local_end, end_offset) if local_epoch == epoch else local_end


def majority_offset(offsets: list[int]) -> int:
    """The largest offset that a majority of the voters' ``offsets`` reach."""
    return sorted(offsets, reverse=True)[len(offsets) // 2]


def successor_backoff(node_id: int, successors: list[int], backoff_max_ms: int) -> int:
    """How long a follower waits before standing when its leader resigns naming
    ``successors``: 0 for the first, then doubling up to the maximum (Kafka's strict
    exponential election backoff)."""
    if node_id not in successors:
        return 0 if not successors else backoff_max_ms
    position = successors.index(node_id)
    if position == 0:
        return 0
    base = backoff_max_ms >> (len(successors) - 1)
    return min(backoff_max_ms, base << (position - 1))


def leader_change_batch(base_offset: int, epoch: int, leader_id: int, voters: frozenset[int],
                        granting: frozenset[int], now_ms: int, carried: Sequence[Message] = ()) -> bytes:
    """The control batch that opens a leader's epoch, naming it and the voters that chose it;
    ``carried``: the quorum records it copies from the bootstrap checkpoint into the log."""
    message = LeaderChangeMessage(version=0, leader_id=leader_id,
                                  voters=[Voter(voter_id=v) for v in sorted(voters)],
                                  granting_voters=[Voter(voter_id=v) for v in sorted(granting)])
    return control_batch(base_offset, epoch, [message, *carried], now_ms)


def bootstrap_quorum_records(history: VoterHistory, log: RaftLog) -> list[Message]:
    """What a new leader copies into its log with its LeaderChange (as Kafka's LeaderState
    does at the start of an epoch): the kraft.version and voters of a dynamic quorum's
    bootstrap checkpoint (the snapshot at offset 0 that ``--standalone`` or
    ``--initial-controllers`` writes), which no replica fetches, so that every replica and
    every later leader learns them from the log. Nothing once the log holds a voter set."""
    if (history.kraft_version < KRAFT_VERSION_DYNAMIC or history.latest_offset != IN_SNAPSHOT
            or log.latest_snapshot is None or log.latest_snapshot.offset != 0):
        return []
    return [KRaftVersionRecord(version=0, k_raft_version=history.kraft_version), history.latest.to_record()]


def control_batch(base_offset: int, epoch: int, messages: Sequence[Message], now_ms: int) -> bytes:
    return encode_batch(RecordBatch(
        base_offset=base_offset, partition_leader_epoch=epoch, attributes=CONTROL_FLAG,
        base_timestamp=now_ms, max_timestamp=now_ms,
        records=[Record(control_value(cast(ControlMessage, m)), control_key(control_type_of(cast(ControlMessage, m))))
                 for m in messages]))
