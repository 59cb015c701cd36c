"""Seeded faults for a fleet: brokers killed, paused and restarted at random.

Faults arrive as a Poisson process of ``rate`` per second. Each picks a running broker and one
of: kill (connection dropped, no more heartbeats; a new incarnation starts later without a
clean-shutdown record, so the controller forgets it as an eligible leader), pause (a frozen
process: no heartbeats or ISR changes, connection kept; long pauses outlast the session and
get it fenced) and restart (a controlled shutdown, then a new incarnation with the recorded
epoch). Down and paused times are drawn up to ``max_s``, so some stay within a session
timeout and some do not. At most a third of the fleet is down or paused at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from typing import Protocol

log = logging.getLogger("kraftwire.broker.faults")

KINDS = ("kill", "pause", "restart")
WEIGHTS = (0.4, 0.4, 0.2)


class FaultTarget(Protocol):
    def running_ids(self) -> list[int]: ...

    def disturbed_count(self) -> int: ...

    def size(self) -> int: ...

    def kill(self, node_id: int, down_s: float) -> None: ...

    def pause(self, node_id: int, seconds: float) -> None: ...

    def restart(self, node_id: int) -> None: ...


class FaultInjector:
    def __init__(self, target: FaultTarget, rate: float, max_s: float, rng: random.Random) -> None:
        if rate <= 0:
            raise ValueError("the fault rate must be positive")
        self.target = target
        self.rate = rate
        self.max_s = max_s
        self.rng = rng
        self.counts: Counter[str] = Counter()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.rng.expovariate(self.rate))
            self.strike()

    def strike(self) -> str | None:
        """Inflict one fault now; the kind, or None when nobody may be disturbed."""
        candidates = sorted(self.target.running_ids())
        if not candidates or self.target.disturbed_count() >= max(1, self.target.size() // 3):
            self.counts["skipped"] += 1
            return None
        victim = self.rng.choice(candidates)
        kind = self.rng.choices(KINDS, WEIGHTS)[0]
        seconds = self.rng.uniform(self.max_s / 10, self.max_s)
        if kind == "kill":
            log.info("broker %d: killed, down for %.1f s", victim, seconds)
            self.target.kill(victim, seconds)
        elif kind == "pause":
            log.info("broker %d: paused for %.1f s", victim, seconds)
            self.target.pause(victim, seconds)
        else:
            log.info("broker %d: restarting", victim)
            self.target.restart(victim)
        self.counts[kind] += 1
        return kind

    def line(self) -> str:
        return ", ".join(f"{k} {self.counts[k]}" for k in (*KINDS, "skipped"))
