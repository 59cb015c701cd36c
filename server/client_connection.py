"""One outbound connection to a Kafka node (a broker's to its controller, a voter's to another
voter): pipelined requests, answers matched by correlation id.

A request that is not answered in time closes the connection, as Kafka's network client
does: the answers that follow could no longer be trusted to belong to anyone.
"""

from __future__ import annotations

import asyncio
import socket

from protocol.api_keys import APIS
from protocol.errors import DecodeError
from protocol.framing import FrameReader, FrameTooLarge, begin_frame, end_frame
from protocol.generated.messages.response_header import ResponseHeader
from protocol.headers import encode_request_header
from protocol.message import Message, api_key_of
from protocol.primitives import INT32

MAX_RESPONSE_BYTES = 256 << 20


class ConnectionLost(Exception):
    """The connection closed, failed or timed out before the answer arrived."""


class KafkaConnection(asyncio.Protocol):
    __slots__ = ("client_id", "transport", "reader", "pending", "next_id", "closed_reason")

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.transport: asyncio.Transport | None = None
        self.reader = FrameReader(MAX_RESPONSE_BYTES)
        # correlation id -> (api key, version, future of the decoded answer, timeout handle)
        self.pending: dict[int, tuple[int, int, asyncio.Future[Message], asyncio.TimerHandle]] = {}
        self.next_id = 0
        self.closed_reason: str | None = None

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout: float) -> "KafkaConnection":
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(loop.create_connection(lambda: cls(client_id), host, port), timeout)
        return conn

    @property
    def is_open(self) -> bool:
        return self.closed_reason is None and self.transport is not None

    def request(self, message: Message, version: int, timeout: float) -> asyncio.Future[Message]:
        """Send ``message``; the future resolves to the decoded answer or fails with ConnectionLost."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Message] = loop.create_future()
        transport = self.transport
        if self.closed_reason is not None or transport is None:
            fut.set_exception(ConnectionLost(self.closed_reason or "not connected"))
            return fut
        self.next_id = (self.next_id + 1) & 0x7FFFFFFF
        cid = self.next_id
        key = api_key_of(message)
        out = begin_frame()
        encode_request_header(out, key, version, cid, self.client_id)
        message.encode_into(out, version)
        timer = loop.call_later(timeout, self._timed_out, cid)
        self.pending[cid] = (key, version, fut, timer)
        transport.write(end_frame(out))
        return fut

    def _timed_out(self, cid: int) -> None:
        entry = self.pending.get(cid)
        if entry is not None:
            self.close(f"{APIS[entry[0]].name} request timed out")

    def close(self, reason: str = "closed") -> None:
        if self.closed_reason is None:
            self.closed_reason = reason
        if self.transport is not None:
            self.transport.abort()
        self._fail_pending()

    def _fail_pending(self) -> None:
        pending, self.pending = self.pending, {}
        for _, _, fut, timer in pending.values():
            timer.cancel()
            if not fut.done():
                fut.set_exception(ConnectionLost(self.closed_reason or "connection closed"))

    # --- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport is a Transport, but uvloop's do not subclass
        # asyncio.Transport, so there is no isinstance to narrow it with.
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed_reason is None:
            self.closed_reason = f"connection lost: {exc}" if exc else "the peer closed the connection"
        self._fail_pending()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            self.close(str(exc))
            return
        for frame in frames:
            try:
                self._answer(frame)
            except DecodeError as exc:
                self.close(f"undecodable answer: {exc}")
                return

    def _answer(self, frame: bytes) -> None:
        if len(frame) < INT32.size:
            raise DecodeError("ResponseHeader", None, 0, "frame is shorter than a response header")
        cid = INT32.unpack_from(frame, 0)[0]
        entry = self.pending.pop(cid, None)
        if entry is None:
            raise DecodeError("ResponseHeader", None, 0, f"answer to unknown correlation id {cid}")
        key, version, fut, timer = entry
        timer.cancel()
        api = APIS[key]
        try:
            _, pos = ResponseHeader.decode(frame, api.response_header_version(version))
            response, end = api.response.decode(frame, version, pos)
            if end != len(frame):
                raise DecodeError(api.response.NAME, version, end, f"{len(frame) - end} trailing bytes")
        except DecodeError as exc:
            if not fut.done():
                fut.set_exception(ConnectionLost(f"undecodable answer: {exc}"))
            raise
        if not fut.done():
            fut.set_result(response)
