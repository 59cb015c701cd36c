"""Apache Kafka's own processes beside kraftwire: brokers formatted by Kafka's storage tool,
and Kafka's command-line tools, each from the jars tools.kafka_dist fetched.

Every broker listens on a free 127.0.0.1 port, logs to files in its working directory, dies with
the test process and after ``LIFETIME_S`` in any case, and is stopped by its PID.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.quorum import LIFETIME_S
from tools.kafka_dist import Distribution, DistributionError, fetch
from tools.processes import LoggedChild, bounded_child, free_port, poll, stop_child

# The metadata.version each broker line formats with: a 3.7 broker knows none above 3.7-IV4,
# and a 3.9 broker none above 3.9-IV0 (Kafka's own controller refuses their registration past that).
RELEASES = {"3.7": "3.7-IV4", "3.9": "3.9-IV0"}
TOOL_TIMEOUT_S = 120.0
STARTED = re.compile(r"Transition from STARTING to STARTED|Kafka Server started")
# A controller alone says so once its Raft client and controller are up.
CONTROLLER_STARTED = re.compile(r"Kafka Server started")
# Kafka's brokers as small as a 2-core machine wants them: few threads, no wait before the first
# group rebalance, heartbeats often enough that a test sees fencing within seconds.
BROKER_DEFAULTS = {
    "num.network.threads": "2", "num.io.threads": "2", "background.threads": "2",
    "num.replica.fetchers": "1", "log.cleaner.threads": "1", "num.recovery.threads.per.data.dir": "1",
    "group.initial.rebalance.delay.ms": "0", "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "10000", "auto.create.topics.enable": "false",
}


def release_for(version: str) -> str | None:
    """The release to format a cluster of ``version`` brokers with; None for kraftwire's default."""
    return RELEASES.get(".".join(version.split(".")[:2]))


def kafka(version: str) -> Distribution:
    """The fetched distribution, or a skip that says how to get it."""
    try:
        return fetch(version)
    except DistributionError as exc:
        pytest.skip(f"Kafka {version} unavailable: {exc}")


def run_tool(dist: Distribution, tool: str, *args: str, check: bool = True, stdin: str | None = None,
             timeout: float = TOOL_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """One of Kafka's tools, to completion; with ``check``, a failure shows its output."""
    done = subprocess.run(dist.command(tool, *args), input=stdin, capture_output=True, text=True,
                          timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL,
                          preexec_fn=bounded_child(int(timeout) + 30))
    if check and done.returncode != 0:
        raise AssertionError(f"{tool} {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-5000:]}")
    return done


class KafkaServer(LoggedChild):
    """One Kafka server (``kafka.Kafka``) in ``roles``: a broker pointed at controllers by
    ``controllers`` (``controller.quorum.voters`` or ``controller.quorum.bootstrap.servers`` and
    its value); a controller, a voter of the quorum ``controllers`` names, listening on
    ``controller_port``; or a combined broker and controller that is its own single voter (with
    ``controllers`` None), its metadata log in ``metadata.log.dir`` apart from its partitions."""

    def __init__(self, dist: Distribution, workdir: Path, node_id: int, controllers: tuple[str, str] | None,
                 properties: dict[str, str] | None = None, listener: str = "PLAINTEXT",
                 protocols: tuple[str, str] = ("PLAINTEXT", "PLAINTEXT"), roles: str = "broker",
                 controller_port: int = 0) -> None:
        """``listener``: the name of the listener serving clients and the other brokers;
        ``protocols``: the security protocols of the controller listener and of that one."""
        self.dist = dist
        self.workdir = workdir
        self.node_id = node_id
        self.roles = roles
        self.port = free_port()
        self.controller_port = controller_port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_dir = workdir / "logs"
        self.metadata_dir = workdir / "metadata" if controllers is None else self.log_dir
        workdir.mkdir(parents=True, exist_ok=True)
        listeners = [f"{listener}://127.0.0.1:{self.port}"]
        props: dict[str, str] = {"process.roles": roles if controllers is not None else "broker,controller"}
        if controllers is None:
            controllers = ("controller.quorum.voters", f"{node_id}@127.0.0.1:{self.controller_port}")
            props.update({"metadata.log.dir": str(self.metadata_dir), "offsets.topic.replication.factor": "1",
                          "transaction.state.log.replication.factor": "1"})
        if "controller" in props["process.roles"]:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        if props["process.roles"] == "controller":
            listeners = listeners[1:]
        else:
            props["inter.broker.listener.name"] = listener
        props.update({
            "node.id": str(node_id), controllers[0]: controllers[1], "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": f"CONTROLLER:{protocols[0]},{listener}:{protocols[1]}",
            "listeners": ",".join(listeners), "log.dirs": str(self.log_dir), **BROKER_DEFAULTS, **(properties or {}),
        })
        self.config_path = workdir / "server.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def format(self, cluster_id: str, release: str | None = None) -> None:
        run_tool(self.dist, "kafka-storage", "format", "-c", str(self.config_path), "-t", cluster_id,
                 *(["--release-version", release] if release else []))

    def start(self) -> "KafkaServer":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self._log_offset = self.stderr_path.stat().st_size if self.stderr_path.exists() else 0
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(self.dist.command("kafka-server-start", str(self.config_path)),
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         preexec_fn=bounded_child(LIFETIME_S))
        return self

    def log(self) -> str:
        """What this run of the broker logged."""
        if not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_bytes()[self._log_offset:].decode("utf-8", "replace")

    def wait_started(self, timeout: float = 120.0) -> None:
        def started() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"Kafka server {self.node_id} exited {self.proc.returncode}:\n{self.log()[-5000:]}")
            return bool((CONTROLLER_STARTED if self.roles == "controller" else STARTED).search(self.log()))
        poll(started, timeout, interval=0.2, message=f"Kafka server {self.node_id} to start; its log:\n"
                                                     f"{self.log()[-5000:]}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM: Kafka's controlled shutdown, then exit."""
        return stop_child(self.proc, signal.SIGTERM, timeout)

    def kill9(self) -> int | None:
        return stop_child(self.proc, signal.SIGKILL, 30.0)


class Writer:
    """Kafka's console producer (acks=all) fed one numbered line every 20 ms until stopped."""

    def __init__(self, dist: Distribution, bootstrap: str, topic: str) -> None:
        self.sent = 0
        self._stop = threading.Event()
        self.proc = subprocess.Popen(
            dist.command("kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
                                 "--producer-property", "acks=all", "--producer-property", "delivery.timeout.ms=300000"),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            preexec_fn=bounded_child(LIFETIME_S))
        self._thread = threading.Thread(target=self._feed, daemon=True)
        self._thread.start()

    def _feed(self) -> None:
        assert self.proc.stdin is not None
        while not self._stop.is_set():
            self.proc.stdin.write(f"record-{self.sent}\n")
            self.proc.stdin.flush()
            self.sent += 1
            time.sleep(0.02)

    def finish(self) -> int:
        """Stop feeding; the producer sends what it holds and exits at the end of its input."""
        self._stop.set()
        self._thread.join()
        _, err = self.proc.communicate(timeout=TOOL_TIMEOUT_S)
        assert self.proc.returncode == 0, err[-3000:]
        return self.sent
