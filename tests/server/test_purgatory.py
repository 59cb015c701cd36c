"""One wait-at-offset structure: commit waits and long polls released in offset order."""

from __future__ import annotations

import asyncio

import pytest

from server.purgatory import OffsetPurgatory


def test_waits_are_released_in_offset_order_and_only_once_reached() -> None:
    async def run() -> None:
        purgatory = OffsetPurgatory(reached=4)
        assert purgatory.wait(4) is None  # already reached
        late, early = purgatory.wait(9), purgatory.wait(6)
        assert late is not None and early is not None
        purgatory.advance(7)
        assert early.result() == 7 and not late.done()
        purgatory.advance(5)  # never backwards
        assert purgatory.reached == 7 and not late.done()
        purgatory.advance(9)
        assert late.result() == 9 and purgatory.pending() == []
    asyncio.run(run())


def test_a_long_poll_ends_at_its_timeout_with_the_offset_reached_then() -> None:
    async def run() -> None:
        purgatory = OffsetPurgatory(reached=2)
        poll = purgatory.wait(3, timeout_s=0.01)
        assert poll is not None
        assert await poll == 2
    asyncio.run(run())


def test_failing_releases_every_wait_with_the_error() -> None:
    async def run() -> None:
        purgatory = OffsetPurgatory(reached=0)
        waits = [purgatory.wait(offset) for offset in (1, 2)]
        purgatory.fail_all(RuntimeError("leadership lost"))
        for fut in waits:
            assert fut is not None
            with pytest.raises(RuntimeError):
                fut.result()
        assert purgatory.pending() == []
    asyncio.run(run())
