"""`python -m tools.replay` as a user runs it: what it refuses before Spark starts, what it says
when a capture holds no Kafka, and that the JVM's own output stays off the terminal."""
from __future__ import annotations

import subprocess
import sys

from captures import pcapng_writer
from tests.conftest import ROOT

T0 = 1_700_000_000_000_000_000


def replay(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.replay", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


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
