"""The commit path's bookkeeping for the active controller's writes: how far the quorum has
committed, who waits for an offset to commit, and what the metrics read of it.

``QuorumReplication`` (the shell that drives the Raft core) tells it of each batch the
controller submits and of each new high watermark; it releases the responses waiting for
those offsets, in offset order, after the controller has heard of the commit, and fails them
all when leadership goes (the client then hears NOT_CONTROLLER and retries elsewhere).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Callable

from server.metalog.commit_path import CommitFailed
from server.purgatory import OffsetPurgatory


class CommitTracker:
    def __init__(self, on_commit: Callable[[int], None]) -> None:
        """``on_commit``: told of every new committed offset first, before any waiter is
        released (the controller makes its state permanent there)."""
        self._on_commit = on_commit
        self.committed_offset = -1  # the high watermark minus one
        self.listeners: list[Callable[[int], None]] = []  # told of every new committed offset after the waiters
        # Responses waiting for their offset to commit.
        self.purgatory = OffsetPurgatory(self.committed_offset)
        self.submitted_last = -1  # the last offset the active controller submitted
        # For the metrics: how long the last commit took (from its proposal), when the last
        # batch was proposed, and writes that failed.
        self.last_flush_ms: float | None = None  # None: the last commit ended none of this node's proposals
        self.last_batch_timestamp_ms = -1
        self.failures = 0
        self._proposed_at: deque[tuple[int, float]] = deque()  # (last offset, monotonic s)

    def submitted(self, last_offset: int) -> None:
        """The controller handed a command's records to the quorum, ending at ``last_offset``."""
        self.submitted_last = last_offset

    def proposed(self, last_offset: int, wall_clock_ms: int) -> None:
        """The leader took them (``prepare_append``)."""
        self.last_batch_timestamp_ms = wall_clock_ms
        self._proposed_at.append((last_offset, time.monotonic()))

    def committed(self, last_offset: int) -> None:
        if last_offset <= self.committed_offset:
            return
        self.committed_offset = last_offset
        proposed = self._proposed_at
        self.last_flush_ms = None
        if proposed and proposed[0][0] <= last_offset:
            while proposed and proposed[0][0] <= last_offset:
                _, began = proposed.popleft()
            self.last_flush_ms = (time.monotonic() - began) * 1000
        self._on_commit(last_offset)
        self.purgatory.advance(last_offset)
        for listener in self.listeners:
            listener(last_offset)

    def fail_all(self, reason: str) -> None:
        """Leadership went, or the node stops: nothing waiting will commit through this node."""
        self._proposed_at.clear()
        self.purgatory.fail_all(CommitFailed(reason))

    def wait(self, offset: int, timeout_s: float | None = None) -> asyncio.Future[int] | None:
        """A future resolved once ``offset`` is committed (or ``timeout_s`` has passed), failed
        with CommitFailed if leadership goes first; None if it already is."""
        return self.purgatory.wait(offset, timeout_s)

    async def drain(self, timeout_s: float) -> None:
        """Wait for what the active controller submitted to commit; what cannot (leadership
        lost) has failed already."""
        fut = self.purgatory.wait(self.submitted_last)
        if fut is not None:
            await asyncio.wait([fut], timeout=timeout_s)
            if fut.done() and not fut.cancelled():
                fut.exception()  # seen: a failure here only means it was not committed
