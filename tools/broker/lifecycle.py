"""One broker's lifecycle as KIP-631 draws it, without I/O.

    INITIAL --registered--> FENCED --unfenced--> ACTIVE --WantShutDown--> PENDING_SHUTDOWN
                               ^                   |                            |
                               +----fenced---------+            ShouldShutDown  v
                                                                            SHUTDOWN

The driver asks what to put in the next heartbeat and hands every answer back; the answer
decides the next state and what the driver does next. Every change of state is reported once,
with its reason, to ``on_transition``.
"""

from __future__ import annotations

from enum import Enum
from typing import Callable

from protocol.error_codes import Error, describe


class State(Enum):
    INITIAL = "INITIAL"
    FENCED = "FENCED"
    ACTIVE = "ACTIVE"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    SHUTDOWN = "SHUTDOWN"


class Action(Enum):
    HEARTBEAT = "heartbeat"  # go on heartbeating
    REGISTER = "register"  # the registration is gone: register again
    STOP = "stop"  # the broker is done


# Heartbeat errors after which the controller no longer holds this registration.
REGISTRATION_LOST = {Error.STALE_BROKER_EPOCH, Error.BROKER_ID_NOT_REGISTERED}

OnTransition = Callable[[int, State, State, str], None]


class Lifecycle:
    def __init__(self, broker_id: int, on_transition: OnTransition) -> None:
        self.broker_id = broker_id
        self.on_transition = on_transition
        self.state = State.INITIAL
        self.epoch = -1
        self.clean_shutdown = False  # the controller granted a controlled shutdown

    def _to(self, state: State, reason: str) -> None:
        if state is not self.state:
            old, self.state = self.state, state
            self.on_transition(self.broker_id, old, state, reason)

    @property
    def can_lead(self) -> bool:
        """May act as partition leader: the controller knows it as an unfenced broker."""
        return self.state in (State.ACTIVE, State.PENDING_SHUTDOWN)

    def registered(self, epoch: int, previous_epoch: int) -> None:
        """Registered as ``epoch``, having sent ``previous_epoch`` (-1: no clean shutdown known)."""
        self.epoch = epoch
        if self.state is State.PENDING_SHUTDOWN:
            return  # asked to stop while registering again: the shutdown goes on with this epoch
        after = (f"after a clean shutdown at epoch {previous_epoch}" if previous_epoch >= 0
                 else "with no clean shutdown before")
        self._to(State.FENCED, f"registered with broker epoch {epoch} {after}")

    def heartbeat_request(self, metadata_offset: int) -> tuple[bool, bool]:
        """(WantFence, WantShutDown) for a heartbeat reporting ``metadata_offset``.

        A broker that has not replayed its own registration yet is not ready to serve, and
        says so, as Kafka's brokers do until their metadata has caught up."""
        want_fence = self.state is State.FENCED and metadata_offset < self.epoch
        return want_fence, self.state is State.PENDING_SHUTDOWN

    def on_heartbeat(self, error_code: int, is_fenced: bool, should_shut_down: bool,
                     metadata_offset: int) -> Action:
        if error_code in REGISTRATION_LOST:
            if self.state is State.PENDING_SHUTDOWN:
                self._to(State.SHUTDOWN, f"registration lost during controlled shutdown ({describe(error_code)})")
                return Action.STOP
            self._to(State.FENCED, f"registration lost ({describe(error_code)}); registering again")
            return Action.REGISTER
        if error_code != Error.NONE:
            return Action.HEARTBEAT
        if should_shut_down and self.state is State.PENDING_SHUTDOWN:
            self.clean_shutdown = True
            self._to(State.SHUTDOWN, f"controlled shutdown granted at metadata offset {metadata_offset}")
            return Action.STOP
        if self.state is State.FENCED and not is_fenced:
            self._to(State.ACTIVE, f"unfenced at metadata offset {metadata_offset}")
        elif self.state is State.ACTIVE and is_fenced:
            self._to(State.FENCED, "the controller answered a heartbeat with IsFenced")
        return Action.HEARTBEAT

    def fenced_in_metadata(self, offset: int) -> None:
        """The image replayed a FenceBrokerRecord for this registration (a lease expired)."""
        if self.state is State.ACTIVE:
            self._to(State.FENCED, f"fenced by the controller at metadata offset {offset}")

    def request_shutdown(self) -> Action:
        if self.state is State.INITIAL:
            self._to(State.SHUTDOWN, "shutdown requested before registration")
            return Action.STOP
        if self.state in (State.FENCED, State.ACTIVE):
            self._to(State.PENDING_SHUTDOWN, "controlled shutdown requested")
        return Action.HEARTBEAT

    def abandon(self, reason: str) -> None:
        """Stop without the controller's consent (a timeout, a fault): not a clean shutdown."""
        self._to(State.SHUTDOWN, reason)
