"""Processes a benchmark starts: on a free loopback port, and never outliving the run."""

from __future__ import annotations

import ctypes
import signal
import socket
from typing import Callable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bounded_child(lifetime_s: int) -> Callable[[], None]:
    """A preexec_fn: the child dies with the benchmark, and after ``lifetime_s`` regardless."""
    def prepare() -> None:
        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        signal.alarm(lifetime_s)
    return prepare
