"""The broker's small state directory: the epoch of its last clean shutdown.

Like Kafka's ``.kafka_cleanshutdown`` marker: written only once the controller has granted a
controlled shutdown, and removed as the broker starts, so that a crash later in that run is
never mistaken for a clean exit. The next registration sends the epoch as
PreviousBrokerEpoch; without the file it sends -1 and the controller treats the broker as
having lost unflushed data (KIP-966).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MARKER = ".kafka_cleanshutdown"


def default_state_root() -> Path:
    """Where brokers keep their state without --state-dir: the user's state directory
    (XDG_STATE_HOME, else ~/.local/state), never the working directory, which is often the
    checkout."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kraftwire"


class StateDir:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def marker(self) -> Path:
        return self.directory / MARKER

    def take_clean_shutdown_epoch(self) -> int:
        """The epoch recorded by the last clean shutdown (-1 if none), removing the record."""
        try:
            text = self.marker.read_text(encoding="utf-8")
        except FileNotFoundError:
            return -1
        try:
            epoch = int(json.loads(text)["brokerEpoch"])
        except (ValueError, KeyError, TypeError):
            epoch = -1  # a damaged marker proves nothing about the last exit
        self.marker.unlink()
        _fsync_dir(self.directory)
        return epoch

    def record_clean_shutdown(self, epoch: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.marker.with_name(MARKER + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump({"version": 0, "brokerEpoch": epoch}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.marker)
        _fsync_dir(self.directory)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
