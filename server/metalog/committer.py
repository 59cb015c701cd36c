"""Group commit between the event loop and the disk.

The controller applies records as soon as a command runs; this class turns each command's
records into one batch, writes everything queued with a single write+fsync on a writer
thread, and releases every response waiting for an offset once that offset is durable. If a
write fails, every waiting response fails with it and ``on_failure`` rebuilds the state from
the log, so nothing that was not committed is ever shown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Protocol

from protocol.records import Record, RecordBatch, encode_batch, frame_metadata_record
from server.controller.result import MAX_RECORDS_PER_BATCH, VersionedRecord
from server.metalog.segments import MetadataLog

log = logging.getLogger("kraftwire.commit")


class CommitFailed(Exception):
    """The records a response depended on could not be made durable."""


def encode_records(records: list[VersionedRecord], base_offset: int, epoch: int, now_ms: int) -> bytes:
    """The records as one batch."""
    return encode_batch(RecordBatch(
        base_offset=base_offset, partition_leader_epoch=epoch,
        base_timestamp=now_ms, max_timestamp=now_ms,
        records=[Record(frame_metadata_record(r, v)) for r, v in records]))


def encode_batches(records: list[VersionedRecord], base_offset: int, epoch: int, now_ms: int) -> list[bytes]:
    """The records as batches of at most MAX_RECORDS_PER_BATCH, in offset order."""
    return [encode_records(records[start:start + MAX_RECORDS_PER_BATCH], base_offset + start, epoch, now_ms)
            for start in range(0, len(records), MAX_RECORDS_PER_BATCH)]


class CommitPath(Protocol):
    """Where the active controller's records go to be committed: the single voter's
    ``Committer``, or a quorum's replication (``server.quorum``)."""

    committed_offset: int
    listeners: list[Callable[[int], None]]  # told of every new committed offset
    last_flush_ms: float  # how long the last commit took
    last_batch_timestamp_ms: int  # append time of the last batch written; -1 before any
    failures: int  # writes that failed

    def submit(self, records: list[VersionedRecord], base_offset: int) -> None: ...

    def wait(self, offset: int) -> asyncio.Future | None:
        """A future resolved once ``offset`` is committed (failed with CommitFailed if it never
        will be); None if it already is."""

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class Committer:
    def __init__(self, metadata_log: MetadataLog, epoch: int,
                 on_failure: Callable[[BaseException], None], wall_clock_ms: Callable[[], int]) -> None:
        self.log = metadata_log
        self.epoch = epoch
        self.committed_offset = metadata_log.end_offset - 1
        self.on_failure = on_failure
        self.wall_clock_ms = wall_clock_ms
        self._queue: list[bytes] = []
        self._queued_last = self.committed_offset
        self._waiters: deque[tuple[int, asyncio.Future]] = deque()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metalog-writer")
        self._flushing = False
        self.listeners: list[Callable[[int], None]] = []  # told of every new committed offset
        # For the metrics: the last write's duration, the last batch's timestamp, failed writes.
        self.last_flush_ms = 0.0
        self.last_batch_timestamp_ms = -1
        self.failures = 0

    def caught_up(self, epoch: int) -> None:
        """Start-up wrote to the log directly, before anything was submitted: all of it is
        committed, and batches from now on carry ``epoch``."""
        self.epoch = epoch
        self.committed_offset = self._queued_last = self.log.end_offset - 1

    def submit(self, records: list[VersionedRecord], base_offset: int) -> None:
        if not records:
            return
        self.last_batch_timestamp_ms = self.wall_clock_ms()
        self._queue.extend(encode_batches(records, base_offset, self.epoch, self.last_batch_timestamp_ms))
        self._queued_last = base_offset + len(records) - 1
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().call_soon(self._start_flush)

    def wait(self, offset: int) -> asyncio.Future | None:
        """A future resolved once ``offset`` is committed; None if it already is."""
        if offset <= self.committed_offset:
            return None
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        return fut

    def _start_flush(self) -> None:
        batches, self._queue = self._queue, []
        last = self._queued_last
        if not batches:
            self._flushing = False
            return
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        task = loop.run_in_executor(self._writer, self.log.append, batches)
        task.add_done_callback(lambda f: self._flushed(f, last, started))

    def _flushed(self, task: asyncio.Future[None], last: int, started: float) -> None:
        self.last_flush_ms = (time.perf_counter() - started) * 1000
        exc = task.exception()
        if exc is not None:
            log.error("metadata log write failed; failing %d waiting responses: %s", len(self._waiters), exc)
            self._fail_all(exc)
            return
        self.committed_offset = last
        waiters = self._waiters
        while waiters and waiters[0][0] <= last:
            _, fut = waiters.popleft()
            if not fut.done():
                fut.set_result(last)
        for listener in self.listeners:
            listener(last)
        self._start_flush()

    def _fail_all(self, exc: BaseException) -> None:
        self.failures += 1
        self._queue = []
        self._queued_last = self.committed_offset
        self._flushing = False
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(CommitFailed(str(exc)))
        self.on_failure(exc)

    async def drain(self) -> None:
        """Wait until everything submitted so far is committed (or has failed)."""
        fut = self.wait(self._queued_last)
        if fut is not None:
            try:
                await fut
            except CommitFailed:
                pass

    def close(self) -> None:
        self._writer.shutdown(wait=True)
