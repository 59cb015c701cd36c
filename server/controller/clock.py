"""Time for the controller is passed in, never read inside the state machine.

Leases and timeouts are computed from ``clock.now_ms()``; tests use ``ManualClock`` to move
time forward without sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def wall_ms(self) -> int:
        """Milliseconds since the epoch, for times written in records that other processes
        compare with their own clocks (a delegation token's expiry)."""
        ...


class SystemClock:
    """Monotonic milliseconds: leases must not jump when the wall clock is adjusted."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def wall_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        self._now += ms
        return self._now
