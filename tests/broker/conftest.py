"""Fixtures for the test-broker tests: ``python -m tools.broker`` processes next to a controller.

``broker_factory(*args)`` starts a broker (or a fleet) pointed at the ``controller`` fixture's
address with the arguments given, serving clients on free ports unless ``--port`` is given.
Each process logs to files in the test's temporary directory and is stopped by its PID at
teardown (and dies with the test process in any case).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.conftest import MAX_LIFETIME_S, PYTHON, ROOT, poll
from tools.processes import bounded_child, stop_child

STARTED = re.compile(r"^kraftwire test .* starting against", re.M)
TRANSITION = re.compile(r"broker (\d+): (\w+) -> (\w+) \((.*)\)")
STOP_TIMEOUT_S = 20.0


class BrokerProcess:
    def __init__(self, workdir: Path, args: list[str]) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.args = args
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def stdout_path(self) -> Path:
        return self.workdir / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.workdir / "stderr.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> "BrokerProcess":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([PYTHON, "-m", "tools.broker", *self.args], cwd=ROOT, env=env,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         preexec_fn=bounded_child(MAX_LIFETIME_S))
        self.starts += 1
        return self

    # --- output -------------------------------------------------------------------------------
    def stderr(self) -> str:
        return self.stderr_path.read_text("utf-8", "replace") if self.stderr_path.exists() else ""

    def stdout(self) -> str:
        return self.stdout_path.read_text("utf-8", "replace") if self.stdout_path.exists() else ""

    def transitions(self, broker_id: int | None = None) -> list[tuple[int, str, str, str]]:
        return [(int(m[1]), m[2], m[3], m[4]) for m in TRANSITION.finditer(self.stderr())
                if broker_id is None or int(m[1]) == broker_id]

    def state(self, broker_id: int) -> str | None:
        moves = self.transitions(broker_id)
        return moves[-1][2] if moves else None

    def wait_for_state(self, broker_id: int, state: str, timeout: float = 20.0) -> None:
        poll(lambda: self.state(broker_id) == state, timeout,
             message=f"broker {broker_id} to be {state}; its log:\n{self.stderr()[-3000:]}")

    def wait_until_started(self, timeout: float = 20.0) -> None:
        """Until the process says its brokers start: its signal handlers are in place."""
        poll(lambda: STARTED.search(self.stdout()), timeout,
             message=f"the brokers to start; their log:\n{self.stderr()[-3000:]}")

    def summary(self, timeout: float = 10.0) -> str:
        """Ask for a summary line (SIGUSR1) and return it."""
        self.wait_until_started()
        before = self.stdout().count("\n")
        os.kill(self.pid, signal.SIGUSR1)
        poll(lambda: self.stdout().count("\n") > before, timeout, message="a summary line")
        return self.stdout().splitlines()[before]

    # --- stopping -----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_and_wait(self, sig: int, timeout: float = STOP_TIMEOUT_S) -> int | None:
        return stop_child(self.proc, sig, timeout)

    def kill9(self) -> int | None:
        return self.signal_and_wait(signal.SIGKILL)


@pytest.fixture
def broker_factory(controller, tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_factory(*args, controllers=None)``: start ``python -m tools.broker --controller
    ADDR *args``, ADDR being the ``controller`` fixture's address unless ``controllers`` is given."""
    started: list[BrokerProcess] = []

    def start(*args: str, controllers: str | None = None) -> BrokerProcess:
        # Client listeners on free ports unless a test names one: the default ports (20000 + id)
        # may be taken on a shared machine.
        ports = [] if "--port" in args or "--no-clients" in args else ["--port", "0"]
        proc = BrokerProcess(tmp_path / f"broker-proc-{len(started)}",
                             ["--controller", controllers or f"{controller.host}:{controller.port}", *ports, *args])
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.kill9()
