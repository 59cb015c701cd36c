"""The controller replica's life in the quorum: the quorum's events in, named stages, and the
work they start, without I/O.

One listener takes every event the Raft layer reports about this replica (records committed,
leadership won or lost, a voter change the leader wrote, a snapshot fetched from the leader)
and moves the replica between three stages:

- ``STANDBY``: another voter leads, or none does; what commits is replayed.
- ``ELECTED``: this voter leads the quorum; it becomes active once everything committed is
  replayed and no fetched snapshot is still loading.
- ``ACTIVE``: the active controller; it writes, and replays nothing more.

Replaying what committed and loading a fetched snapshot are work that goes on in any stage,
a slice at a time: ``schedule`` runs the next slice later, so that the shell answers the
other voters between slices. The server's shell (``server.app``) runs slices on its event
loop; the deterministic simulation of a quorum runs them as events of its own.
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Iterator

from protocol.message import Message
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.replica import SLICE_BYTES, ControllerReplica
from server.controller.result import VersionedRecord


class Stage(Enum):
    STANDBY = "standby"
    ELECTED = "elected"
    ACTIVE = "active"


class ControllerLifecycle:
    def __init__(self, replica: ControllerReplica, schedule: Callable[[Callable[[], None]], object],
                 bootstrap: Callable[[], list[VersionedRecord]], activated: Callable[[list[Applied]], None],
                 slice_bytes: int = SLICE_BYTES) -> None:
        """``bootstrap``: the records a new log starts with (read only when the log is new);
        ``activated``: told the records the replica writes first once it is active (the
        bootstrap records, an abort of an unfinished transaction), for the shell to submit."""
        self.replica = replica
        self.stage = Stage.STANDBY
        self._schedule = schedule
        self._bootstrap = bootstrap
        self._activated = activated
        self._slice_bytes = slice_bytes
        self._replay_scheduled = False
        # The fetched snapshot being loaded, step by step (None: none is); a later one
        # supersedes it.
        self.installing: Iterator[None] | None = None

    def committed(self, last_offset: int) -> None:
        self.replica.committed(last_offset)
        if self.installing is None and not self._replay_scheduled and not self.replica.caught_up:
            self._replay_scheduled = True
            self._schedule(self._replay_slice)

    def _replay_slice(self) -> None:
        if self.installing is not None:
            self._replay_scheduled = False  # the log below the snapshot is gone; its load goes on
            return
        if self.replica.replay_slice(self._slice_bytes):
            self._schedule(self._replay_slice)
            return
        self._replay_scheduled = False
        self._activate_if_ready()

    def became_leader(self) -> None:
        self.stage = Stage.ELECTED
        self._activate_if_ready()

    def _activate_if_ready(self) -> None:
        """Elected, with everything committed replayed: active now, replaying nothing more."""
        if self.stage is not Stage.ELECTED or self.installing is not None or not self.replica.caught_up:
            return
        self.stage = Stage.ACTIVE
        self._activated(self.replica.activate(self._bootstrap))

    def lost_leadership(self, committed_offset: int) -> None:
        """What was applied but not committed goes; the quorum's next leader decides it."""
        self.stage = Stage.STANDBY
        self.replica.deactivate(committed_offset)

    def control_appended(self, base_offset: int, messages: tuple[Message, ...]) -> None:
        """The quorum's leader wrote a voter change: the active controller replays it where it
        lies, before its own next write; a standby replays it from the log once committed."""
        self.replica.control_appended(base_offset, messages)

    def install(self, steps: Iterator[None]) -> None:
        """A snapshot fetched from the leader starts loading, ``steps`` at a time, driven by
        the shell; the old state stands until ``installed``."""
        self.installing = steps

    def installed(self, controller: QuorumController) -> None:
        """The fetched snapshot is loaded into ``controller``: go on from it, replaying what
        committed meanwhile."""
        self.installing = None
        self.replica.replace(controller)
        self.committed(self.replica.commit_target)
        self._activate_if_ready()

    def stop(self) -> None:
        self.installing = None
