"""A kraftwire controller in a child process, started and waited for until it is active.

The tests and the benchmarks start their controllers with this. Without properties the child
runs the embedded default (``--data-dir``/``--port``); with properties (or a release version to
bootstrap) it gets a server.properties file in its working directory, formatted on the first
start, and ``--config``. It listens on a free 127.0.0.1 port, kept across restarts, and logs to
``stdout.log`` and ``stderr.log`` in its working directory, appended to by every run.

The child dies with the process that started it and after ``lifetime_s`` in any case, so a
crashed or hung run never leaves a server behind; ``stop`` and ``kill9`` end it by its PID.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol, Sequence

from server.config import EMBEDDED_NODE_ID
from tools.processes import LoggedChild, bounded_child, free_port, poll, stop_child

ROOT = Path(__file__).resolve().parents[1]
# A single voter is active once it listens; a voter of a quorum waits to be elected.
ACTIVE_LINE = re.compile(r"of cluster (\S+) is (?:active|a voter|an observer) on (\S+):(\d+)")
LIFETIME_S = 300
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 5


class Controller(Protocol):
    """What the benchmarks use of a controller of either implementation: kraftwire's
    ControllerProcess, or Kafka's own (tools.kafka_dist.controllers.KafkaController)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def pid(self) -> int: ...
    @property
    def running(self) -> bool: ...
    def start(self) -> object: ...
    def stop(self) -> int | None: ...
    def kill9(self) -> int | None: ...


class AddressInUse(RuntimeError):
    """The free port was taken by someone else between choosing it and binding it."""


