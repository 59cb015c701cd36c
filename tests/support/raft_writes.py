"""Writes to a leading Raft core as its controller would make them, for tests that drive cores
without a controller: values as one batch at the log's end in the core's epoch, and the
control batch that formats a log at a kraft.version."""

from __future__ import annotations

from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.records import Record, RecordBatch, encode_batch
from server.raft.core import RaftCore
from server.raft.replication import control_batch
from server.raft.voters import VoterSet


def propose(core: RaftCore, values: list[bytes], now_ms: int) -> int:
    """Append ``values`` as one batch now (prepared, then the core's step that appends it);
    returns the offset of the last."""
    if not values:
        raise ValueError("nothing to propose")
    stamp = core.wall_time(now_ms)
    last = core.prepare_append([encode_batch(RecordBatch(
        base_offset=core.next_offset, partition_leader_epoch=core.epoch, base_timestamp=stamp,
        max_timestamp=stamp, records=[Record(value) for value in values]))], now_ms)
    core.tick(now_ms)
    return last


def kraft_version_batch(base_offset: int, epoch: int, level: int, voters: VoterSet, now_ms: int) -> bytes:
    """The control batch that raises kraft.version, with the voter set it starts from."""
    return control_batch(base_offset, epoch, [KRaftVersionRecord(version=0, k_raft_version=level),
                                               voters.to_record()], now_ms)
