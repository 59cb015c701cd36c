"""What the Raft core needs from the replicated log.

The core works on raw magic-v2 record batches, the bytes Fetch carries and the segment files
hold, so a follower stores exactly what its leader sent. Appends are not durable until
``flush``: a voter reports (and a leader counts) only what it has flushed, so a crash that
loses an unflushed tail never loses anything the quorum was told it has.
"""

from __future__ import annotations

from typing import Protocol

from protocol.message import Message
from protocol.records import HEADER_SIZE, read_batch_header
from server.raft.types import OffsetAndEpoch


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int:
        """The first offset the log still holds records for; earlier ones are only in the
        latest snapshot."""

    @property
    def latest_snapshot(self) -> OffsetAndEpoch | None:
        """(end offset, epoch) of the newest snapshot, if there is one."""

    @property
    def end_offset(self) -> int:
        """The offset the next record will get."""

    @property
    def last_epoch(self) -> int:
        """The leader epoch of the last batch; 0 for an empty log."""

    @property
    def flushed_offset(self) -> int:
        """Every offset below this one is durable."""

    def append(self, batches: list[bytes]) -> None:
        """Add whole batches whose base offsets continue the log."""

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset`` (a batch boundary)."""

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= ``epoch`` in the log and the offset where it ends, as Kafka's
        epoch cache. The snapshot's epoch counts as ending at the log start; with no such
        epoch at all, (0, start_offset)."""

    def read(self, from_offset: int, max_bytes: int, up_to: int | None = None) -> bytes:
        """Whole batches from the one at ``from_offset``; at least one if any is there, and
        none that ends past ``up_to``."""

    def flush(self) -> None:
        """Make every append durable before returning."""

    def begin_flush(self) -> None:
        """Start making every append durable; ``flushed_offset`` moves when it is done (at
        once, or later: the shell then calls the core's ``tick``)."""

    def read_snapshot(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        """Up to ``max_bytes`` of the snapshot's file from ``position``, and the file's size;
        None when the log has no such snapshot (any more)."""

    def install_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        """A snapshot fetched whole from the leader becomes the latest: every batch goes and
        the log starts, and ends, at the snapshot's end offset. Durable on return."""

    def quorum_messages(self) -> list[tuple[int, Message]]:
        """The kraft.version and voter-set records the latest snapshot (at offset
        ``IN_SNAPSHOT``) and the log hold, in order, with their offsets."""


def split_batches(data: bytes) -> list[bytes]:
    """Cut the bytes of a Fetch response into its whole batches; a torn last one is left out,
    as a fetch may stop inside a batch."""
    out = []
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        size = read_batch_header(data, pos).size
        if pos + size > len(data):
            break
        out.append(data[pos:pos + size])
        pos += size
    return out