class ControllerProcess(LoggedChild):
    """One controller: its data directory, its port, and the process serving them."""

    def __init__(self, workdir: Path, properties: dict[str, str] | None = None,
                 release_version: str | None = None, *, server_args: Sequence[str] = (),
                 lifetime_s: int = LIFETIME_S, start_timeout_s: float = START_TIMEOUT_S,
                 port: int = 0, cluster_id: str | None = None, dynamic: str | None = None) -> None:
        """``port`` and ``cluster_id``: chosen by the caller (the voters of one quorum must
        know each other's ports and share a cluster id); free and random otherwise. ``dynamic``:
        a controller of a dynamic quorum (its properties name controller.quorum.bootstrap.servers),
        formatted "standalone" or as an "observer" that joins later (--no-initial-controllers)."""
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.properties = dict(properties or {})
        self.release_version = release_version
        self.server_args = list(server_args)
        self.lifetime_s = lifetime_s
        self.start_timeout_s = start_timeout_s
        self.host = "127.0.0.1"
        self.port = port
        self._port_given = port != 0
        self.cluster_id: str | None = cluster_id
        self.dynamic = dynamic
        self.proc: subprocess.Popen[bytes] | None = None
        self.config_path: Path | None = None
        self.starts = 0
        self._stderr_offset = 0  # where the current process's stderr begins in the file
        self._stdout_offset = 0  # where the current process's stdout begins in the file
        self._bounded = bounded_child(lifetime_s)  # made anew by each launch, in the launching process

    # --- paths ------------------------------------------------------------------------------
    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def uses_config_file(self) -> bool:
        return bool(self.properties) or self.release_version is not None or self.dynamic is not None

    # --- configuration ----------------------------------------------------------------------
    def _write_config(self) -> Path:
        props = {
            "process.roles": "controller",
            "node.id": str(EMBEDDED_NODE_ID),
            "controller.quorum.voters": f"{EMBEDDED_NODE_ID}@127.0.0.1:{self.port}",
            "listeners": f"CONTROLLER://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(self.data_dir),
            **self.properties,
        }
        if self.dynamic is not None:
            del props["controller.quorum.voters"]
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        return path

    def _format(self) -> None:
        from protocol.primitives import random_uuid, uuid_to_str
        from server.config import load_config
        from server.metalog.bootstrap import DEFAULT_RELEASE
        from server.metalog.formatting import standalone
        from tools.storage import format_dirs

        assert self.config_path is not None
        config = load_config(self.config_path)
        initial = None if self.dynamic is None else standalone(config) if self.dynamic == "standalone" else []
        format_dirs(config, self.cluster_id or uuid_to_str(random_uuid()), self.release_version or DEFAULT_RELEASE,
                    initial_controllers=initial)

    # --- lifecycle --------------------------------------------------------------------------
    def prepare(self) -> None:
        """Write the configuration and format the data directory without starting, so that
        the caller can put metadata in it first (needs the port: given, or chosen now)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
            self._port_given = True
        self.config_path = self._write_config()
        if not (self.data_dir / "meta.properties").exists():
            self._format()

    def start(self) -> "ControllerProcess":
        """Start (or start again, on the same port and data) and wait until it is active."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        first = self.starts == 0
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(PORT_ATTEMPTS):
            if first and not self._port_given:
                self.port = free_port()
            if self.uses_config_file:
                self.config_path = self._write_config()
                if not (self.data_dir / "meta.properties").exists():
                    self._format()
                args = ["--config", str(self.config_path)]
            else:
                args = ["--data-dir", str(self.data_dir), "--port", str(self.port)]
            try:
                self._launch([*args, *self.server_args])
                self._await_listening()
                break
            except AddressInUse:
                if not first or self._port_given or attempt == PORT_ATTEMPTS - 1:
                    raise
        self.starts += 1
        return self

    def start_again_unwaited(self) -> None:
        """Start again on the same port and data without waiting for it to listen
        (``listening`` tells): several voters restarted together start this way."""
        assert self.starts > 0 and (self.proc is None or self.proc.poll() is not None), "never started, or running"
        args = ["--config", str(self.config_path)] if self.uses_config_file else [
            "--data-dir", str(self.data_dir), "--port", str(self.port)]
        self._launch([*args, *self.server_args])
        self.starts += 1

    def prepare_child(self) -> None:
        """Runs in the child between fork and exec."""
        self._bounded()

    def _launch(self, args: list[str]) -> None:
        self._stderr_offset = self.stderr_path.stat().st_size if self.stderr_path.exists() else 0
        self._stdout_offset = self.stdout_path.stat().st_size if self.stdout_path.exists() else 0
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._bounded = bounded_child(self.lifetime_s)
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "server", *args], cwd=ROOT, env=env,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         preexec_fn=self.prepare_child)

    def _await_listening(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not self.listening():
            if time.monotonic() >= deadline:
                stop_child(self.proc, signal.SIGKILL, STOP_TIMEOUT_S)
                raise RuntimeError(f"the controller did not become active in {self.start_timeout_s}s:\n"
                                   f"{self.stderr_text()}")
            time.sleep(0.02)

    def listening(self) -> bool:
        """Whether the process started last says it listens; raises if it exited first."""
        assert self.proc is not None
        text = self.stdout_path.read_bytes()[self._stdout_offset:].decode("utf-8", "replace")
        match = ACTIVE_LINE.search(text)
        if match:
            self.cluster_id = match.group(1)
            self.host, self.port = match.group(2), int(match.group(3))
            return True
        code = self.proc.poll()
        if code is not None:
            stderr = self.stderr_text()
            self.proc = None
            if "address already in use" in stderr.lower():
                raise AddressInUse(stderr)
            raise RuntimeError(f"the controller exited with code {code} before becoming active:\n{stderr}")
        return False

    def stop(self) -> int | None:
        """SIGTERM (a clean shutdown), then SIGKILL if it does not exit in time."""
        return stop_child(self.proc, signal.SIGTERM, STOP_TIMEOUT_S)

    def kill9(self) -> int | None:
        """SIGKILL: no chance to flush or close anything."""
        return stop_child(self.proc, signal.SIGKILL, STOP_TIMEOUT_S)

    def restart(self) -> "ControllerProcess":
        self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- output -----------------------------------------------------------------------------
    def stderr_text(self) -> str:
        """What the current (or last) run wrote to stderr."""
        if not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_bytes()[self._stderr_offset:].decode("utf-8", "replace")

    def wait_for_stderr(self, pattern: str, timeout: float = 5.0) -> re.Match[str]:
        """Poll the log of the running process until ``pattern`` (a regex) appears."""
        regex = re.compile(pattern)
        return poll(lambda: regex.search(self.stderr_text()), timeout,
                    message=f"{pattern!r} in the controller's stderr")


class QuorumProcesses:
    """Several controllers voting in one quorum on 127.0.0.1: node ids from ``first_id``,
    ports chosen up front (each voter's configuration lists all of them), one cluster id."""

    def __init__(self, workdir: Path, count: int = 3, properties: dict[str, str] | None = None,
                 first_id: int = EMBEDDED_NODE_ID, lifetime_s: int = LIFETIME_S,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        from protocol.primitives import random_uuid, uuid_to_str

        ports = {first_id + i: free_port() for i in range(count)}
        voters = ",".join(f"{node}@127.0.0.1:{port}" for node, port in ports.items())
        cluster_id = uuid_to_str(random_uuid())
        self.members = {
            node: ControllerProcess(workdir / f"voter-{node}", {
                "node.id": str(node), "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://127.0.0.1:{port}", **(properties or {})},
                lifetime_s=lifetime_s, start_timeout_s=start_timeout_s, port=port, cluster_id=cluster_id)
            for node, port in ports.items()}

    @property
    def bootstrap(self) -> str:
        """host:port of every voter, comma-separated, as tools take several controllers."""
        return ",".join(f"{m.host}:{m.port}" for m in self.members.values())

    def start(self) -> "QuorumProcesses":
        for member in self.members.values():
            member.start()
        return self

    def stop(self) -> None:
        for member in self.members.values():
            member.stop()

    def running(self) -> list[int]:
        return [node for node, m in self.members.items() if m.running]

    def leader(self, exclude: frozenset[int] = frozenset()) -> int | None:
        """The running voter (not in ``exclude``) that answers DescribeQuorum as its leader."""
        from protocol.client import ConnectionClosed, KafkaClient
        from protocol.error_codes import Error
        from protocol.generated.messages.describe_quorum_request import (
            DescribeQuorumRequest, PartitionData, TopicData)
        from protocol.generated.messages.describe_quorum_response import DescribeQuorumResponse

        for node in self.running():
            if node in exclude:
                continue
            member = self.members[node]
            try:
                with KafkaClient(member.host, member.port, client_id="kraftwire-quorum", timeout=3) as client:
                    response = client.request(DescribeQuorumRequest(topics=[TopicData(
                        topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 1)
            except (OSError, ConnectionClosed):
                continue  # killed or frozen a moment ago
            assert isinstance(response, DescribeQuorumResponse)
            part = response.topics[0].partitions[0]
            if part.error_code == Error.NONE and part.leader_id == node:
                return node
        return None

    def wait_for_leader(self, exclude: frozenset[int] = frozenset(), timeout: float = 20.0) -> int:
        found = poll(lambda: self.leader(exclude), timeout, interval=0.02,
                     message=f"a leader among {self.running()} (not {sorted(exclude)})")
        assert isinstance(found, int)
        return found
