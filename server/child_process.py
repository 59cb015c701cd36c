"""What a forked child does first so that it can never outlive, or stand in for, its parent.

A child forked from the controller holds copies of everything the parent had open: the
listening socket (the kernel goes on completing connections to it), the data directory's lock
and the log's files. Left alone after the parent's death, such a child keeps the port and the
lock, and a restarted controller cannot start.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """In a forked child: be killed (SIGKILL) when the parent exits. The parent may have died
    between the fork and this call, when no signal would come any more; then exit now."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the parent's pid is still checked below, and the caller's own exits hold
    if os.getppid() != parent_pid:
        os._exit(1)


def close_inherited_fds(keep: int) -> None:
    """Close every descriptor the child inherited except stdin, stdout, stderr and ``keep``:
    the listening socket stops being held open (and accepting) by the child, and the lock on
    the data directory is the parent's alone."""
    limit = os.sysconf("SC_OPEN_MAX")
    os.closerange(3, keep)
    os.closerange(keep + 1, limit)
