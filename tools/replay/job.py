"""The Spark job: captures -> Parquet tables `frames`, `violations`, `flows`, and a summary.

The driver indexes each capture once (`index`), while the JVM starts: its problems, and which
packets belong to which connection. A large capture's connections are dealt to several shares,
one Spark task each, so one big capture still keeps every core busy; a task reads the packets
of its share and no others, so every byte is decoded once however many tasks there are. Each
task gets its share's packet positions as a broadcast, decodes them in pure Python on its
executor (plain connections straight from segments to frames, `in_order`) and writes the rows
to its own part file of each table with Arrow (`tasks`): the rows never pass through the JVM,
which only schedules the tasks. A second step, one task per capture (`crossflow`), judges the
rules that look across a capture's flows and tallies the timeline. The tasks hand back tallies
of what they wrote, small whatever the capture, and the driver adds them up into the summary
(`summary`): it holds positions (30 bytes a TCP segment) and tallies, never a capture's bytes
or rows, so a capture bigger than its memory still goes through, as long as its packets'
positions fit.

The job runs the same in local mode (the default, `local[*]`), with `--master URL`, and under
spark-submit. Local workers import the project from its tree; on a cluster the `protocol` and
`tools.replay` packages are shipped to the executors as a zip, and the capture paths and the
output folder must be readable and writable by them (a shared filesystem).
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import shutil
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from tools.replay import class_archive
from tools.replay.crossflow import Capture, judge_capture
from tools.replay.index import CaptureIndex, Share, index_capture, unreadable
from tools.replay.progress import Progress, TaskShare, note
from tools.replay.rules import violation
from tools.replay.summary import figures as summary_figures, merged, timeline_bins
from tools.replay.tasks import TABLES, Task, Written, write_task

if TYPE_CHECKING:
    from pyspark import Broadcast, SparkContext
    from pyspark.accumulators import Accumulator

ROOT = Path(__file__).resolve().parents[2]
# A capture is split into shares of its connections when it is at least this large per share.
SHARE_BYTES = 16 << 20


def decode_tasks(tasks: list[Broadcast[Task]], frames: Accumulator[int], out: str, scratch: str,
                 numbers: Iterable[int]) -> Iterator[Written]:
    """The executors' side of the first step: decode the tasks `numbers` into part files,
    counting their frames in `frames` for the progress line."""
    for number in numbers:
        written = write_task(tasks[number].value, number, out, scratch)
        frames.add(written.frames)
        yield written


def _nothing(_: int) -> None:
    """The work of the job that starts the Python workers."""


def index_all(captures: list[str]) -> tuple[list[CaptureIndex], float]:
    """Each capture's index (see `index`), a decoder failure in one reported as its violation;
    and the CPU seconds this thread spent on them."""
    started = time.thread_time()
    indexes = []
    for path in captures:
        try:
            indexes.append(index_capture(path, path))
        except Exception as exc:  # a bug must cost one capture, not the job
            where = traceback.extract_tb(exc.__traceback__)[-1]
            detail = f"{type(exc).__name__}: {exc} at {Path(where.filename).name}:{where.lineno}; capture skipped"
            indexes.append(unreadable(path, [violation(path, None, None, None, "decoder_failure", None, detail)]))
    return indexes, time.thread_time() - started


def plan(indexes: list[CaptureIndex], ports: Iterable[int], parallelism: int, share_bytes: int
         ) -> tuple[list[Task], list[Capture]]:
    """Tasks for the captures, the connections of large ones dealt to up to `parallelism`
    shares, a capture's own problems going with its first task; and each capture's tasks."""
    tasks: list[Task] = []
    captures = []
    for number, index in enumerate(indexes):
        shares: list[Share | None] = [*index.shares(parallelism, share_bytes)] or [None]
        captures.append(Capture(number, list(range(len(tasks), len(tasks) + len(shares)))))
        tasks += [Task(index.path, tuple(ports), share, index.violations if n == 0 else [])
                  for n, share in enumerate(shares)]
    return tasks, captures


def code_zip(directory: str) -> str:
    """The packages the tasks import, zipped for the executors."""
    path = os.path.join(directory, "kraftwire_replay.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in ("protocol", "tools/replay"):
            for file in sorted((ROOT / package).rglob("*.py")):
                archive.write(file, file.relative_to(ROOT).as_posix())
        archive.write(ROOT / "tools" / "__init__.py", "tools/__init__.py")
    return path


def spark_context(master: str | None, app_name: str = "kraftwire-replay", log: str | None = None,
                  archive: class_archive.Use | None = None) -> SparkContext:
    """A Spark context for the job; with `log`, the JVM's console output (its log, warnings
    and those of the Python workers it starts) goes to that file instead of the terminal; a
    local one uses the JVM class `archive` as it says. The job needs no SQL session: its tasks
    write the tables themselves."""
    from pyspark import SparkConf, SparkContext

    local = master is None or master.startswith("local")
    conf = SparkConf().setAppName(app_name)
    if master:
        conf = conf.setMaster(master)
    elif not conf.contains("spark.master"):  # not under spark-submit either
        conf = conf.setMaster("local[*]")
    if local:
        # Local workers run this interpreter, whose packages (construct, crc32c) the tasks need;
        # on a cluster, the executors' Python is the cluster's business.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no guessing at interfaces for a local run
        # Local workers import the project from its tree, compiled once into __pycache__; a
        # shipped zip would make every worker compile the generated codecs again.
        paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        # The JVM only schedules Python tasks: its full JIT's warm-up would cost more than it gains.
        options = ["-XX:TieredStopAtLevel=1"] + ([archive.option] if archive else [])
        conf = conf.set("spark.driver.extraJavaOptions", " ".join(options))
        conf = conf.set("spark.python.daemon.module", "tools.replay.daemon")
    # The job's notes say how far it is; the web UI is not needed.
    conf = conf.set("spark.ui.showConsoleProgress", "false").set("spark.ui.enabled", "false")
    if log is None:
        context = SparkContext.getOrCreate(conf)
    else:
        # The JVM inherits the standard error it is started with and keeps it for its life.
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        terminal = os.dup(2)
        try:
            with open(log, "ab") as sink:
                os.dup2(sink.fileno(), 2)
            context = SparkContext.getOrCreate(conf)
        finally:
            os.dup2(terminal, 2)
            os.close(terminal)
    context.setLogLevel("WARN")
    return context


def validate(captures: list[str], out: str, master: str | None = None, ports: Iterable[int] = (),
             context: SparkContext | None = None, quiet: bool = False, share_bytes: int | None = None
             ) -> dict[str, Any]:
    """Run the job: write the tables and report.html under `out`, print the summary, and
    return the summary's figures. Unless `quiet`, its progress is shown meanwhile. A capture's
    connections are dealt to shares of about `share_bytes` (SHARE_BYTES by default) or more."""
    from tools.replay import report

    started = time.monotonic()
    own_context = context is None
    with tempfile.TemporaryDirectory(prefix="kraftwire-replay-") as code, \
            concurrent.futures.ThreadPoolExecutor(2, "replay-driver") as driver:
        # The index is the driver's own work: it runs while the JVM starts.
        indexing = driver.submit(index_all, captures)
        archive = None
        if context is None:
            # Under spark-submit (which names the gateway's port) the JVM is already running.
            if (master or "local").startswith("local") and "PYSPARK_GATEWAY_PORT" not in os.environ:
                archive = class_archive.use()
            context = spark_context(master, log=os.path.join(out, "spark.log"), archive=archive)
        sc = context
        broadcasts: list[Broadcast[Task]] = []
        # The controller events, from the decoding tasks to the cross-flow step: beside the
        # tables, where the executors can reach them.
        scratch = os.path.join(out, "_scratch")
        try:
            if sc.master is None or not sc.master.startswith("local"):
                sc.addPyFile(code_zip(code))
            # A first job of one empty task starts the executors' Python workers (a process that
            # imports the decoder, a few seconds) while the index goes on; its stage is done
            # before the progress line counts the decoding's.
            warming = driver.submit(sc.parallelize([0], 1).foreach, _nothing)
            progress = Progress(sc, enabled=not quiet)
            try:
                indexes, index_cpu_s = indexing.result()
                warming.result()
                tasks, groups = plan(indexes, ports, sc.defaultParallelism, share_bytes or SHARE_BYTES)
                del indexes, indexing  # the tasks hold what the executors need of them
                for folder in [*(os.path.join(out, table) for table in TABLES), scratch]:
                    shutil.rmtree(folder, ignore_errors=True)
                    os.makedirs(folder)
                progress.note(f"reading {len(captures)} capture(s) in {len(tasks)} task(s)")
                frames = sc.accumulator(0)
                progress.step("decoding", [TaskShare(t.capture, t.share.size() if t.share else 0) for t in tasks],
                              frames)
                broadcasts = [sc.broadcast(task) for task in tasks]
                written = (sc.parallelize(range(len(tasks)), len(tasks))
                           .mapPartitions(functools.partial(decode_tasks, broadcasts, frames, out, scratch))
                           .collect())
                tally = merged(w.tally for w in written)
                progress.note(f"decoded {sum(w.frames for w in written)} frames")
                progress.note("summarising")
                progress.step("summarising")
                first_ns, last_ns = tally.first_and_last_ns()
                judge = functools.partial(judge_capture, out=out, scratch=scratch, first_ns=first_ns,
                                          bin_ns=timeline_bins(first_ns, last_ns))
                for judged in sc.parallelize(groups, len(groups)).map(judge).collect():
                    tally.merge(judged)
                figures = summary_figures(tally, captures)
            finally:
                progress.close()
            note("done")
        finally:
            for broadcast in broadcasts:
                broadcast.destroy()
            shutil.rmtree(scratch, ignore_errors=True)
            if own_context and archive is not None:
                class_archive.finish(sc, archive)
            elif own_context:
                sc.stop()
    figures["seconds"] = round(time.monotonic() - started, 3)
    # What reading the captures cost in CPU: the driver's index and the decoding tasks.
    figures["cpu_s"] = dict(index=round(index_cpu_s, 3), tasks=round(sum(w.cpu_s for w in written), 3))
    print(report.terminal(figures))
    report.write_html(figures, os.path.join(out, "report.html"))
    return figures
