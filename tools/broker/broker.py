"""One broker's side of the KIP-631 lifecycle: registration, heartbeats, controlled shutdown.

The decisions are the Lifecycle's; this driver does the talking and the waiting. Heartbeats
go out every interval, one at a time, carrying the offset the shared image has replayed; a
fenced broker that is still catching up heartbeats again as soon as the image reaches its
registration, and a broker in controlled shutdown as soon as the image holds the record that
started it, so neither waits a whole interval for the controller's next answer, and a fleet
shutting down at once does not heartbeat on every step of the image.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Callable

from protocol.error_codes import Error, describe
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import (
    BrokerRegistrationRequest, Feature, Listener)
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.primitives import random_uuid
from server.controller.features import SUPPORTED_FEATURES
from server.config import ControllerConfig
from server.network import Listener as ClientListener
from server.security.client import ClientSecurity
from server.security.settings import SECURITY_PROTOCOL_IDS, SecurityConfig
from tools.broker.channel import ControllerChannel, ControllerUnavailable
from tools.broker.client_api import ClientApis
from tools.broker.fetcher import MetadataFetcher
from tools.broker.forwarder import Forwarder
from tools.broker.lifecycle import Action, Lifecycle, OnTransition, State
from tools.broker.state_dir import StateDir
from tools.broker.stats import Stats

log = logging.getLogger("kraftwire.broker")

REGISTRATION_VERSION = 4
PLAINTEXT = SECURITY_PROTOCOL_IDS["PLAINTEXT"]  # the protocol of the listeners benchmarks register
HEARTBEAT_VERSION = 1
# A test broker is of the controller's own release: it supports what the controller supports.
BROKER_FEATURES = SUPPORTED_FEATURES
REGISTER_BACKOFF_BASE_S = 0.1


@dataclass
class BrokerConfig:
    bootstrap: list[tuple[str, int]]
    cluster_id: str
    heartbeat_interval_s: float
    request_timeout_s: float
    advertised_host: str
    seed: int
    client_port: Callable[[int], int] = lambda node_id: default_client_port(node_id)
    # Without: nothing listens, and each broker advertises its default port (a fleet too large
    # for a listening socket per broker).
    serve_clients: bool = True
    # How the controllers are reached: their listener's protocol, client side.
    controller_security: ClientSecurity = field(default_factory=ClientSecurity)
    # The client listener: its name (registered, as Kafka's brokers register theirs) and security.
    listener_name: str = "PLAINTEXT"
    client_security: SecurityConfig = field(default_factory=SecurityConfig)


def default_client_port(node_id: int) -> int:
    """Where a broker serves its clients unless told otherwise: a distinct port per id."""
    return 20000 + node_id % 40000


class BrokerFailed(Exception):
    """A broker cannot go on because of a setting, not a bug (its client listener cannot be
    opened, the controller refuses its registration for good); the message says why."""


# Registration answers no retry changes: the request itself is wrong for this cluster.
REFUSED_FOR_GOOD: dict[int, str] = {
    Error.INVALID_REGISTRATION: "the controller refuses its registration (a node id a controller voter uses, "
                                "or log directories it cannot accept: the controller's log says which)",
    Error.INCONSISTENT_CLUSTER_ID: "it names another cluster id than the controller's (--cluster-id)",
    Error.BROKER_ID_NOT_REGISTERED: "the controller does not register ZooKeeper brokers",
    Error.UNSUPPORTED_VERSION: "the controller does not support this broker's registration version or features",
}


def log_dir_id(seed: int, node_id: int) -> bytes:
    """A log directory keeps its id across restarts, so it is derived, not drawn afresh."""
    raw = bytearray(random.Random(f"{seed}/{node_id}/log-dir").randbytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)


class Broker:
    def __init__(self, node_id: int, rack: str | None, config: BrokerConfig, fetcher: MetadataFetcher,
                 stats: Stats, state_dir: StateDir, on_transition: OnTransition, forwarder: Forwarder) -> None:
        self.node_id = node_id
        self.rack = rack
        self.config = config
        self.fetcher = fetcher
        self.stats = stats
        self.state_dir = state_dir
        self.incarnation = random_uuid()  # fresh for every start, as Kafka's brokers do
        self.lifecycle = Lifecycle(node_id, on_transition)
        self.channel = ControllerChannel(config.bootstrap, f"kraftwire-broker-{node_id}",
                                         random.Random(f"{config.seed}/{node_id}/{self.incarnation.hex()}"),
                                         config.request_timeout_s, config.controller_security)
        self.paused_until = 0.0
        self.apis = ClientApis(node_id, config.cluster_id, fetcher.image, forwarder, config.client_security)
        self.listener = ClientListener(self.apis.dispatch, ControllerConfig.socket_request_max_bytes,
                                       security=config.client_security, sasl_factory=self.apis.logins.session)
        self.port = 0  # the client listener's, once open
        self.task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._wake_pending = False  # a wake-up that came while no wait was in progress
        self._last_error: int = Error.NONE

    # --- what others ask -------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self.lifecycle.state

    @property
    def epoch(self) -> int:
        return self.lifecycle.epoch

    @property
    def paused(self) -> bool:
        return asyncio.get_running_loop().time() < self.paused_until

    @property
    def can_lead(self) -> bool:
        return self.lifecycle.can_lead and not self.paused

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.ensure_future(self.run())
        return self.task

    def request_shutdown(self) -> None:
        self.paused_until = 0.0
        self.lifecycle.request_shutdown()
        self._wake_now()

    def fenced_in_metadata(self, offset: int) -> None:
        self.lifecycle.fenced_in_metadata(offset)
        self._wake_now()  # ask the controller at once rather than trust a possibly stale image

    def controlled_shutdown_in_metadata(self) -> None:
        """The image replayed the record that put this broker in controlled shutdown: the
        leaderships it had moved in the same batch, so the next heartbeat may be granted."""
        if self.state is State.PENDING_SHUTDOWN:
            self._wake_now()

    def pause(self, seconds: float) -> None:
        """Stop heartbeating and leading for ``seconds``, keeping the connection: a frozen process."""
        self.paused_until = asyncio.get_running_loop().time() + seconds

    def kill(self) -> None:
        """Vanish: no more requests, the connections dropped, nothing recorded."""
        if self.task is not None:
            self.task.cancel()
        self.channel.close()
        self._close_listener()

    def _close_listener(self) -> None:
        server = self.listener.server
        if server is not None:
            server.close()
            for conn in list(self.listener.connections):
                conn.close()

    # --- the conversation -------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        # Off the loop: a fleet's brokers start and stop together, and an fsync each would
        # stall every heartbeat in the process.
        previous = await loop.run_in_executor(None, self.state_dir.take_clean_shutdown_epoch)
        try:
            await self._listen()
            registered = await self._register(previous)
            while registered:
                sent = loop.time()
                reported = self.fetcher.offset
                action = await self._heartbeat(reported)
                if action is Action.STOP:
                    break
                if action is Action.REGISTER:
                    registered = await self._register(-1)
                    continue
                await self._wait_for_next(sent, reported)
        finally:
            self.channel.close()
            self._close_listener()
        if self.lifecycle.clean_shutdown:
            await loop.run_in_executor(None, self.state_dir.record_clean_shutdown, self.lifecycle.epoch)

    async def _listen(self) -> None:
        """Open the client listener before registering: the registration advertises its port."""
        if not self.config.serve_clients:
            self.port = default_client_port(self.node_id)
            return
        host, wanted = self.config.advertised_host, self.config.client_port(self.node_id)
        try:
            _, self.port = await self.listener.start(host, wanted)
        except OSError as exc:
            raise BrokerFailed(f"broker {self.node_id} cannot listen on {host}:{wanted}: "
                                 f"{exc.strerror or exc}") from None

    async def _register(self, previous_epoch: int) -> bool:
        """Register until the controller accepts; False if shutdown came first."""
        loop = asyncio.get_running_loop()
        rng = self.channel.rng
        attempt = 0
        while self.state is not State.SHUTDOWN:
            request = BrokerRegistrationRequest(
                broker_id=self.node_id, cluster_id=self.config.cluster_id, incarnation_id=self.incarnation,
                listeners=[Listener(name=self.config.listener_name, host=self.config.advertised_host,
                                    port=self.port,
                                    security_protocol=SECURITY_PROTOCOL_IDS[self.config.client_security.protocol])],
                features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                          for n, (lo, hi) in BROKER_FEATURES.items()],
                rack=self.rack, log_dirs=[log_dir_id(self.config.seed, self.node_id)],
                previous_broker_epoch=previous_epoch)
            try:
                response = await self.channel.call(request, REGISTRATION_VERSION)
            except ControllerUnavailable:
                continue  # the channel has backed off and moved on
            assert isinstance(response, BrokerRegistrationResponse)
            if self.state is State.SHUTDOWN:
                return False
            if response.error_code == Error.NONE:
                self.stats.registrations += 1
                self._last_error = Error.NONE
                if self.state is State.FENCED:  # registering again: no change of state to report
                    log.info("broker %d: registered again with broker epoch %d", self.node_id, response.broker_epoch)
                self.lifecycle.registered(response.broker_epoch, previous_epoch)
                return True
            why = REFUSED_FOR_GOOD.get(response.error_code)
            if why is not None:
                raise BrokerFailed(f"broker {self.node_id} stopped: registration refused with "
                                   f"{describe(response.error_code)}: {why}")
            self._note_error("registration", response.error_code)
            attempt += 1
            delay = min(self.config.heartbeat_interval_s, REGISTER_BACKOFF_BASE_S * 2 ** attempt)
            await self._wait(loop.time() + delay * rng.uniform(0.5, 1.0))
        return False

    async def _heartbeat(self, offset: int) -> Action:
        want_fence, want_shut_down = self.lifecycle.heartbeat_request(offset)
        request = BrokerHeartbeatRequest(broker_id=self.node_id, broker_epoch=self.lifecycle.epoch,
                                         current_metadata_offset=offset, want_fence=want_fence,
                                         want_shut_down=want_shut_down)
        stats = self.stats
        stats.heartbeats_sent += 1
        sent = time.perf_counter()  # the loop's clock counts whole milliseconds under uvloop
        try:
            response = await self.channel.call(request, HEARTBEAT_VERSION)
        except ControllerUnavailable:
            stats.heartbeats_unanswered += 1
            return Action.HEARTBEAT
        assert isinstance(response, BrokerHeartbeatResponse)
        stats.latency.record(time.perf_counter() - sent)
        stats.heartbeats_answered += 1
        if response.error_code != Error.NONE:
            stats.heartbeat_errors += 1
            self._note_error("heartbeat", response.error_code)
        else:
            self._last_error = Error.NONE
        return self.lifecycle.on_heartbeat(response.error_code, response.is_fenced, response.should_shut_down,
                                           offset)

    def _note_error(self, what: str, code: int) -> None:
        """Log an error when it starts, not on every retry."""
        if code != self._last_error:
            self._last_error = code
            hint = (" (another live broker holds the id; retrying until its session expires)"
                    if code == Error.DUPLICATE_BROKER_REGISTRATION else "")
            log.warning("broker %d: %s refused: %s%s", self.node_id, what, describe(code), hint)

    async def _wait_for_next(self, sent: float, reported: int) -> None:
        due = sent + self.config.heartbeat_interval_s
        if self.state is State.FENCED and reported < self.epoch:
            await self._wait(due, self.epoch)
        else:
            await self._wait(due)
        while self.paused:
            await self._wait(self.paused_until)

    async def _wait(self, until: float, offset: int | None = None) -> None:
        """Sleep until ``until``, the image reaching ``offset``, or a wake-up, whichever is first."""
        if self._wake_pending:
            self._wake_pending = False
            return
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()
        self._wake = wake
        timer = loop.call_later(max(0.0, until - loop.time()), _resolve, wake)
        if offset is not None:
            self.fetcher.wait_for(offset).add_done_callback(lambda _: _resolve(wake))
        try:
            await wake
        finally:
            timer.cancel()
            self._wake = None

    def _wake_now(self) -> None:
        if self._wake is not None:
            _resolve(self._wake)
        else:
            self._wake_pending = True


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
