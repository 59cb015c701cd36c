"""Whether this node is the active controller: one owner of that fact.

The quorum's events make the controller replica active or standby; everything that must know
(the router before it runs a command, the timers that write, the metrics) asks here. Asking
first lets the quorum notice that a leader has not heard from a majority within its fetch
timeout, so a leader frozen and resumed resigns before it answers anything as the controller.
"""

from __future__ import annotations

from typing import Callable

from server.controller.replica import ControllerReplica


class Leadership:
    def __init__(self, replica: ControllerReplica, confirm: Callable[[], None]) -> None:
        """``confirm``: checks the leader still has its quorum (it resigns now if not)."""
        self.replica = replica
        self.confirm = confirm

    @property
    def active(self) -> bool:
        if self.replica.active:
            self.confirm()
        return self.replica.active
