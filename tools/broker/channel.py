"""The way to the active controller: one connection, found from the bootstrap list.

On NOT_CONTROLLER, a lost connection or a timeout the channel drops its connection and moves
to the next bootstrap address, after an exponential backoff with jitter so that a fleet that
loses its controller does not come back in one burst.
"""

from __future__ import annotations

import asyncio
import logging
import random

from protocol.error_codes import Error
from protocol.message import Message
from tools.broker.connection import ConnectionLost, KafkaConnection

log = logging.getLogger("kraftwire.broker.channel")

BACKOFF_BASE_S = 0.1
BACKOFF_MAX_S = 2.0
CONNECT_TIMEOUT_S = 5.0


class ControllerUnavailable(Exception):
    """No answer from an active controller this time; the channel is already looking for one."""


class ControllerChannel:
    def __init__(self, bootstrap: list[tuple[str, int]], client_id: str, rng: random.Random,
                 request_timeout_s: float) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.rng = rng
        self.request_timeout_s = request_timeout_s
        self.failures = 0  # consecutive: drives the backoff
        self.rediscoveries = 0
        self._index = 0
        self._conn: KafkaConnection | None = None
        self._lock = asyncio.Lock()

    @property
    def address(self) -> str:
        host, port = self.bootstrap[self._index]
        return f"{host}:{port}"

    async def call(self, message: Message, version: int, timeout_s: float | None = None) -> Message:
        """The controller's answer; ControllerUnavailable if there was none or it was NOT_CONTROLLER."""
        conn = await self._connected()
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
        was = self.address
        self.failures += 1
        self.rediscoveries += 1
        self._index = (self._index + 1) % len(self.bootstrap)
        if self._conn is not None:
            self._conn.close(reason)
            self._conn = None
        log.info("%s: lost the controller at %s (%s); next try %s", self.client_id, was, reason, self.address)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close("closed by the broker")
            self._conn = None

    async def _connected(self) -> KafkaConnection:
        async with self._lock:
            while self._conn is None or not self._conn.is_open:
                self._conn = None
                if self.failures:
                    delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (self.failures - 1))
                    await asyncio.sleep(delay * self.rng.uniform(0.5, 1.0))
                host, port = self.bootstrap[self._index]
                try:
                    self._conn = await KafkaConnection.open(host, port, self.client_id, CONNECT_TIMEOUT_S)
                except (OSError, asyncio.TimeoutError) as exc:
                    self.rotate(f"cannot connect: {exc.strerror if isinstance(exc, OSError) else 'timed out'}")
            return self._conn
