"""The Spark job: captures -> Parquet tables `frames`, `violations`, `flows`, and a summary.

The driver indexes each capture once (`index`), while the JVM starts: its problems, and which
packets belong to which connection. A large capture's connections are dealt to several shares,
one Spark task each, so one big capture still keeps every core busy; a task reads the packets
of its share and no others, so every byte is decoded once however many tasks there are. Each
task gets its share's packet positions as a broadcast; the pure-Python decoder runs inside the
executors (plain connections straight from segments to frames, `in_order`), which hand their
rows to the JVM as Arrow batches. The driver holds positions
(30 bytes a TCP segment) and the aggregates coming back (`summary`), never a capture's bytes or
rows, so a capture bigger than its memory still goes through, as long as its packets'
positions fit.

The job runs the same in local mode (the default, `local[*]`), with `--master URL`, and under
spark-submit. Local workers import the project from its tree; on a cluster the `protocol` and
`tools.replay` packages are shipped to the executors as a zip, and the capture paths must be
readable by them (a shared filesystem).
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
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

from tools.replay.decode import FlowRow, FrameRow
from tools.replay.in_order import decode_share
from tools.replay.index import CaptureIndex, Share, index_capture, unreadable
from tools.replay.progress import Progress, TaskShare, note
from tools.replay.rules import CROSS_FLOW_RULES, ControllerEvent, Violation, controller_violations, violation
from tools.replay.tables import Tables

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Broadcast
    from pyspark.accumulators import Accumulator
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

ROOT = Path(__file__).resolve().parents[2]
# A capture is split into shares of its connections when it is at least this large per share.
SHARE_BYTES = 16 << 20
# Rows per Arrow batch handed from an executor's Python to the JVM.
ARROW_BATCH_ROWS = 8192
_FRAME, _VIOLATION, _FLOW, _EVENT = 0, 1, 2, 3  # the tags of schema.TAGGED
_TAGS = {FrameRow: _FRAME, Violation: _VIOLATION, FlowRow: _FLOW, ControllerEvent: _EVENT}


class Task(NamedTuple):
    capture: str  # the name rows carry: the path as given
    ports: tuple[int, ...]
    share: Share | None  # None for a capture with nothing to decode
    violations: list[Violation]  # the capture's own problems, found by the index, sent once


# A table row as Spark takes and gives it: the fields of one of the row NamedTuples.
RowTuple = tuple[Any, ...]


def run_task(task: Task) -> Iterator[tuple[int, RowTuple]]:
    """(tag, row) for one task: its capture's problems, then the rows of its share. A file that
    cannot be read, or a decoder failure, becomes a violation: one bad capture never stops the job."""
    for found in task.violations:
        yield _VIOLATION, found
    if task.share is None:
        return
    try:
        for item in decode_share(task.share, task.capture, frozenset(task.ports)):
            yield _TAGS[type(item)], item
    except OSError as exc:
        yield _VIOLATION, violation(task.capture, None, None, None, "unreadable_file", None, str(exc))
    except Exception as exc:  # a decoder bug must cost one share of one capture, not the job
        where = traceback.extract_tb(exc.__traceback__)[-1]
        detail = f"{type(exc).__name__}: {exc} at {Path(where.filename).name}:{where.lineno}; rest of the share skipped"
        yield _VIOLATION, violation(task.capture, None, None, None, "decoder_failure", None, detail)


class Counters(NamedTuple):
    """What the tasks count as they go: frames for the progress line, CPU for the figures."""

    frames: Accumulator[int]
    cpu_s: Accumulator[float]  # the CPU time of the tasks' Python workers, summed


def arrow_tasks(tasks: list[Broadcast[Task]], counters: Counters, batches: Iterable[pa.RecordBatch]
                ) -> Iterator[pa.RecordBatch]:
    """The executors' side of the job: decode the tasks whose indexes in `tasks` are the
    `id`s in `batches` and hand the rows to the JVM as Arrow record batches of the TAGGED
    schema, one kind of row per batch, counting in `counters`."""
    started = time.process_time()
    import pyarrow as pa

    from tools.replay import schema

    target = to_arrow_schema(schema.TAGGED)
    kinds = [target.field(i).type for i in range(1, len(target))]
    pending: list[list[RowTuple]] = [[] for _ in kinds]

    def flush(tag: int) -> pa.RecordBatch:
        rows, pending[tag] = pending[tag], []
        columns = [pa.nulls(len(rows), kind) for kind in kinds]
        # Built field by field: Arrow converts a list of plain values several times faster
        # than a list of row tuples it must take apart itself.
        fields = list(kinds[tag])
        columns[tag] = pa.StructArray.from_arrays(
            [pa.array(values, type=field.type) for values, field in zip(zip(*rows), fields)], fields=fields)
        return pa.RecordBatch.from_arrays([pa.array([tag] * len(rows), pa.int32()), *columns], schema=target)

    for batch in batches:
        for index in batch.column(0).to_pylist():
            decoded = 0
            for tag, row in run_task(tasks[index].value):
                pending[tag].append(row)
                decoded += tag == _FRAME
                if len(pending[tag]) >= ARROW_BATCH_ROWS:
                    yield flush(tag)
            counters.frames.add(decoded)
    for tag, rows in enumerate(pending):
        if rows:
            yield flush(tag)
    counters.cpu_s.add(time.process_time() - started)


def to_arrow_schema(spark_schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema as convert

    return convert(spark_schema)


def judge_capture(events: pa.Table) -> pa.Table:
    """The cross-flow rules' violations in one capture's controller events, as Arrow."""
    import pyarrow as pa

    from tools.replay import schema

    # Read column by column: Arrow's rows as dictionaries cost several times more.
    columns = [events.column(name).to_pylist() for name in ControllerEvent._fields]
    found = controller_violations(map(ControllerEvent._make, zip(*columns)))
    return pa.Table.from_pylist([v._asdict() for v in found], schema=to_arrow_schema(schema.VIOLATIONS))


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


def plan(indexes: list[CaptureIndex], ports: Iterable[int], parallelism: int, share_bytes: int) -> list[Task]:
    """Tasks for the captures: the connections of large ones dealt to up to `parallelism`
    shares; a capture's own problems go with its first task."""
    tasks = []
    for index in indexes:
        shares: list[Share | None] = [*index.shares(parallelism, share_bytes)] or [None]
        tasks += [Task(index.path, tuple(ports), share, index.violations if n == 0 else [])
                  for n, share in enumerate(shares)]
    return tasks


