"""Fixtures shared by the server-level tests: a real controller process on a loopback port.

``controller`` starts ``python -m server`` in a subprocess and waits for its "is active" line.
Without extra properties it runs the embedded default (``--data-dir``/``--port``); a test marked
``@pytest.mark.controller_properties({"broker.session.timeout.ms": "1000", ...})`` gets a
server.properties file instead, formatted with ``python -m tools.storage format`` and started
with ``--config``. ``controller_factory`` starts more than one.

Every process started here is stopped by its PID at teardown. A process also stops by itself if
the test process dies (parent-death signal) and after ``MAX_LIFETIME_S`` in any case (an alarm
that survives exec), so a crashed or hung test run never leaves a server behind.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MAX_LIFETIME_S = 300
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
ACTIVE_LINE = re.compile(r"of cluster (\S+) is active on (\S+):(\d+)")
PR_SET_PDEATHSIG = 1

# Hypothesis keeps an example database and a cache of source constants under ./.hypothesis by
# default, and a test run must not leave that directory in the checkout: examples are not kept,
# and the cache goes to the temporary directory unless HYPOTHESIS_STORAGE_DIRECTORY names one.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      str(Path(tempfile.gettempdir()) / f"kraftwire-hypothesis-{os.getuid()}"))
settings.register_profile("kraftwire", database=None)
settings.load_profile("kraftwire")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bounded_child() -> None:
    """Runs in the child between fork and exec: die with the parent, and after a deadline."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    signal.alarm(MAX_LIFETIME_S)  # SIGALRM's default action ends the process


def poll(predicate: Callable[[], object], timeout: float, interval: float = 0.02,
         message: str = "condition") -> object:
    """Call ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


class ControllerProcess:
    """One controller: its data directory, its port, and the process serving them."""

    def __init__(self, workdir: Path, properties: dict[str, str] | None = None,
                 release_version: str | None = None) -> None:
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.properties = dict(properties or {})
        self.release_version = release_version
        self.host = "127.0.0.1"
        self.port = 0
        self.cluster_id: str | None = None
        self.proc: subprocess.Popen | None = None
        self.config_path: Path | None = None
        self.starts = 0
        self._stderr_offset = 0  # where the current process's stderr begins in the file

    # --- paths ------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        assert self.proc is not None, "the controller is not running"
        return self.proc.pid

    @property
    def stdout_path(self) -> Path:
        return self.workdir / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.workdir / "stderr.log"

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def uses_config_file(self) -> bool:
        return bool(self.properties) or self.release_version is not None

    # --- configuration ----------------------------------------------------------------------
    def _write_config(self) -> Path:
        props = {
            "process.roles": "controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.port}",
            "listeners": f"CONTROLLER://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(self.data_dir),
            **self.properties,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        return path

    def _format(self) -> None:
        cluster_id = subprocess.run(
            [PYTHON, "-m", "tools.storage", "random-uuid"], cwd=ROOT, check=True,
            capture_output=True, text=True, timeout=60).stdout.strip()
        cmd = [PYTHON, "-m", "tools.storage", "format", "--config", str(self.config_path),
               "--cluster-id", cluster_id]
        if self.release_version is not None:
            cmd += ["--release-version", self.release_version]
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=60)

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> "ControllerProcess":
        """Start (or start again, on the same port and data) and wait until it is active."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        first = self.starts == 0
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(5):
            if first:
                self.port = free_port()
            if self.uses_config_file:
                self.config_path = self._write_config()
                if not (self.data_dir / "meta.properties").exists():
                    self._format()
                args = ["--config", str(self.config_path)]
            else:
                args = ["--data-dir", str(self.data_dir), "--port", str(self.port)]
            try:
                self._launch(args)
                break
            except _AddressInUse:
                if not first or attempt == 4:
                    raise
        self.starts += 1
        return self

    def _launch(self, args: list[str]) -> None:
        self._stderr_offset = self.stderr_path.stat().st_size if self.stderr_path.exists() else 0
        stdout_offset = self.stdout_path.stat().st_size if self.stdout_path.exists() else 0
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([PYTHON, "-m", "server", *args], cwd=ROOT, env=env,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         preexec_fn=_bounded_child)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            text = self.stdout_path.read_bytes()[stdout_offset:].decode("utf-8", "replace")
            match = ACTIVE_LINE.search(text)
            if match:
                self.cluster_id = match.group(1)
                self.host, self.port = match.group(2), int(match.group(3))
                return
            code = self.proc.poll()
            if code is not None:
                err = self.stderr_text()
                self.proc = None
                if "address already in use" in err.lower():
                    raise _AddressInUse(err)
                raise RuntimeError(f"the controller exited with code {code} before becoming "
                                   f"active:\n{err}")
            if time.monotonic() >= deadline:
                self._signal_and_reap(signal.SIGKILL)
                raise RuntimeError(f"the controller did not become active in {START_TIMEOUT_S}s:\n"
                                   f"{self.stderr_text()}")
            time.sleep(0.02)

    def _signal_and_reap(self, sig: int, timeout: float = STOP_TIMEOUT_S) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)
        return proc.returncode

    def stop(self) -> int | None:
        """SIGTERM (a clean shutdown), then SIGKILL if it does not exit in time."""
        return self._signal_and_reap(signal.SIGTERM)

    def kill9(self) -> int | None:
        """SIGKILL: no chance to flush or close anything."""
        return self._signal_and_reap(signal.SIGKILL)

    def restart(self) -> "ControllerProcess":
        self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- output -----------------------------------------------------------------------------
    def stderr_text(self, all_runs: bool = False) -> str:
        if not self.stderr_path.exists():
            return ""
        data = self.stderr_path.read_bytes()
        return data[0 if all_runs else self._stderr_offset:].decode("utf-8", "replace")

    def wait_for_stderr(self, pattern: str, timeout: float = 5.0) -> re.Match:
        """Poll the log of the running process until ``pattern`` (a regex) appears."""
        regex = re.compile(pattern)
        return poll(lambda: regex.search(self.stderr_text()), timeout,
                    message=f"{pattern!r} in the controller's stderr")  # type: ignore[return-value]


class _AddressInUse(Exception):
    pass


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "controller_properties(props, release_version=None): extra server.properties "
                   "for the ``controller`` fixture (written to a file and passed with --config)")


@pytest.fixture
def controller_factory(tmp_path: Path) -> Iterator[Callable[..., ControllerProcess]]:
    """Start controllers: ``controller_factory(properties=None, release_version=None)``."""
    started: list[ControllerProcess] = []

    def start(properties: dict[str, str] | None = None,
              release_version: str | None = None) -> ControllerProcess:
        proc = ControllerProcess(tmp_path / f"controller-{len(started)}", properties, release_version)
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def module_controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    """One embedded-default controller shared by the tests of a module (and by @given examples)."""
    proc = ControllerProcess(tmp_path_factory.mktemp("controller"))
    try:
        yield proc.start()
    finally:
        proc.stop()


@pytest.fixture
def controller(request: pytest.FixtureRequest,
               controller_factory: Callable[..., ControllerProcess]) -> ControllerProcess:
    """A running controller; see the module docstring for ``controller_properties``."""
    marker = request.node.get_closest_marker("controller_properties")
    if marker is None:
        return controller_factory()
    props = marker.args[0] if marker.args else {}
    return controller_factory(props, marker.kwargs.get("release_version"))
