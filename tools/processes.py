"""Child processes the tests and the benchmarks start: on a free loopback port, never outliving
the run that started them, and stopped by their own PID."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, TypeVar

from server.child_process import die_with_parent

T = TypeVar("T")


class LoggedChild:
    """A child process started in ``workdir``, its output in stdout.log and stderr.log there."""

    workdir: Path
    proc: subprocess.Popen[bytes] | None

    @property
    def stdout_path(self) -> Path:
        return self.workdir / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.workdir / "stderr.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not running"
        return self.proc.pid


def _ephemeral_low() -> int:
    """The first port the kernel hands out for outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the ephemeral range: a
    port the kernel could hand out could be taken, between a controller's stop and its restart,
    as the local end of another voter's outgoing connection (voters retry their peers every
    backoff), and the restart would find it in use."""
    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(10_000, low) if low > 11_000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise OSError("no free port below the ephemeral range")


def bounded_child(lifetime_s: int) -> Callable[[], None]:
    """A preexec_fn, made in the parent: the child dies with its parent, and after
    ``lifetime_s`` regardless (an alarm survives exec, and SIGALRM's default action ends the
    process). Linux ties the death signal to the thread that started the child, not to the
    process: start children from a thread that outlives them (a pool's worker does not)."""
    parent = os.getpid()

    def prepare() -> None:
        die_with_parent(parent)
        signal.alarm(lifetime_s)
    return prepare


def stop_child(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM,
               timeout: float = 10.0) -> int | None:
    """Send ``sig`` to the child (if it still runs) and reap it, with SIGKILL if it has not
    exited after ``timeout`` seconds; returns its exit status, None for no process."""
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


def poll(predicate: Callable[[], T | None], timeout: float, interval: float = 0.02,
         message: str = "condition") -> T:
    """Call ``predicate`` until it returns something truthy, and return that; raise
    AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
