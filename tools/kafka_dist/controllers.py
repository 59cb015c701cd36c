"""Apache Kafka's own controllers (``process.roles=controller``) in child processes, beside
kraftwire's: the benchmarks measure kraftwire against a quorum of them on the same machine, with
the same work and the same ``controller.quorum.*`` timings.

A controller is formatted by Kafka's storage tool, listens on a free 127.0.0.1 port, logs to
``stdout.log`` and ``stderr.log`` in its working directory, never outlives the run that started
it, and is stopped by its PID.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

from tools.controller_process import QuorumProcesses
from tools.kafka_dist import Distribution
from tools.processes import LoggedChild, bounded_child, free_port, stop_child

LIFETIME_S = 3600
START_TIMEOUT_S = 600.0
# Long enough for a controlled shutdown holding a million partitions.
STOP_TIMEOUT_S = 120.0


class KafkaController(LoggedChild):
    """One Kafka controller, with the attributes the benchmarks read of kraftwire's
    (``host``, ``port``, ``cluster_id``, ``running``, ``start``, ``kill9``, ``stop``)."""

    def __init__(self, dist: Distribution, workdir: Path, node_id: int, port: int, controllers: tuple[str, str],
                 cluster_id: str, release: str, properties: dict[str, str], format_flags: tuple[str, ...] = (),
                 heap: str | None = None, level: str | None = None) -> None:
        """``controllers``: controller.quorum.voters (a static quorum) or
        controller.quorum.bootstrap.servers (a dynamic one) and its value; ``format_flags``:
        the storage tool's --standalone or --no-initial-controllers for a dynamic quorum;
        ``heap``: the JVM's heap, else Kafka's scripts' default; ``level``: the log level, else
        a server's INFO."""
        self.dist = dist
        self.workdir = workdir
        self.data_dir = workdir / "data"
        self.node_id = node_id
        self.host = "127.0.0.1"
        self.port = port
        self.cluster_id = cluster_id
        self.heap = heap
        self.level = level
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        props = {"process.roles": "controller", "node.id": str(node_id), controllers[0]: controllers[1],
                 "listeners": f"CONTROLLER://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
                 "listener.security.protocol.map": "CONTROLLER:PLAINTEXT", "log.dirs": str(self.data_dir),
                 **properties}
        self.config_path = workdir / "server.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        formatted = subprocess.run(dist.command("kafka-storage", "format", "-c", str(self.config_path), "-t",
                                                cluster_id, "--release-version", release, *format_flags),
                                   capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{formatted.stderr[-3000:]}")

    def start(self) -> "KafkaController":
        """Start and wait until the controller listener accepts connections."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(self.dist.command("kafka-server-start", str(self.config_path),
                                                           heap=self.heap, level=self.level,
                                                           performance=True),
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         preexec_fn=bounded_child(LIFETIME_S))
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._accepting():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Kafka controller {self.node_id} did not start; see {self.stderr_path}")
            time.sleep(0.05)
        return self

    def _accepting(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> int | None:
        return stop_child(self.proc, signal.SIGKILL, 30.0)

    def stop(self) -> int | None:
        return stop_child(self.proc, signal.SIGTERM, STOP_TIMEOUT_S)


class KafkaQuorum(QuorumProcesses):
    """Kafka controllers voting in one static quorum, driven as kraftwire's QuorumProcesses."""

    def __init__(self, dist: Distribution, workdir: Path, count: int, release: str,
                 properties: dict[str, str] | None = None, first_id: int = 3000) -> None:
        ports = {first_id + i: free_port() for i in range(count)}
        voters = ",".join(f"{node}@127.0.0.1:{port}" for node, port in ports.items())
        cluster_id = subprocess.run(dist.command("kafka-storage", "random-uuid"), capture_output=True, text=True,
                                    check=True, timeout=START_TIMEOUT_S).stdout.strip()
        # Members of the other implementation: QuorumProcesses reads only what both have.
        self.members = {node: KafkaController(dist, workdir / f"kafka-{node}", node, port,  # type: ignore[misc]
                                              ("controller.quorum.voters", voters), cluster_id, release,
                                              properties or {})
                        for node, port in ports.items()}
