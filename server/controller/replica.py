"""The controller of one voter of a quorum, without I/O: what it replays, when it is active,
and what it takes back.

A standby replays the records the quorum commits, read from its own log in slices of bounded
work as they commit, so that when it is elected it only has to start acting on the state it
already holds. The active controller
applies each command's records as it runs it (they are in its state before they are
committed); if it loses its leadership, every change past the committed offset is undone, and
what the next leader commits is replayed from the log like any standby's. The network shell
(``server.app``) and the deterministic simulation of a quorum both drive this class.
"""

from __future__ import annotations

import logging
from typing import Callable

from protocol.generated.metadata.abort_transaction_record import AbortTransactionRecord
from protocol.message import Message
from protocol.records import read_batch_header
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.result import ControllerResult, VersionedRecord
from server.image.loader import MetadataLoader
from server.raft.log import RaftLog

log = logging.getLogger("kraftwire.server")

# How much of the log a standby replays at a time: one slice of bounded work, so that the
# shell answers the other voters (Vote, Fetch) between slices whatever the log holds.
SLICE_BYTES = 256 << 10


def abort_open_transaction(controller: QuorumController) -> Applied | None:
    """A metadata transaction the log ends inside was never finished: its records were not
    applied, and, as Kafka's controller does on activation, the log says so."""
    start = controller.offsets.transaction_start
    if start < 0:
        return None
    log.warning("aborting the metadata transaction begun at offset %d: the log ends inside it", start)
    return controller.apply(ControllerResult([(AbortTransactionRecord(reason="Controller failover"), 0)]))


class ControllerReplica:
    def __init__(self, controller: QuorumController, log: RaftLog, where: str) -> None:
        """``controller``: the state loaded from the snapshot (or empty); ``where`` names the
        log in errors."""
        self.log = log
        self.where = where
        self.active = False
        self.commit_target = -1  # the last committed offset this replica was told of
        self.replace(controller)

    def replace(self, controller: QuorumController) -> None:
        """Go on from ``controller``'s state: at start-up, or when the log starts with a
        snapshot fetched from the leader, which ``controller`` holds."""
        self.controller = controller
        self.loader = MetadataLoader(controller)

    def committed(self, last_offset: int) -> None:
        """Everything up to ``last_offset`` is committed: the active controller already
        applied it and now makes it permanent; a standby replays it, a slice at a time
        (``replay_slice``)."""
        self.commit_target = max(self.commit_target, last_offset)
        self.controller.committed(min(last_offset, self.controller.last_applied_offset))

    @property
    def caught_up(self) -> bool:
        """Every record known to be committed is in the state."""
        return self.controller.next_offset > self.commit_target

    def replay_slice(self, max_bytes: int = SLICE_BYTES) -> bool:
        """Replay about ``max_bytes`` of the committed log (at least one batch); True while
        committed records remain to be replayed."""
        controller = self.controller
        last_offset = self.commit_target
        if controller.next_offset <= last_offset:
            found = self._replay_up_to(last_offset, max_bytes)
            controller.committed(min(last_offset, controller.last_applied_offset))
            if not found:
                return False  # not in this log (yet): the next commit or snapshot brings it
        return not self.caught_up

    def _replay_up_to(self, last_offset: int, max_bytes: int) -> bool:
        """Replay about ``max_bytes`` of the log's batches from the controller's next offset,
        none past ``last_offset``; False if the log holds nothing there."""
        data = self.log.read(self.controller.next_offset, max_bytes)
        pos = 0
        while pos < len(data):
            header = read_batch_header(data, pos)
            if header.base_offset > last_offset:
                break
            self.loader.raw_batch(data, pos, self.where)
            pos += header.size
        return bool(data)

    def activate(self, bootstrap: Callable[[], list[VersionedRecord]]) -> list[Applied]:
        """Elected, with everything committed replayed (``caught_up``): act from now on.
        Returns the records to write first: ``bootstrap()`` when the log held no metadata yet
        (the quorum's first leader writes it; only then is it read, since a directory Kafka
        wrote may have no bootstrap checkpoint), and the abort of a metadata transaction the log
        ends inside, as Kafka's controller writes on activation."""
        controller = self.controller
        # First: from here on every change can be undone, these writes included, should the
        # leadership go before they commit.
        controller.activate()
        # A voter change this leader wrote before its controller was active lies past what is
        # committed: it is in the state before the first write, which goes after it.
        while controller.next_offset < self.log.end_offset:
            before = controller.next_offset
            self._replay_up_to(self.log.end_offset - 1, SLICE_BYTES)
            if controller.next_offset == before:
                break
        writes = []
        # An empty log gets the bootstrap records. One that holds metadata but no
        # metadata.version (written by Kafka before 3.3) is not empty: Kafka reads it as
        # 3.0-IV1 and writes no bootstrap, and such directories have no checkpoint to read.
        empty = not (controller.features.finalized or controller.cluster.brokers or controller.replication.topics)
        if empty:
            records = bootstrap()
            log.info("bootstrapping the metadata log with %d records", len(records))
            writes.append(controller.apply(ControllerResult(records)))
        aborted = abort_open_transaction(controller)
        if aborted is not None:
            writes.append(aborted)
        self.active = True
        return writes

    def control_appended(self, base_offset: int, messages: tuple[Message, ...]) -> None:
        """Quorum records the leader wrote itself, at ``base_offset`` on: the active
        controller's next offset, since what it submits is prepared in order. A standby
        replays them from the log once they commit."""
        if not self.active:
            return
        if base_offset != self.controller.next_offset:
            raise RuntimeError(f"the leader wrote quorum records at offset {base_offset} but the active controller "
                               f"goes on at {self.controller.next_offset}")
        for i, message in enumerate(messages):
            self.controller.replay(message, base_offset + i)

    def deactivate(self, committed_offset: int) -> None:
        """Leadership lost: what was applied but not committed goes. A voter elected but
        not yet active (its epoch's first batch not committed) applied nothing of its own:
        it holds only replayed committed records, whatever it knows as committed in this run."""
        if not self.active:
            return
        self.active = False
        self.controller.offsets.revert_to(committed_offset + 1)
