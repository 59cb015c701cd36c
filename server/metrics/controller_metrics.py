"""The controller's metrics: gauges read from its state at each scrape, and counters and
histograms fed by the router, the commit path and an event-loop probe.

Everything lives in one ``CollectorRegistry`` per server (``ControllerMetrics.registry``), so
more parts (the Raft quorum's metrics) can register their own collectors beside these.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
import time
from wsgiref.simple_server import WSGIServer
from typing import Iterable, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from protocol.api_keys import APIS
from server.controller.quorum_controller import QuorumController
from server.controller.replica import ControllerReplica
from server.metalog.snapshots import SnapshotId
from server.metrics.names import controller, event_manager, raft, request_metrics
from server.quorum import QuorumReplication

# Milliseconds, from a fast in-memory request to a long-polling Fetch.
MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# How often the event-loop probe measures how long a ready callback waits for its turn.
PROBE_INTERVAL_S = 0.25
# How long a scrape waits for the event loop to read the controller's state.
SCRAPE_TIMEOUT_S = 10.0


class Observed(Protocol):
    """What the metrics read; the controller is replaced when it is rebuilt from the log."""

    @property
    def controller(self) -> QuorumController: ...

    @property
    def active(self) -> bool:
        """Whether this controller is the active one (a quorum's standbys are not)."""

    @property
    def replication(self) -> QuorumReplication:
        """The quorum this controller votes in (a single voter is a quorum of one), and its
        commit path."""

    @property
    def snapshot(self) -> SnapshotId | None: ...

    @property
    def replica(self) -> ControllerReplica:
        """What replays the committed log on a standby."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ControllerMetrics:
    def __init__(self, observed: Observed) -> None:
        self.observed = observed
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(request_metrics("RequestsPerSec"), "Requests served, by API",
                                ["request"], registry=r)
        self.request_time = Histogram(request_metrics("TotalTimeMs"),
                                      "Time from reading a request to its response being ready, by API (ms)",
                                      ["request"], buckets=MS_BUCKETS, registry=r)
        self.controller_requests = Counter(controller("ControllerRequestsRate"),
                                           "Requests the controller processed", registry=r)
        self.commit_latency = Histogram(controller("MetadataCommitLatencyMs"),
                                        "Time to commit a group of metadata batches: write and fsync, or a majority of voters (ms)",
                                        buckets=MS_BUCKETS, registry=r)
        self.commits = Counter(controller("MetadataCommitRate"),
                               "Metadata records committed to the log", registry=r)
        self.queue_time = Histogram(event_manager("EventQueueTimeMs"),
                                    "How long a ready event waits for the event loop (ms)",
                                    buckets=MS_BUCKETS, registry=r)
        self.processing_time = Histogram(event_manager("EventQueueProcessingTimeMs"),
                                         "Time the event loop spends handling one request (ms)",
                                         buckets=MS_BUCKETS, registry=r)
        self._state = _StateCollector(observed)
        r.register(self._state)
        self._committed = observed.replication.commits.committed_offset
        observed.replication.commits.listeners.append(self._on_commit)
        self._probe: asyncio.TimerHandle | None = None
        self._http: WSGIServer | None = None
        self._thread = threading.Thread()

    # --- feeds ------------------------------------------------------------------------------
    def observe_request(self, api_key: int, started: float, reply: bytes | asyncio.Future[bytes]) -> None:
        """Told by the router of every request it dispatched: ``started`` is when dispatch
        began (``time.perf_counter``), ``reply`` the response or a future of it."""
        api = APIS.get(api_key)
        name = api.name if api is not None else str(api_key)
        self.processing_time.observe((time.perf_counter() - started) * 1000)
        self.requests.labels(name).inc()
        self.controller_requests.inc()
        timer = self.request_time.labels(name)
        if isinstance(reply, asyncio.Future):
            reply.add_done_callback(lambda _: timer.observe((time.perf_counter() - started) * 1000))
        else:
            timer.observe((time.perf_counter() - started) * 1000)

    def _on_commit(self, committed: int) -> None:
        self.commits.inc(max(0, committed - self._committed))
        self._committed = committed
        # As Kafka's, relevant on the active controller: a standby commits nothing it proposed.
        latency = self.observed.replication.commits.last_flush_ms
        if latency is not None:
            self.commit_latency.observe(latency)

    def _start_probe(self) -> None:
        """Measure the event loop's queueing delay: how late a timer callback runs."""
        loop = asyncio.get_running_loop()
        due = loop.time() + PROBE_INTERVAL_S

        def fire() -> None:
            self.queue_time.observe(max(0.0, loop.time() - due) * 1000)
            self._start_probe()
        self._probe = loop.call_at(due, fire)

    # --- serving ----------------------------------------------------------------------------
    def start(self, host: str, port: int) -> int:
        """Serve the metrics over HTTP on a thread of their own, so a scrape never waits for
        the event loop; start the loop probe. Returns the port bound (``port`` 0: any free)."""
        self._state.loop = asyncio.get_running_loop()
        try:
            self._http, self._thread = start_http_server(port, host or "0.0.0.0", registry=self.registry)
        except OSError as exc:
            raise _endpoint_error(exc, host, port) from None
        self._start_probe()
        return int(self._http.server_port)

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._thread.join()
            self._http = None


class _StateCollector(Collector):
    """Gauges computed from the controller's state when Prometheus scrapes. The scrape runs on
    the HTTP thread while the event loop changes that state, so the values are read on the
    loop, between two of its callbacks."""

    def __init__(self, observed: Observed) -> None:
        self.observed = observed
        self.loop: asyncio.AbstractEventLoop | None = None  # set once the server runs

    def collect(self) -> Iterable[Metric]:
        if self.loop is None:
            return
        answer: concurrent.futures.Future[dict[str, tuple[str, int]]] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(lambda: answer.set_result(self._values()))
        for name, (help_text, value) in answer.result(timeout=SCRAPE_TIMEOUT_S).items():
            full = raft(name.removeprefix("raft:")) if name.startswith("raft:") else controller(name)
            yield GaugeMetricFamily(full, help_text, value=value)

    def _values(self) -> dict[str, tuple[str, int]]:
        values = self._controller_values()
        # Kafka's raft-metrics ("raft:" names them apart).
        core = self.observed.replication.core
        values.update({
            "raft:current-leader": ("The quorum's leader as this voter knows it, -1 if none", core.leader_id),
            "raft:current-epoch": ("The quorum's current leader epoch", core.epoch),
            "raft:high-watermark": ("The high watermark this voter knows", core.high_watermark),
            "raft:log-end-offset": ("This voter's metadata log end offset", core.log.end_offset),
            "raft:log-end-epoch": ("The leader epoch of this voter's last batch", core.log.last_epoch),
        })
        return values

    def _controller_values(self) -> dict[str, tuple[str, int]]:
        c = self.observed.controller
        committer = self.observed.replication
        snapshot = self.observed.snapshot
        brokers = c.cluster.brokers.values()
        fenced = sum(1 for b in brokers if b.fenced)
        partitions = [p for t in c.replication.topics.values() for p in t.partitions]
        committed = committer.commits.committed_offset
        active = self.observed.active
        # The append time of the last batch applied: one this node wrote, on the active
        # controller (Kafka's takes the time it hands records to the log), else the last one it
        # replayed; a standby's own writes of an epoch it lost were never applied for good.
        replayed = self.observed.replica.loader.last_timestamp_ms
        stamp = max(committer.commits.last_batch_timestamp_ms, replayed) if active else replayed
        return {
            "ActiveControllerCount": ("Whether this controller is the active one", int(active)),
            "ActiveBrokerCount": ("Registered brokers that are not fenced", len(brokers) - fenced),
            "FencedBrokerCount": ("Registered brokers that are fenced", fenced),
            "GlobalTopicCount": ("Topics in the cluster", len(c.replication.topics)),
            "GlobalPartitionCount": ("Partitions in the cluster", c.replication.partition_count),
            "OfflinePartitionsCount": ("Partitions without a leader", len(c.replication.leaderless)),
            "PreferredReplicaImbalanceCount": (
                "Partitions whose leader is not their first replica",
                sum(1 for p in partitions if p.replicas and p.leader != p.replicas[0])),
            "LastAppliedRecordOffset": ("Offset of the last record applied to the state", c.last_applied_offset),
            "LastCommittedRecordOffset": ("Offset of the last record made durable", committed),
            "LastAppliedRecordTimestamp": ("Append time of the last batch applied (ms since the epoch)", stamp),
            "LastAppliedRecordLagMs": ("Milliseconds since the append time of the last batch applied",
                                       max(0, wall_clock_ms() - stamp) if stamp >= 0 else 0),
            "TimedOutBrokerHeartbeatCount": ("Brokers fenced because their heartbeats stopped",
                                             c.timed_out_heartbeats),
            "MetadataErrorCount": ("Metadata log writes that failed", committer.commits.failures),
            # KIP-631's: the active controller applies before it commits, so it lags by nothing.
            "MetadataLag": ("Committed records this controller has yet to replay",
                            max(0, committed - c.last_applied_offset)),
            "MetadataSnapshotLag": ("Committed records after the latest snapshot",
                                    committed + 1 - (snapshot.end_offset if snapshot is not None else 0)),
        }


def _endpoint_error(exc: OSError, host: str, port: int) -> OSError:
    return OSError(exc.errno, f"metrics endpoint on {host or '0.0.0.0'}:{port}: {exc.strerror}")


def check_port(host: str, port: int) -> None:
    """Raise the OSError that serving the metrics on host:port would meet (a port in use),
    before start-up writes anything; the port is left free for ``start``."""
    if port == 0:
        return
    try:
        socket.create_server((host or "0.0.0.0", port)).close()
    except OSError as exc:
        raise _endpoint_error(exc, host, port) from None
