"""The processes tests start besides the controller (tools.controller_process): the test
broker (``python -m tools.broker``) and a controller on a copy of a real Kafka directory; and
the interpreter and lifetime bound every child of a test gets.

A child stops by itself if the test process dies (parent-death signal) and after
``MAX_LIFETIME_S`` in any case (an alarm that survives exec), so a crashed or hung test run
never leaves a server behind.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from server.metalog.meta_properties import read_meta_properties
from tools.controller_process import LIFETIME_S as MAX_LIFETIME_S
from tools.controller_process import ROOT, ControllerProcess
from tools.processes import LoggedChild, bounded_child, poll, stop_child

PYTHON = sys.executable

__all__ = ["MAX_LIFETIME_S", "PYTHON", "BrokerProcess", "KafkaDirController"]

STARTED = re.compile(r"^kraftwire test .* starting against", re.M)
TRANSITION = re.compile(r"broker (\d+): (\w+) -> (\w+) \((.*)\)")
STOP_TIMEOUT_S = 20.0


class BrokerProcess(LoggedChild):
    def __init__(self, workdir: Path, args: list[str]) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

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


class KafkaDirController(ControllerProcess):
    """A controller on a copy of a Kafka directory, with the node id its meta.properties names."""

    def __init__(self, workdir: Path, source: Path, flags: list[str]) -> None:
        workdir.mkdir(parents=True)
        shutil.copytree(source, workdir / "data")
        node_id = read_meta_properties(workdir / "data").node_id
        # Brokers' leases must not run out while the test reads their state.
        super().__init__(workdir, {"node.id": str(node_id), "broker.session.timeout.ms": "600000"})
        self.node_id = node_id
        self.flags = flags

    def _write_config(self) -> Path:
        self.properties["controller.quorum.voters"] = f"{self.node_id}@127.0.0.1:{self.port}"
        return super()._write_config()

    def _launch(self, args: list[str]) -> None:
        super()._launch([*args, *self.flags])