def code_zip(directory: str) -> str:
    """The packages the tasks import, zipped for the executors."""
    path = os.path.join(directory, "kraftwire_replay.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in ("protocol", "tools/replay"):
            for file in sorted((ROOT / package).rglob("*.py")):
                archive.write(file, file.relative_to(ROOT).as_posix())
        archive.write(ROOT / "tools" / "__init__.py", "tools/__init__.py")
    return path


def spark_session(master: str | None, app_name: str = "kraftwire-replay", log: str | None = None) -> SparkSession:
    """A session for the job; with `log`, the JVM's console output (its log, warnings and
    those of the Python workers it starts) goes to that file instead of the terminal."""
    from pyspark.sql import SparkSession

    local = master is None or master.startswith("local")
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    if local:
        # Local workers run this interpreter, whose packages (construct, crc32c) the tasks need;
        # on a cluster, the executors' Python is the cluster's business.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no guessing at interfaces for a local run
        # Local workers import the project from its tree, compiled once into __pycache__; a
        # shipped zip would make every worker compile the generated codecs again.
        paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        # The decoding is Python's work; the JVM only moves rows, and its full JIT's warm-up
        # would double the time of a small run.
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        builder = builder.config("spark.python.daemon.module", "tools.replay.daemon")
    # The job's notes say how far it is; the web UI is not needed.
    builder = builder.config("spark.ui.showConsoleProgress", "false").config("spark.ui.enabled", "false")
    if log is None:
        spark = builder.getOrCreate()
    else:
        # The JVM inherits the standard error it is started with and keeps it for its life.
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        terminal = os.dup(2)
        try:
            with open(log, "ab") as sink:
                os.dup2(sink.fileno(), 2)
            spark = builder.getOrCreate()
        finally:
            os.dup2(terminal, 2)
            os.close(terminal)
    spark.sparkContext.setLogLevel("WARN")
    # Every shuffle of this job aggregates down to a handful of rows per API: Spark's default of
    # 200 partitions would only add tasks.
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    return spark


def build_tables(spark: SparkSession, tasks: list[Broadcast[Task]], counters: Counters, decoded: str,
                 say: Callable[[str], None]) -> Tables:
    """Decode the tasks on the cluster into Parquet at `decoded`, counting in `counters`; the
    DataFrames of frames, violations and flows, read from there."""
    from pyspark.sql import functions as F

    from tools.replay import schema

    # The executors decode their tasks and hand every kind of row to the JVM in Arrow batches
    # of one table, one struct column per kind, split apart by the JVM; the driver sends the
    # function, and each task's share goes to the executor that reads it. A range of task
    # indexes, one per partition, needs no Python worker to build, as a DataFrame of Python
    # rows would.
    indexes = spark.range(0, len(tasks), 1, max(1, len(tasks)))
    # Decoded once, now, and written as it comes: the tables below each read their own column
    # of it, where a cache of the rows in memory would be built whole first, spilling to disk
    # once a large capture's rows outgrow the executors' memory.
    decoding = indexes.mapInArrow(functools.partial(arrow_tasks, tasks, counters), schema.TAGGED)
    decoding.write.mode("overwrite").parquet(decoded)
    say(f"decoded {counters.frames.value} frames")
    rows = spark.read.parquet(decoded)
    frames = rows.where("tag = 0").select("frame.*")
    events = rows.where("tag = 3").select("event.*")
    judged = events.groupBy("capture").applyInArrow(judge_capture, schema.VIOLATIONS).persist()  # read twice below
    violations = rows.where("tag = 1").select("violation.*").unionByName(judged)
    flows = rows.where("tag = 2").select("flow.*")
    # Rules judged across flows name their frame; add them to that frame's own list.
    late = (judged.where(F.col("frame").isNotNull() & F.col("rule").isin(*CROSS_FLOW_RULES))
            .groupBy("capture", "flow", "frame").agg(F.collect_list("rule").alias("late")))
    if late.isEmpty():
        # Most captures break none of them: the frames are written as decoded, without a join
        # of every frame against nothing, which costs about half of writing them.
        return Tables(frames.select(*schema.FRAMES.fieldNames()), violations, flows)
    frames = (frames.join(F.broadcast(late), ["capture", "flow", "frame"], "left")
              .withColumn("violations", F.concat("violations", F.coalesce("late", F.array().cast("array<string>"))))
              .drop("late").select(*schema.FRAMES.fieldNames()))
    return Tables(frames, violations, flows)


def validate(captures: list[str], out: str, master: str | None = None, ports: Iterable[int] = (),
             spark: SparkSession | None = None, quiet: bool = False, share_bytes: int | None = None
             ) -> dict[str, Any]:
    """Run the job: write the tables and report.html under `out`, print the summary, and
    return the summary's figures. Unless `quiet`, its progress is shown meanwhile. A capture's
    connections are dealt to shares of about `share_bytes` (SHARE_BYTES by default) or more."""
    from tools.replay import report, summary

    started = time.monotonic()
    own_session = spark is None
    with tempfile.TemporaryDirectory(prefix="kraftwire-replay-") as scratch, \
            concurrent.futures.ThreadPoolExecutor(1, "replay-index") as indexer:
        # The index is the driver's own work: it runs while the JVM starts.
        indexing = indexer.submit(index_all, captures)
        if spark is None:
            spark = spark_session(master, log=os.path.join(out, "spark.log"))
        broadcasts: list[Broadcast[Task]] = []
        decoded = os.path.join(out, "_decoded")  # the rows as the tasks decode them, until the tables are written
        try:
            sc = spark.sparkContext
            running_on = sc.master
            if running_on is None or not running_on.startswith("local"):
                sc.addPyFile(code_zip(scratch))
            progress = Progress(sc, enabled=not quiet)
            try:
                indexes, index_cpu_s = indexing.result()
                tasks = plan(indexes, ports, sc.defaultParallelism, share_bytes or SHARE_BYTES)
                del indexes, indexing  # the tasks hold what the executors need of them
                progress.note(f"reading {len(captures)} capture(s) in {len(tasks)} task(s)")
                counters = Counters(sc.accumulator(0), sc.accumulator(0.0))
                progress.step("decoding", [TaskShare(t.capture, t.share.size() if t.share else 0) for t in tasks],
                              counters.frames)
                broadcasts = [sc.broadcast(task) for task in tasks]
                del tasks  # the executors have them now
                tables = build_tables(spark, broadcasts, counters, decoded, progress.note)
                progress.note(f"writing tables under {out}")
                progress.step("writing tables")
                for name in Tables._fields:
                    getattr(tables, name).write.mode("overwrite").parquet(os.path.join(out, name))
                # The cross-flow violations are in the tables now.
                spark.catalog.clearCache()
                # The summary reads the Parquet just written rather than decoding the captures again.
                written = Tables(*(spark.read.parquet(os.path.join(out, name)) for name in Tables._fields))
                progress.note("summarising")
                progress.step("summarising")
                figures = summary.collect(written, captures)
            finally:
                progress.close()
            note("done")
        finally:
            for broadcast in broadcasts:
                broadcast.destroy()
            shutil.rmtree(decoded, ignore_errors=True)
            if own_session:
                spark.stop()
    figures["seconds"] = round(time.monotonic() - started, 3)
    # What reading the captures cost in CPU: the driver's index and the decoding tasks.
    figures["cpu_s"] = dict(index=round(index_cpu_s, 3), tasks=round(counters.cpu_s.value, 3))
    print(report.terminal(figures))
    report.write_html(figures, os.path.join(out, "report.html"))
    return figures
