"""Start-up failures an operator meets first: a second controller on the same directory, a
port in use, a directory that cannot be read. Each is one line on stderr and exit code 2."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from server.__main__ import os_error_line
from tests.support.processes import PYTHON
from tools.controller_process import ROOT, ControllerProcess
from tools.processes import bounded_child, free_port

TIMEOUT_S = 60


def run_server(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "server", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT_S, preexec_fn=bounded_child(TIMEOUT_S))


def assert_one_line_failure(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if not line.startswith(("{", "20"))]
    assert len(errors) == 1, result.stderr
    for word in words:
        assert word.lower() in errors[0].lower()
    return errors[0]


def test_a_second_controller_on_the_same_directory_refuses_to_start(tmp_path):
    first = ControllerProcess(tmp_path / "first").start()
    try:
        line = assert_one_line_failure(
            run_server("--data-dir", str(first.data_dir), "--port", str(free_port())),
            str(first.data_dir), "another")
        assert ".lock" in line
        assert first.running  # the first one is untouched
    finally:
        first.stop()
    # Once the first is gone its lock is too.
    again = ControllerProcess(tmp_path / "first").start()
    again.stop()


def test_a_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_one_line_failure(run_server("--data-dir", str(tmp_path / "data"), "--port", str(port)),
                                "address already in use", str(port))
    # The port is taken before anything else: nothing was created or formatted.
    assert not (tmp_path / "data").exists()


def test_a_metrics_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_one_line_failure(run_server("--data-dir", str(tmp_path / "data"), "--port", str(free_port()),
                                           "--metrics-port", str(port)), "address already in use", f"metrics endpoint on 127.0.0.1:{port}")
    # Every port is checked before anything else: nothing was created, formatted or written.
    assert not (tmp_path / "data").exists()


def test_a_data_directory_that_is_a_file_is_one_line(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    assert_one_line_failure(run_server("--data-dir", str(path), "--port", str(free_port())), str(path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory whatever its mode")
def test_an_unreadable_directory_is_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0)
    try:
        assert_one_line_failure(run_server("--data-dir", str(data), "--port", str(free_port())),
                                "permission denied")
    finally:
        data.chmod(0o755)


def test_disk_full_names_the_path():
    line = os_error_line(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/controller/meta.properties"))
    assert line.startswith("disk full (/data/controller/meta.properties)")


def test_json_log_lines(tmp_path):
    proc = ControllerProcess(tmp_path / "json", server_args=["--log-format", "json"]).start()
    proc.stop()
    lines = [line for line in Path(proc.stderr_path).read_text().splitlines() if line]
    entries = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "message"} <= set(entries[0])
    assert any(e["message"].startswith("replayed the log") for e in entries)
    assert any(e["message"] == "shutting down" for e in entries)


def test_log_format_key_is_checked(tmp_path):
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(f"""process.roles=controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{port}
listeners=CONTROLLER://127.0.0.1:{port}
controller.listener.names=CONTROLLER
metadata.log.dir={tmp_path / "data"}
kraftwire.log.format=xml
""")
    assert_one_line_failure(run_server("--config", str(config)), "kraftwire.log.format", "xml")
