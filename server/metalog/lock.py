"""The ``.lock`` file Kafka keeps in every log directory, held with an exclusive lock for as
long as the process runs: two controllers writing one metadata log would corrupt it.

The lock is the kernel's (``flock``), so it goes away with the process however it ends; the
file itself stays, as Kafka's does.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from server.metalog.meta_properties import StorageError

LOCK_FILE = ".lock"


class DirectoryLocks:
    """Exclusive locks on a set of directories, taken all together or not at all."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def acquire(self, directories: list[Path]) -> None:
        try:
            for directory in dict.fromkeys(directories):  # each once, in order
                self._fds.append(_lock(directory))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)  # closing the descriptor drops its lock
        self._fds = []


def _lock(directory: Path) -> int:
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageError(f"{directory}: the directory is in use by another process (it holds "
                           f"{directory / LOCK_FILE}); is another controller running on it?") from None
    return fd
