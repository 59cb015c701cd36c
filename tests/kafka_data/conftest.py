"""A controller process started on a copy of a real Kafka directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest

from server.metalog.meta_properties import read_meta_properties
from tests.conftest import ControllerProcess


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
