"""What a leader keeps track of in its epoch: the replicas' fetch progress, check quorum and the
high watermark.

Functions of the ``Leader`` state and the voter set; the Raft core calls them and turns their
results into outputs. Parked fetches stay in the core: answering one reads the log.
"""

from __future__ import annotations

from server.raft.replication import majority_offset
from server.raft.state import Leader, ReplicaProgress
from server.raft.voters import VoterSet
from server.raft.types import ReplicaKey

# A leader resigns when a majority has not fetched from it for this many fetch timeouts.
CHECK_QUORUM_FACTOR = 1.5
# An observer that stops fetching is forgotten after Kafka's observer session timeout, and
# made-up replica ids cannot grow the table past a cap.
OBSERVER_TIMEOUT_MS = 300_000
MAX_OBSERVERS = 10_000


def check_quorum_deadline(fetch_timeout_ms: int, now: int) -> int:
    return now + int(fetch_timeout_ms * CHECK_QUORUM_FACTOR)


def check_quorum(state: Leader, voters: frozenset[int], node_id: int, fetch_timeout_ms: int, now: int) -> None:
    """Restart the check-quorum timer once a majority (the leader included) has fetched."""
    fetched = len(state.voters_fetched & voters) + (1 if node_id in voters else 0)
    if fetched >= len(voters) // 2 + 1:
        state.voters_fetched.clear()
        state.check_quorum_deadline = check_quorum_deadline(fetch_timeout_ms, now)


def track_fetch(state: Leader, key: ReplicaKey, offset: int, log_end_offset: int, voter_set: VoterSet,
                node_id: int, fetch_timeout_ms: int, now: int) -> None:
    """A replica fetched from ``offset`` (-1: unknown, it fetched a snapshot)."""
    replica = key.id
    if replica >= 0:
        progress = state.replicas.get(replica)
        if progress is None and len(state.replicas) >= MAX_OBSERVERS:
            forget_observers(state, voter_set.ids, now, to_make_room=True)
        if progress is None or progress.directory_id != key.directory_id:
            # Another directory under the same id is another replica: its progress starts anew.
            progress = state.replicas[replica] = ReplicaProgress(directory_id=key.directory_id)
        progress.log_end_offset = offset
        progress.last_fetch_ms = now
        if offset >= log_end_offset:
            progress.last_caught_up_ms = now
    if voter_set.is_voter(key) and replica != node_id:
        state.voters_fetched.add(replica)
        state.begin_epoch_acked.add(replica)
        check_quorum(state, voter_set.ids, node_id, fetch_timeout_ms, now)


def forget_observers(state: Leader, voters: frozenset[int], now: int, to_make_room: bool = False) -> None:
    """Drop the observers silent for the session timeout; ``to_make_room``: at the cap, the
    longest silent tenth as well. Voters are never forgotten: they count for commits."""
    for replica in [r for r, p in state.replicas.items()
                    if r not in voters and now - p.last_fetch_ms > OBSERVER_TIMEOUT_MS]:
        del state.replicas[replica]
    if to_make_room and len(state.replicas) >= MAX_OBSERVERS:
        observers = sorted((r for r in state.replicas if r not in voters), key=lambda r: state.replicas[r].last_fetch_ms)
        for replica in observers[:MAX_OBSERVERS // 10]:
            del state.replicas[replica]


def quorum_high_watermark(state: Leader, voters: frozenset[int], node_id: int, flushed_offset: int,
                          high_watermark: int) -> int | None:
    """The new high watermark the voters' progress allows, or None if it does not move."""
    offsets = [max(state.replicas[v].log_end_offset, 0) if v in state.replicas else 0
               for v in voters if v != node_id]
    if node_id in voters:
        # A leader that is removing itself leads on, but no longer counts towards commits.
        offsets.append(flushed_offset)
    if not offsets:
        return None
    # Counting only once a majority has flushed past the epoch's first batch is Raft's
    # rule that a leader commits entries of earlier epochs only through one of its own.
    candidate = majority_offset(offsets)
    if candidate <= state.epoch_start_offset or candidate <= high_watermark:
        return None
    return candidate


def reported_high_watermark(state: Leader, high_watermark: int) -> int:
    # Until this epoch has committed its first batch the leader does not know the
    # quorum's high watermark for sure, and says so (-1), as Kafka's leader does.
    return high_watermark if high_watermark > state.epoch_start_offset else -1

