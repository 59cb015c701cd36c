"""Brokers of one process on one event loop, sharing one metadata fetcher and image.

A single broker is a fleet of one. The fetcher replays the log once for everybody; every
broker heartbeats over its own connection with the offset the fetcher has replayed; the
partition leaders among them act on the shared image. Start-up is spread over a ramp so that
a few thousand brokers neither connect in one burst nor heartbeat in step.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Coroutine

from protocol.constants import ControlledShutdownChange
from protocol.error_codes import Error, describe
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_cluster_response import DescribeClusterResponse
from protocol.generated.metadata.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol.generated.metadata.fence_broker_record import FenceBrokerRecord
from protocol.message import Message
from server.security.client import ClientSecurity
from server.security.settings import SecurityConfig
from tools.broker.broker import Broker, BrokerConfig, BrokerFailed, default_client_port
from tools.broker.channel import ControllerChannel, ControllerUnavailable
from tools.broker.faults import FaultInjector
from tools.broker.fetcher import MetadataFetcher
from tools.broker.forwarder import Forwarder
from server.image.image import MetadataImage
from tools.broker.lag import LagModel
from tools.broker.leader import PartitionLeaders
from tools.broker.lifecycle import State
from tools.broker.state_dir import StateDir
from tools.broker.stats import Stats

log = logging.getLogger("kraftwire.broker")

DESCRIBE_CLUSTER_VERSION = 1
# Brokers started per second at most by default: each start is a connection, ApiVersions and
# a registration that the controller must make durable before it answers.
STARTS_PER_S = 1000
RESTART_DELAY_S = 1.0
RETRY_S = 1.0


@dataclass
class FleetOptions:
    bootstrap: list[tuple[str, int]]
    node_ids: list[int]
    state_dir: Callable[[int], Path]
    racks: list[str] | None = None  # given out round robin
    cluster_id: str | None = None
    heartbeat_interval_s: float = 2.0
    request_timeout_s: float = 5.0
    seed: int = 0
    mean_in_sync_s: float = 0.0
    mean_catch_up_s: float = 2.0
    fault_rate: float = 0.0
    fault_max_s: float = 20.0
    ramp_s: float = 0.0
    shutdown_timeout_s: float = 60.0
    advertised_host: str = "127.0.0.1"
    # The client listener's port of each broker; 0 for any free port.
    client_port: Callable[[int], int] = default_client_port
    serve_clients: bool = True
    controller_security: ClientSecurity = field(default_factory=ClientSecurity)  # how the controllers are reached
    # The client listeners' name and security (the same for every broker of the fleet).
    listener_name: str = "PLAINTEXT"
    client_security: SecurityConfig = field(default_factory=SecurityConfig)


def default_ramp_s(brokers: int, heartbeat_interval_s: float) -> float:
    """One heartbeat interval for a fleet, longer if that would start more than STARTS_PER_S a
    second; nothing for a single broker."""
    return 0.0 if brokers == 1 else max(heartbeat_interval_s, brokers / STARTS_PER_S)


async def discover_cluster_id(channel: ControllerChannel) -> str:
    """The cluster id, from DescribeCluster v1 (ApiVersions does not carry it)."""
    while True:
        try:
            response = await channel.call(DescribeClusterRequest(), DESCRIBE_CLUSTER_VERSION)
        except ControllerUnavailable:
            continue
        assert isinstance(response, DescribeClusterResponse)
        if response.error_code == Error.NONE and response.cluster_id:
            log.info("cluster id %s (from %s)", response.cluster_id, channel.address)
            return response.cluster_id
        log.warning("DescribeCluster at %s failed: %s", channel.address, describe(response.error_code))
        await asyncio.sleep(RETRY_S)


class Fleet:
    def __init__(self, options: FleetOptions) -> None:
        if not options.node_ids:
            raise ValueError("a fleet needs at least one broker")
        self.options = options
        self.stats = Stats()
        self.image = MetadataImage(options.client_security.delegation_tokens)
        self.image.listeners.append(self._on_record)
        self.brokers: dict[int, Broker] = {}
        self.killed: set[int] = set()
        self.stopping = False
        self.fetcher: MetadataFetcher | None = None
        self.forwarder: Forwarder | None = None
        self.config: BrokerConfig | None = None
        self.faults: FaultInjector | None = None
        self.model = LagModel(options.seed, options.mean_in_sync_s, options.mean_catch_up_s)
        self.leaders = PartitionLeaders(lambda: self.image, self.brokers, self.model, self.stats, self.unreachable)
        self._background: list[asyncio.Task[None]] = []
        self.failed = asyncio.Event()  # a task died of a bug: the process should not go on
        self._fetching: asyncio.Task[None] | None = None

    def report_crash(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        if isinstance(exc, BrokerFailed):
            log.error("stopping: %s", exc)  # a setting, not a bug: one line
        else:
            log.error("stopping: a task failed", exc_info=exc)
        self.failed.set()

    # --- start ---------------------------------------------------------------------------------
    async def start(self) -> None:
        o = self.options
        first = o.node_ids[0]
        channel = ControllerChannel(o.bootstrap, f"kraftwire-broker-{first}-metadata",
                                    random.Random(f"{o.seed}/metadata"), o.request_timeout_s, o.controller_security)
        cluster_id = o.cluster_id or await discover_cluster_id(channel)
        self.config = BrokerConfig(o.bootstrap, cluster_id, o.heartbeat_interval_s, o.request_timeout_s,
                                   o.advertised_host, o.seed, o.client_port, o.serve_clients, o.controller_security,
                                   o.listener_name, o.client_security)
        # The fetch stream is the first broker's: one observer for the whole process.
        self.fetcher = MetadataFetcher(channel, first, self.image, cluster_id)
        self._fetching = self._spawn(self.fetcher.run())
        self.forwarder = Forwarder(ControllerChannel(o.bootstrap, f"kraftwire-broker-{first}-forwarding",
                                                     random.Random(f"{o.seed}/forwarding"), o.request_timeout_s,
                                                     o.controller_security),
                                   self.fetcher, o.request_timeout_s)
        await self.forwarder.connect()
        self._spawn(self.leaders.run())
        self._spawn(self._ramp())
        if o.fault_rate > 0:
            self.faults = FaultInjector(self, o.fault_rate, o.fault_max_s, random.Random(f"{o.seed}/faults"))
            self._spawn(self.faults.run())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        task.add_done_callback(self.report_crash)
        self._background.append(task)
        return task

    async def _ramp(self) -> None:
        loop = asyncio.get_running_loop()
        ids = self.options.node_ids
        begin = loop.time()
        for i, node_id in enumerate(ids):
            at = begin + self.options.ramp_s * i / len(ids)
            if at > loop.time():
                await asyncio.sleep(at - loop.time())
            if self.stopping:
                return
            self._start_broker(node_id)
        quiet_gc()

    def _rack(self, node_id: int) -> str | None:
        racks = self.options.racks
        return racks[self.options.node_ids.index(node_id) % len(racks)] if racks else None

    def _start_broker(self, node_id: int) -> None:
        assert self.config is not None and self.fetcher is not None and self.forwarder is not None, \
            "brokers start after the fleet"
        broker = Broker(node_id, self._rack(node_id), self.config, self.fetcher, self.stats,
                        StateDir(self.options.state_dir(node_id)), _log_transition, self.forwarder)
        self.brokers[node_id] = broker
        broker.start().add_done_callback(self.report_crash)

    def _on_record(self, record: Message, offset: int) -> None:
        if isinstance(record, FenceBrokerRecord):
            broker = self.brokers.get(record.id)
            if broker is not None and broker.epoch == record.epoch:
                broker.fenced_in_metadata(offset)
        elif (isinstance(record, BrokerRegistrationChangeRecord)
              and record.in_controlled_shutdown == ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN):
            broker = self.brokers.get(record.broker_id)
            if broker is not None and broker.epoch == record.broker_epoch:
                broker.controlled_shutdown_in_metadata()

    # --- faults (FaultTarget) -----------------------------------------------------------------
    def size(self) -> int:
        return len(self.options.node_ids)

    def running_ids(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.state is State.ACTIVE and not b.paused]

    def disturbed_count(self) -> int:
        return len(self.killed) + sum(1 for b in self.brokers.values() if b.paused or b.state is not State.ACTIVE)

    def unreachable(self, node_id: int) -> bool:
        """A broker of this process that cannot fetch as a follower right now."""
        if node_id in self.killed:
            return True
        broker = self.brokers.get(node_id)
        return broker is not None and broker.paused

    def kill(self, node_id: int, down_s: float) -> None:
        self.brokers.pop(node_id).kill()
        self.killed.add(node_id)
        asyncio.get_running_loop().call_later(down_s, self._revive, node_id)

    def pause(self, node_id: int, seconds: float) -> None:
        self.brokers[node_id].pause(seconds)

    def restart(self, node_id: int) -> None:
        broker = self.brokers[node_id]
        assert broker.task is not None, "a broker of the fleet has started"
        self.killed.add(node_id)  # counted as disturbed until the new incarnation starts
        broker.request_shutdown()
        loop = asyncio.get_running_loop()
        broker.task.add_done_callback(lambda _: loop.call_later(RESTART_DELAY_S, self._revive, node_id))

    def _revive(self, node_id: int) -> None:
        self.killed.discard(node_id)
        if not self.stopping:
            self._start_broker(node_id)

    # --- reporting -----------------------------------------------------------------------------
    def state_counts(self) -> Counter[str]:
        counts = Counter(b.state.value for b in self.brokers.values() if b.node_id not in self.killed)
        counts["KILLED"] = len(self.killed)
        return counts

    def summary(self) -> str:
        counts = self.state_counts()
        order = [s.value for s in State] + ["KILLED"]
        states = ", ".join(f"{name} {counts[name]}" for name in order if counts[name])
        paused = sum(1 for b in self.brokers.values() if b.paused)
        rediscoveries = sum(b.channel.rediscoveries for b in self.brokers.values())
        s = self.stats
        n = self.size()
        line = (f"summary: {n} broker{'s' if n != 1 else ''} ({states or 'none started'}; paused {paused}) | "
                f"{s.heartbeat_line()} | registrations {s.registrations}, controller rediscoveries "
                f"{rediscoveries} | alter-partition sent {s.alter_partition_sent}, errors "
                f"{s.alter_partition_errors}, isr changes {s.isr_changes}")
        if self.fetcher is not None:
            line += f" | metadata offset {self.fetcher.offset} of {self.fetcher.high_watermark}"
        if self.faults is not None:
            line += f" | faults {self.faults.line()}"
        return line

    # --- stop ----------------------------------------------------------------------------------
    async def shutdown(self) -> bool:
        """Controlled shutdown of every running broker; True if the controller granted them all."""
        self.stopping = True
        for task in self._background:
            if task is not self._fetching:  # brokers in controlled shutdown report its offset
                task.cancel()
        brokers = list(self.brokers.values())
        for b in brokers:
            b.request_shutdown()
        tasks = [b.task for b in brokers if b.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.options.shutdown_timeout_s)
        clean = True
        for b in brokers:
            if b.lifecycle.clean_shutdown or (b.state is State.SHUTDOWN and b.epoch < 0):
                continue  # granted, or stopped before it ever registered
            b.lifecycle.abandon("controlled shutdown did not complete")
            b.kill()
            clean = False
        self.close()
        return clean

    def close(self) -> None:
        """Stop at once: every task cancelled, every connection dropped."""
        self.stopping = True
        for b in self.brokers.values():
            b.kill()
        for task in self._background:
            task.cancel()
        if self.fetcher is not None:
            self.fetcher.channel.close()
        if self.forwarder is not None:
            self.forwarder.channel.close()


def quiet_gc() -> None:
    """Once every broker has started, keep the cyclic garbage collector out of the heartbeats.

    The brokers' long-lived objects leave its view (freeze), and young collections wait for
    100,000 new objects instead of 700: at 10,000 brokers the heartbeats in flight are tens of
    thousands of young objects that every collection walked, which took about a third of the
    process's CPU and paused all its heartbeats for up to a third of a second at a time.
    Nearly everything a heartbeat allocates is freed by reference counting anyway; what the
    freeze keeps for good is at most the first incarnation of each broker a fault replaces."""
    gc.freeze()
    gc.set_threshold(100_000)


def _log_transition(node_id: int, old: State, new: State, reason: str) -> None:
    log.info("broker %d: %s -> %s (%s)", node_id, old.value, new.value, reason)

