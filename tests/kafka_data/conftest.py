"""A controller process started on a copy of a real Kafka directory."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.processes import KafkaDirController
from tools.controller_process import ControllerProcess


@pytest.fixture
def start_on(tmp_path: Path) -> Iterator[Callable[..., KafkaDirController]]:
    """``start_on(directory, *flags)``: copy the directory into tmp_path and start on the copy."""
    started: list[ControllerProcess] = []

    def start(source: Path, *flags: str) -> KafkaDirController:
        proc = KafkaDirController(tmp_path / f"run-{len(started)}", source, list(flags))
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()
