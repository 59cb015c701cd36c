"""A seeded model of simulated followers: is each one keeping up with its leader right now?

A follower in sync stays in sync for an exponentially distributed time (mean
``mean_in_sync_s``; 0 means for ever), then falls behind; a follower behind catches up after an
exponentially distributed time (mean ``mean_catch_up_s``). A follower that may not join the
ISR (fenced, shutting down, gone) never catches up, and its clock starts only once it may.

Each follower draws from its own generator, seeded from the seed and the follower's name, and
its story is a sequence of flip times, so whether it is in sync at a moment depends neither
on what other followers did nor on how often the leader asks.
"""

from __future__ import annotations

import math
import random

ReplicaKey = tuple[bytes, int, int]  # topic id, partition, follower broker id


class _Follower:
    __slots__ = ("rng", "caught_up", "until")

    def __init__(self, rng: random.Random, caught_up: bool) -> None:
        self.rng = rng
        self.caught_up = caught_up
        self.until: float | None = None  # when it flips next; None while its clock is stopped


class LagModel:
    def __init__(self, seed: int, mean_in_sync_s: float, mean_catch_up_s: float) -> None:
        if mean_in_sync_s < 0 or mean_catch_up_s < 0:
            raise ValueError("mean times must not be negative")
        self.seed = seed
        self.mean_in_sync_s = mean_in_sync_s
        self.mean_catch_up_s = mean_catch_up_s
        self._followers: dict[ReplicaKey, _Follower] = {}

    def _draw(self, f: _Follower) -> float:
        """How long ``f`` stays in its current condition."""
        mean = self.mean_in_sync_s if f.caught_up else self.mean_catch_up_s
        if f.caught_up and mean == 0:
            return math.inf
        return f.rng.expovariate(1 / mean) if mean > 0 else 0.0

    def in_sync(self, key: ReplicaKey, now: float, eligible: bool, in_isr: bool) -> bool:
        """Whether the follower ``key`` keeps up at ``now``.

        ``in_isr`` sets where a follower seen for the first time starts; ``eligible`` says
        whether it may be in the ISR at all."""
        f = self._followers.get(key)
        if f is None:
            topic_id, partition, follower = key
            f = _Follower(random.Random(f"{self.seed}/{topic_id.hex()}/{partition}/{follower}"), in_isr and eligible)
            self._followers[key] = f
        if not eligible:
            f.caught_up = False
            f.until = None
            return False
        if f.until is None:
            f.until = now + self._draw(f)
        while now >= f.until:
            f.caught_up = not f.caught_up
            f.until += self._draw(f)
        return f.caught_up

    def retain(self, keys: set[ReplicaKey]) -> None:
        """Forget the followers not in ``keys`` (no longer led by this process)."""
        if len(keys) != len(self._followers):
            self._followers = {k: f for k, f in self._followers.items() if k in keys}
