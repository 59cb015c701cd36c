"""What the Raft core asks its shell to do, in the order it must be done.

The shell performs a call's outputs in order. ``PersistElection`` must be durable (written and
fsynced) before anything after it is done: a vote or a leadership that is sent but not on disk
could be given twice after a crash.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.message import Message
from server.raft.state import Election


@dataclass(frozen=True)
class PersistElection:
    election: Election


@dataclass(frozen=True)
class SendRequest:
    destination: int
    correlation_id: int  # the response must come back to ``receive_response`` with it
    message: Message
    # Where the destination listens, as the core knows it (the voter set, the configured
    # voters or bootstrap servers, a leader's endpoint learnt from a response); None: unknown.
    address: tuple[str, int] | None = None


@dataclass(frozen=True)
class SendResponse:
    destination: int
    correlation_id: int  # the request's
    message: Message


@dataclass(frozen=True)
class Committed:
    """Every record up to and including ``last_offset`` is committed (the high watermark
    minus one): the controller may apply them and make them permanent."""

    last_offset: int


@dataclass(frozen=True)
class SnapshotInstalled:
    """The log now starts with a snapshot fetched from the leader: the controller loads it in
    place of its state, then goes on with the records after ``end_offset``."""

    end_offset: int
    epoch: int


@dataclass(frozen=True)
class BecameLeader:
    """This node leads ``epoch`` and everything before ``epoch_start_offset`` is committed;
    the controller may now write (from ``epoch_start_offset`` + 1 on, after the LeaderChange
    record)."""

    epoch: int
    epoch_start_offset: int


@dataclass(frozen=True)
class LostLeadership:
    """This node no longer leads ``epoch``: what it wrote and was not committed may be
    truncated, so the controller reverts to the committed offset."""

    epoch: int


@dataclass(frozen=True)
class LeaderChanged:
    """The epoch or its known leader changed (-1: not known yet)."""

    epoch: int
    leader_id: int


@dataclass(frozen=True)
class ControlAppended:
    """The leader wrote quorum records itself (a voter change), from ``base_offset`` on, after
    everything prepared before them: an active controller replays them there, in order, so
    that its next write continues after them."""

    base_offset: int
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class AppendFailed:
    """The log refused prepared batches; the leader resigns. Said to the operator."""

    reason: str


@dataclass(frozen=True)
class Refused:
    """A peer refused this node, or this node refused a peer, for a reason an operator must
    hear of (another cluster's id, a request meant for another replica)."""

    reason: str


Output = (PersistElection | SendRequest | SendResponse | Committed | SnapshotInstalled | BecameLeader | LostLeadership
          | LeaderChanged | Refused | ControlAppended | AppendFailed)
