"""The active controller's own work, driven on the event loop a slice at a time.

The controller says what the next bounded slice of its work is (``next_slice``: what commands
left to write later, then fencing the brokers whose sessions expired);
this shell applies nothing itself: it hands each slice to the commit path and comes back for
the next one on a later turn of the loop, so that heartbeats and other requests are answered
between slices. At most IN_FLIGHT slices wait for their commit at any time: the memory held for
uncommitted work (records to write, changes that could be undone) stays bounded however much
work there is, and a response that waits for the state it saw waits for little.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections import deque
from typing import Protocol

from protocol.generated.metadata.fence_broker_record import FenceBrokerRecord
from server.controller.quorum_controller import QuorumController
from server.controller.result import SLICE_RECORDS
from server.leadership import Leadership
from server.metalog.commit_path import CommitFailed, CommitPath

log = logging.getLogger("kraftwire.server")

# Slices applied but not yet known to be committed, at most: while one is written the next is
# built, and what is held for them (records, undo entries) stays bounded. A deeper pipeline
# fenced no faster and made heartbeats, which wait for the state they saw, wait longer.
IN_FLIGHT = 2


class Shell(Protocol):
    """What the driver needs of the server; each is read anew, as an installed snapshot replaces
    the controller."""

    @property
    def controller(self) -> QuorumController: ...
    @property
    def replication(self) -> CommitPath: ...
    @property
    def leadership(self) -> Leadership: ...


class SlicedWork:
    """Writes the controller's own work as Kafka's periodic tasks do: started by the lease
    timer, and going on at once, slice after slice, while more remains."""

    def __init__(self, shell: Shell, slice_records: int = SLICE_RECORDS) -> None:
        self.shell = shell
        self.slice_records = slice_records
        self._task: asyncio.Task[None] | None = None

    def tick(self) -> None:
        """The lease timer fired: start writing unless it is already under way."""
        if self._task is None or self._task.done():
            if self.shell.leadership.active:
                self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        waiting: deque[int] = deque()  # last offsets of the slices not known to be committed
        while self.shell.leadership.active:
            applied = self.shell.controller.next_slice(self.slice_records)
            if applied is None:
                return
            if not applied.records:
                await asyncio.sleep(0)  # partitions looked at that needed no change
                continue
            # Fencing writes its FenceBrokerRecords after every move, so a slice that holds any
            # ends with one: the slices of moves, a thousand records each, are not read through.
            fenced = [r.id for r, _ in applied.records if isinstance(r, FenceBrokerRecord)] \
                if isinstance(applied.records[-1][0], FenceBrokerRecord) else []
            if fenced:
                # Worded as the README's walkthrough and operators' greps know it.
                log.info("fencing brokers [%s]: their sessions expired", ", ".join(map(str, fenced)))
            committer = self.shell.replication
            committer.submit(applied.records, applied.base_offset)
            # Each slice leaves new long-lived state (partitions' new lists); counted by the
            # cyclic collector, a million of them made every full collection a pause of
            # hundreds of milliseconds. They move out of its sight, as what start-up loads
            # does; the price is that a reference cycle among them is never collected.
            # Per slice rather than once the work is done: a freeze only splices the
            # collector's lists (no walk), and the slices of one long run (fencing thousands
            # of brokers) would otherwise be counted, and rescanned, until its end. What else
            # lives at that moment (requests in flight) is frozen with them: objects the loop
            # drops by reference count, not by the collector.
            gc.freeze()
            waiting.append(applied.last_offset)
            committed = committer.commits.wait(waiting.popleft()) if len(waiting) >= IN_FLIGHT else None
            if committed is None:
                await asyncio.sleep(0)
                continue
            try:
                await committed
            except CommitFailed:
                return  # leadership was lost (or resigned after a failed write); the timer starts again

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
