"""The Raft core's outputs carried out in order, with the I/O left to whoever runs it.

``QuorumDriver`` is the part of the quorum shell that decides what each output means: the
election persisted before anything after it goes out, commits counted and their waiters
released after the controller hears of them, waiters failed when leadership goes, the
controller told of every move, each refusal logged once. The I/O itself (the quorum-state
file, requests to other voters, answers on the connection a request came in on) is a
``QuorumIO``'s: ``server.quorum.QuorumReplication`` on the event loop, or the deterministic
simulation of a quorum in the tests, which so runs this code and not a copy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Protocol

from protocol.message import Message
from server.commit_tracker import CommitTracker
from server.raft.outputs import (
    AppendFailed, BecameLeader, Committed, ControlAppended, LeaderChanged, LostLeadership, Output, PersistElection,
    Refused, SendRequest, SendResponse, SnapshotInstalled)
from server.raft.state import Election

log = logging.getLogger("kraftwire.quorum")

MAX_REFUSALS_REMEMBERED = 1000


@dataclass
class QuorumEvents:
    """What the controller shell does when the quorum moves."""

    committed: Callable[[int], None]  # every record up to the offset is committed
    became_leader: Callable[[int, int], None]  # (epoch, offset of its LeaderChange)
    lost_leadership: Callable[[int], None]  # (epoch); uncommitted state must go
    leader_changed: Callable[[int, int], None]  # (epoch, leader id or -1)
    snapshot_installed: Callable[[int, int], None]  # (end offset, epoch)
    # The leader wrote quorum records itself (base offset, records): an active controller replays them.
    control_appended: Callable[[int, tuple[Message, ...]], None]


class QuorumIO(Protocol):
    def persist(self, election: Election) -> None:
        """Durable on return: a vote or a leadership not on disk could be given again after a
        restart."""

    def send(self, request: SendRequest) -> None:
        """Send a request to another voter; its answer or failure goes back to the core."""

    def answer(self, response: SendResponse) -> None:
        """Answer a request on the connection it came in on."""


class QuorumDriver:
    def __init__(self, io: QuorumIO, events: QuorumEvents) -> None:
        self.io = io
        self.events = events
        self.commits = CommitTracker(events.committed)
        self._refusals_said: set[str] = set()

    def perform(self, output: Output) -> None:
        if isinstance(output, PersistElection):
            self.io.persist(output.election)
        elif isinstance(output, SendRequest):
            self.io.send(output)
        elif isinstance(output, SendResponse):
            self.io.answer(output)
        elif isinstance(output, Committed):
            self.commits.committed(output.last_offset)
        elif isinstance(output, Refused):
            # A refused peer retries every backoff: each distinct reason is said once.
            if output.reason not in self._refusals_said:
                if len(self._refusals_said) >= MAX_REFUSALS_REMEMBERED:
                    self._refusals_said.clear()  # made-up cluster ids cannot grow it without bound
                self._refusals_said.add(output.reason)
                log.error("%s", output.reason)
        elif isinstance(output, ControlAppended):
            self.events.control_appended(output.base_offset, output.messages)
        elif isinstance(output, AppendFailed):
            self.commits.failures += 1
            log.error("metadata log write failed; resigning the leadership: %s", output.reason)
        elif isinstance(output, BecameLeader):
            log.info("leading epoch %d from offset %d", output.epoch, output.epoch_start_offset)
            self.events.became_leader(output.epoch, output.epoch_start_offset)
        elif isinstance(output, LostLeadership):
            log.info("no longer leading epoch %d", output.epoch)
            self.commits.fail_all(f"leadership of epoch {output.epoch} was lost")
            self.events.lost_leadership(output.epoch)
        elif isinstance(output, LeaderChanged):
            log.info("epoch %d: leader %s", output.epoch, output.leader_id if output.leader_id >= 0 else "unknown")
            self.events.leader_changed(output.epoch, output.leader_id)
        elif isinstance(output, SnapshotInstalled):
            log.info("installed the leader's snapshot ending at offset %d", output.end_offset)
            self.events.snapshot_installed(output.end_offset, output.epoch)
