"""Responses waiting for the committed offset to reach theirs: one structure for every wait.

A write's response waits until its records are committed; an observer's long-polling Fetch
waits until anything new is committed, or its MaxWaitMs passes. Both are a future keyed by
an offset, released in offset order when the commit path advances (Kafka keeps such waits in
its purgatories), or failed together when leadership goes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools


class OffsetPurgatory:
    def __init__(self, reached: int) -> None:
        """``reached``: the offset already reached (every wait at or below it is done)."""
        self.reached = reached
        self._waiting: list[tuple[int, int, asyncio.Future[int]]] = []  # heap of (offset, order, future)
        self._order = itertools.count()

    def wait(self, offset: int, timeout_s: float | None = None) -> asyncio.Future[int] | None:
        """A future resolved with the reached offset once it is at least ``offset`` (or when
        ``timeout_s`` passes, with the offset reached then); None if it already is."""
        if offset <= self.reached:
            return None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        heapq.heappush(self._waiting, (offset, next(self._order), fut))
        if timeout_s is not None:
            timer = loop.call_later(timeout_s, self._expire, fut)
            fut.add_done_callback(lambda _: timer.cancel())
        return fut

    def _expire(self, fut: asyncio.Future[int]) -> None:
        if not fut.done():
            fut.set_result(self.reached)

    def advance(self, offset: int) -> None:
        """Everything up to ``offset`` is reached: release what waited for it."""
        if offset <= self.reached:
            return
        self.reached = offset
        waiting = self._waiting
        while waiting and waiting[0][0] <= offset:
            fut = heapq.heappop(waiting)[2]
            if not fut.done():
                fut.set_result(offset)

    def fail_all(self, exc: BaseException) -> None:
        waiting, self._waiting = self._waiting, []
        for _, _, fut in waiting:
            if not fut.done():
                fut.set_exception(exc)

    def pending(self) -> list[asyncio.Future[int]]:
        """What still waits (for tests and diagnostics)."""
        return [fut for _, _, fut in self._waiting if not fut.done()]
