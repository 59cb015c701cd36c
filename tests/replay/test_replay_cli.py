"""`python -m tools.replay` as a user runs it: what it refuses before Spark starts, what it says
when a capture holds no Kafka, that the JVM's own output stays off the terminal, and that its
class archive, written by a first run, serves the next."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from captures import pcapng_writer
from tools.controller_process import ROOT

T0 = 1_700_000_000_000_000_000


def replay(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.replay", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_a_missing_capture_is_refused_before_spark_starts(tmp_path):
    result = replay("validate", str(tmp_path / "nowhere.pcapng"), "--out", str(tmp_path / "out"), timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip() == f"python -m tools.replay validate: no such capture file: {tmp_path / 'nowhere.pcapng'}"
    assert not (tmp_path / "out").exists()


def test_an_output_path_that_is_a_file_is_refused(tmp_path):
    capture, out = tmp_path / "c.pcapng", tmp_path / "out"
    capture.write_bytes(b"")
    out.write_text("not a folder")
    result = replay("validate", str(capture), "--out", str(out), timeout=30)
    assert result.returncode == 2 and "is a file, not a folder" in result.stderr


@pytest.mark.spark
def test_a_capture_without_kafka_exits_3_and_keeps_the_jvm_quiet(tmp_path):
    capture, out = tmp_path / "web.pcapng", tmp_path / "out"
    with pcapng_writer.open(capture) as writer:
        conn = writer.connection(("10.0.0.1", 50000), ("10.0.0.2", 80), T0)
        conn.client_to_server(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", T0 + 1000)
        conn.server_to_client(b"HTTP/1.1 204 No Content\r\n\r\n", T0 + 2000)
        conn.close(T0 + 3000)
    result = replay("validate", str(capture), "--out", str(out))
    assert result.returncode == 3, result.stderr
    assert f"report: {out / 'report.html'}" in result.stdout.splitlines()
    # The terminal gets the job's own notes and the verdict; Spark's log went to its file.
    noise = [line for line in result.stderr.splitlines()
             if not line.startswith("replay [") and not line.startswith("no Kafka flow found")]
    assert noise == []
    assert (out / "spark.log").stat().st_size > 0


def _capture(path):
    with pcapng_writer.open(path) as writer:
        conn = writer.connection(("10.0.0.1", 50000), ("10.0.0.2", 80), T0)
        conn.close(T0 + 1000)
    return path


def test_a_file_that_is_no_capture_is_refused_in_one_line_before_spark_starts(tmp_path):
    """validate and send read the magic number first: a text file is neither pcap nor pcapng."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a capture\n")
    for command in (["validate", str(notes), "--out", str(tmp_path / "out")],
                    ["send", str(notes), "--target", "127.0.0.1:1"]):
        result = replay(*command, timeout=30)
        assert result.returncode == 2, result
        assert result.stderr == (f"python -m tools.replay {command[0]}: not a capture file: {notes}: "
                                 f"magic 0x{int.from_bytes(b'not ', 'little'):08x} is neither pcap nor pcapng\n")
        assert result.stdout == ""
    assert not (tmp_path / "out").exists()


def test_validate_without_a_java_runtime_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "empty-bin")
    result = subprocess.run([sys.executable, "-m", "tools.replay", "validate", str(_capture(tmp_path / "c.pcapng")),
                             "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("python -m tools.replay validate: Spark needs a Java runtime (no java on PATH")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.spark
def test_the_first_local_run_leaves_the_jvm_s_class_archive_and_the_next_reads_the_same_tables(tmp_path):
    import pyarrow.parquet as pq

    from tests.replay.test_replay_cluster import traffic

    capture, cache = tmp_path / "brokers.pcapng", tmp_path / "cache"
    capture.write_bytes(traffic(brokers=2))
    env = dict(os.environ, KRAFTWIRE_SPARK_CACHE=str(cache))
    first = replay("validate", str(capture), "--out", str(tmp_path / "first"), "--master", "local[2]", env=env)
    assert first.returncode == 0, first.stderr
    archives = sorted(p.name for p in cache.iterdir())
    assert len(archives) == 1 and archives[0].endswith(".jsa"), archives
    written = (cache / archives[0]).stat().st_mtime_ns
    second = replay("validate", str(capture), "--out", str(tmp_path / "second"), "--master", "local[2]", env=env)
    assert second.returncode == 0, second.stderr
    assert (cache / archives[0]).stat().st_mtime_ns == written  # read, not written again
    for table in ("frames", "violations", "flows"):
        rows = [sorted(map(repr, pq.read_table(tmp_path / run / table).to_pylist())) for run in ("first", "second")]
        assert rows[0] == rows[1] and (table != "frames" or rows[0]), table

