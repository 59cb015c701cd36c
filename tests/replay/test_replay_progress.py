"""The progress `replay validate` shows while Spark works: the line's wording, and the lines a
terminal, a pipe and --quiet get while a real job runs."""
from __future__ import annotations

import functools
import io
import time
from typing import Iterator

import pyarrow as pa

from tools.replay.progress import Progress, TaskShare, line


def test_decoding_counts_captures_bytes_frames_rate_and_time_left() -> None:
    shares = [TaskShare("a.pcapng", 40_000_000), TaskShare("a.pcapng", 40_000_000), TaskShare("b.pcapng", 20_000_000)]
    assert line("decoding", 4.0, 2, 3, shares, 12345) == \
        "decoding, 1/2 captures, 80.0/100.0 MB, 12,345 frames, 20.0 MB/s, 1 s left"
    assert line("decoding", 4.0, 3, 3, shares, 20000) == \
        "decoding, 2/2 captures, 100.0/100.0 MB, 20,000 frames, 25.0 MB/s"
    assert line("writing tables", 1.0, 3, 7) == "writing tables, 3/7 tasks"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def watched(spark, stream: io.StringIO, enabled: bool = True) -> str:
    # Defined here, so that the workers get it by value: they cannot import a test module.
    def slow_tasks(frames, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                frames.add(10)
                time.sleep(1.0)  # long enough for the progress thread to look at least once
                yield pa.RecordBatch.from_arrays([pa.array([i])], names=["id"])

    progress = Progress(spark.sparkContext, stream, enabled)
    progress.every_s = 0.05
    frames = spark.sparkContext.accumulator(0)
    progress.step("decoding", [TaskShare("c.pcapng", 1_000_000)] * 4, frames)
    try:
        rows = spark.range(0, 4, 1, 4).mapInArrow(functools.partial(slow_tasks, frames), "id long")
        assert rows.count() == 4
        progress.note("decoded")
    finally:
        progress.close()
    return stream.getvalue()


def test_a_pipe_gets_lines_in_the_form_of_the_notes(spark) -> None:
    text = watched(spark, io.StringIO())
    lines = text.splitlines()
    assert any("]: decoding, " in ln and "/1 captures, " in ln and "/4.0 MB" in ln for ln in lines), text
    assert all(ln.startswith("replay [") for ln in lines), text
    assert "\r" not in text


def test_a_terminal_gets_one_line_rewritten_in_place(spark) -> None:
    text = watched(spark, Terminal())
    assert "\r\x1b[Kreplay: decoding, " in text, repr(text)
    # The updating line is wiped before the note, which stands on a line of its own.
    assert text.endswith("\r\x1b[K" + text.rsplit("\r\x1b[K", 1)[1])
    assert text.rsplit("\r\x1b[K", 1)[1].startswith("replay [")


def test_quiet_shows_only_the_notes(spark) -> None:
    text = watched(spark, io.StringIO(), enabled=False)
    assert [ln.split("]: ", 1)[1] for ln in text.splitlines()] == ["decoded"]
