"""How far `replay validate` is, from Spark's status tracker, while its jobs run.

Spark's own console progress bar is off (the JVM's output goes to spark.log), so the driver
asks the status tracker itself: on a terminal one line, rewritten in place, per step of the
job; elsewhere (a log, a CI job) a line every PLAIN_EVERY_S seconds, in the form of the job's
notes. While the
captures are decoded the line counts captures read, megabytes and frames so far, the rate and
the time left; later steps count their stages' tasks.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.accumulators import Accumulator

TERMINAL_EVERY_S = 0.5
PLAIN_EVERY_S = 10.0
_STARTED = time.monotonic()


def note(text: str, stream: TextIO | None = None) -> None:
    """A line of the job's own account (standard error by default), with the seconds since it
    began."""
    print(f"replay [{time.monotonic() - _STARTED:6.1f} s]: {text}", file=stream or sys.stderr, flush=True)


class TaskShare:
    """What one decoding task covers: which capture, and how many of its bytes."""

    def __init__(self, capture: str, size: int) -> None:
        self.capture = capture
        self.size = size


def line(step: str, elapsed_s: float, done: int, total: int, shares: list[TaskShare] | None = None,
         frames: int | None = None) -> str:
    """The progress text: `done` of `total` tasks of the step, and while decoding the captures
    and bytes those tasks covered, the frames found, the rate and the time left."""
    if shares is None or total == 0:
        return f"{step}, {done}/{total} tasks"
    mb = sum(s.size for s in shares[:done]) / 1e6
    all_mb = sum(s.size for s in shares) / 1e6
    last_share = {s.capture: i for i, s in enumerate(shares)}
    whole = sum(1 for i in last_share.values() if i < done)
    rate = mb / elapsed_s if elapsed_s > 0 else 0.0
    left = f", {(all_mb - mb) / rate:.0f} s left" if rate > 0 and done < total else ""
    frames_text = f", {frames:,} frames" if frames is not None else ""
    return (f"{step}, {whole}/{len(last_share)} captures, {mb:.1f}/{all_mb:.1f} MB{frames_text}, "
            f"{rate:.1f} MB/s{left}")


class Progress:
    """Prints the progress of the running step until it is told the next one or closed.

    Tasks complete in any order, so "done" counts completed tasks against the step's tasks;
    while decoding, the shares are counted in plan order as tasks complete, which is exact for
    the total and close for the split between captures."""

    def __init__(self, sc: SparkContext, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.sc = sc
        self.shares: list[TaskShare] = []
        self.frames: Accumulator[int] | None = None
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.terminal = self.stream.isatty()
        self.every_s = TERMINAL_EVERY_S if self.terminal else PLAIN_EVERY_S
        self._step = ""
        self._decoding = False
        self._since = time.monotonic()
        self._seen: set[int] = set()  # stages already counted in earlier steps
        self._shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self, name: str, shares: list[TaskShare] | None = None, frames: Accumulator[int] | None = None) -> None:
        """A new step begins: its line replaces the last one. The decoding step names the
        shares its tasks read, in task order, and the accumulator its tasks count frames in."""
        with self._lock:
            self._finish_line()
            self._seen = self._stage_ids()
            self._step, self._since = name, time.monotonic()
            self._decoding = shares is not None
            self.shares, self.frames = shares or [], frames
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="replay-progress", daemon=True)
            self._thread.start()

    def note(self, text: str) -> None:
        """One of the job's own notes, printed below (not over) the updating line."""
        with self._lock:
            self._finish_line()
            note(text, self.stream)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._finish_line()

    def _stage_ids(self) -> set[int]:
        tracker = self.sc.statusTracker()
        return {s for j in tracker.getJobIdsForGroup() if (info := tracker.getJobInfo(j)) for s in info.stageIds}

    def _text(self) -> str | None:
        tracker = self.sc.statusTracker()
        stages = [info for s in self._stage_ids() - self._seen if (info := tracker.getStageInfo(s)) is not None]
        if not stages:
            return None
        done = sum(s.numCompletedTasks for s in stages)
        total = sum(s.numTasks for s in stages)
        elapsed = time.monotonic() - self._since
        if self._decoding:
            # The decoding stage has one task per share; stages after it (the count's) are few.
            decode = min(stages, key=lambda s: s.stageId)
            return line(self._step, elapsed, min(decode.numCompletedTasks, len(self.shares)),
                        len(self.shares), self.shares, None if self.frames is None else self.frames.value)
        return line(self._step, elapsed, done, total)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with self._lock:
                text = self._text()
                if text is None:
                    continue
                if self.terminal:
                    self.stream.write("\r\x1b[Kreplay: " + text)
                    self.stream.flush()
                    self._shown = True
                else:
                    note(text, self.stream)

    def _finish_line(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False
