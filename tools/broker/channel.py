"""The way to the active controller: one connection, found from the bootstrap list.

Every new connection starts with ApiVersions, as a Kafka client's does; a request at a version
the controller does not serve is refused here with a message naming both, instead of being
sent to be cut off. On NOT_CONTROLLER, a lost connection or a timeout the channel drops its
connection and moves to the next bootstrap address, after an exponential backoff with jitter
so that a fleet that loses its controller does not come back in one burst.
"""

from __future__ import annotations

import asyncio
import logging
import random

from protocol.api_keys import APIS
from protocol.error_codes import Error, describe
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.message import Message, api_key_of
from server.client_connection import PLAINTEXT, ConnectionLost, KafkaConnection
from server.security.client import ClientSecurity

log = logging.getLogger("kraftwire.broker.channel")

BACKOFF_BASE_S = 0.1
BACKOFF_MAX_S = 2.0
CONNECT_TIMEOUT_S = 5.0
API_VERSIONS_VERSION = 3


class ControllerUnavailable(Exception):
    """No answer from an active controller this time; the channel is already looking for one."""


class ControllerChannel:
    def __init__(self, bootstrap: list[tuple[str, int]], client_id: str, rng: random.Random,
                 request_timeout_s: float, security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.client_id = client_id
        self.rng = rng
        self.request_timeout_s = request_timeout_s
        self.failures = 0  # consecutive: drives the backoff
        self.rediscoveries = 0
        self._index = 0
        self._conn: KafkaConnection | None = None
        self._lock = asyncio.Lock()
        self.api_versions: dict[int, tuple[int, int]] = {}  # api key -> (min, max) served

    @property
    def address(self) -> str:
        host, port = self.bootstrap[self._index]
        return f"{host}:{port}"

    async def call(self, message: Message, version: int, timeout_s: float | None = None) -> Message:
        """The controller's answer; ControllerUnavailable if there was none or it was NOT_CONTROLLER."""
        conn = await self._connected()
        key = api_key_of(message)
        lo, hi = self.api_versions.get(key, (0, -1))
        if not lo <= version <= hi:
            served = f"v{lo}-v{hi}" if lo <= hi else "nothing"
            problem = f"{self.address} serves {APIS[key].name} {served}, not v{version}"
            log.error("%s: %s", self.client_id, problem)
            self.rotate(problem)  # another controller of the list may serve it
            raise ControllerUnavailable(problem)
        try:
            response = await conn.request(message, version, timeout_s or self.request_timeout_s)
        except ConnectionLost as exc:
            self.rotate(str(exc))
            raise ControllerUnavailable(str(exc)) from None
        if getattr(response, "error_code", Error.NONE) == Error.NOT_CONTROLLER:
            self.rotate("NOT_CONTROLLER")
            raise ControllerUnavailable(f"{self.address} is not the active controller")
        self.failures = 0
        return response

    def rotate(self, reason: str) -> None:
        """Give up on the current address: the next call backs off and tries the next one."""
        was, had = self.address, self._conn is not None
        self.failures += 1
        self.rediscoveries += 1
        self._index = (self._index + 1) % len(self.bootstrap)
        if self._conn is not None:
            self._conn.close(reason)
            self._conn = None
        # Only a connection that was open is a controller lost; before that none was found.
        what = "lost the controller at" if had else "no controller at"
        log.info("%s: %s %s (%s); next try %s", self.client_id, what, was, reason, self.address)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close("closed by the broker")
            self._conn = None

    async def _connected(self) -> KafkaConnection:
        conn = self._conn
        if conn is not None and conn.is_open:
            return conn  # the common case, without the lock
        async with self._lock:
            while self._conn is None or not self._conn.is_open:
                self._conn = None
                if self.failures:
                    delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (self.failures - 1))
                    await asyncio.sleep(delay * self.rng.uniform(0.5, 1.0))
                host, port = self.bootstrap[self._index]
                try:
                    conn = await KafkaConnection.open(host, port, self.client_id, CONNECT_TIMEOUT_S, self.security)
                except (OSError, asyncio.TimeoutError) as exc:
                    self.rotate(f"cannot connect: {exc.strerror if isinstance(exc, OSError) else 'timed out'}")
                    continue
                except ConnectionLost as exc:  # refused credentials among them: said, and tried again
                    log.error("%s: %s: %s", self.client_id, self.address, exc)
                    self.rotate(str(exc))
                    continue
                try:
                    versions = await conn.request(ApiVersionsRequest(client_software_name="kraftwire-broker",
                                                                     client_software_version="1"),
                                                  API_VERSIONS_VERSION, self.request_timeout_s)
                except ConnectionLost as exc:
                    self.rotate(f"ApiVersions failed: {exc}")
                    continue
                assert isinstance(versions, ApiVersionsResponse)
                if versions.error_code != Error.NONE:
                    conn.close()
                    self.rotate(f"ApiVersions answered {describe(versions.error_code)}")
                    continue
                self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
                self._conn = conn
            return self._conn
