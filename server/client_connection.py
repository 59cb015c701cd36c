"""One outbound connection to a Kafka node (a broker's to its controller, a voter's to another
voter, a tool's to a controller): pipelined requests, answers matched by correlation id.

A request that is not answered in time closes the connection, as Kafka's network client
does: the answers that follow could no longer be trusted to belong to anyone.

Security is the listener's protocol, as a Kafka client speaks it: TLS from the first byte
(SSL, SASL_SSL), then for SASL a SaslHandshake naming the mechanism and SaslAuthenticate rounds
before anything else is sent. A server that sets a session lifetime (connections.max.reauth.ms)
gets a new connection, authenticated afresh, before the lifetime ends: the old one takes no new
requests once most of it has passed and closes when its last answer is in.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time

from protocol.api_keys import APIS
from protocol.error_codes import Error, describe
from protocol.errors import DecodeError
from protocol.framing import FrameReader, FrameTooLarge, begin_frame, end_frame
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.response_header import ResponseHeader
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.generated.messages.sasl_handshake_response import SaslHandshakeResponse
from protocol.headers import encode_request_header
from protocol.message import Message, api_key_of
from protocol.primitives import INT32
from server.security.client import ClientSecurity
from server.security.errors import AuthenticationFailed

MAX_RESPONSE_BYTES = 256 << 20
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
API_VERSIONS_VERSION = 3
PLAINTEXT = ClientSecurity()
# Re-authenticate (on a new connection) once this share of the server's session lifetime is gone.
REAUTH_SHARE = 0.85


class ConnectionLost(Exception):
    """The connection closed, failed or timed out before the answer arrived."""


class AuthenticationError(ConnectionLost):
    """The server refused the credentials (or the client refused the server's): retrying with
    the same settings will not help."""


class KafkaConnection(asyncio.Protocol):
    __slots__ = ("client_id", "transport", "reader", "pending", "next_id", "closed_reason", "retire_at",
                 "_expiry", "peer_versions")

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.transport: asyncio.Transport | None = None
        self.reader = FrameReader(MAX_RESPONSE_BYTES)
        # correlation id -> (api key, version, future of the decoded answer, timeout handle)
        self.pending: dict[int, tuple[int, int, asyncio.Future[Message], asyncio.TimerHandle]] = {}
        self.next_id = 0
        self.closed_reason: str | None = None
        self.retire_at: float | None = None  # monotonic s: takes no new requests from then on
        self._expiry: asyncio.TimerHandle | None = None
        # The versions the server serves, by API key, once asked (``negotiate_versions``).
        self.peer_versions: dict[int, tuple[int, int]] | None = None

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout: float,
                   security: ClientSecurity = PLAINTEXT) -> "KafkaConnection":
        """Connect (with the TLS handshake), then log in for SASL, each within ``timeout``;
        OSError or asyncio.TimeoutError when the server cannot be reached, ConnectionLost when it
        drops the connection, AuthenticationError when either side refuses the other."""
        loop = asyncio.get_running_loop()
        context = security.ssl_context
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(
                lambda: cls(client_id), host, port, ssl=context,
                server_hostname=host if context is not None else None), timeout)
        except ssl.SSLCertVerificationError as exc:
            raise AuthenticationError(f"TLS: the server's certificate is not trusted: {exc.verify_message}") from None
        except ssl.SSLError as exc:
            raise AuthenticationError(f"TLS handshake failed: {exc.reason or exc}") from None
        if security.uses_sasl:
            try:
                await asyncio.wait_for(conn._authenticate(security, timeout), timeout)
            except BaseException:
                conn.close("SASL authentication did not complete")
                raise
        return conn

    async def _authenticate(self, security: ClientSecurity, timeout: float) -> None:
        handshake = await self.request(SaslHandshakeRequest(mechanism=security.sasl_mechanism),
                                       SASL_HANDSHAKE_VERSION, timeout)
        assert isinstance(handshake, SaslHandshakeResponse)
        if handshake.error_code:
            raise AuthenticationError(f"SASL mechanism {security.sasl_mechanism} refused "
                                      f"({describe(handshake.error_code)}); the server offers "
                                      f"{', '.join(handshake.mechanisms) or 'none'}")
        mechanism = security.mechanism()
        token: bytes | None = mechanism.first()
        lifetime_ms = 0
        while token is not None:
            answer = await self.request(SaslAuthenticateRequest(auth_bytes=token), SASL_AUTHENTICATE_VERSION, timeout)
            assert isinstance(answer, SaslAuthenticateResponse)
            lifetime_ms = answer.session_lifetime_ms
            if answer.error_code:
                raise AuthenticationError(f"SASL authentication as {security.sasl_username!r} failed: "
                                          f"{answer.error_message or describe(answer.error_code)}")
            try:
                token = mechanism.respond(answer.auth_bytes)
            except AuthenticationFailed as exc:
                raise AuthenticationError(f"SASL authentication failed: {exc}") from None
        if lifetime_ms > 0:
            lifetime_s = lifetime_ms / 1000
            self.retire_at = time.monotonic() + lifetime_s * REAUTH_SHARE
            self._expiry = asyncio.get_running_loop().call_later(lifetime_s, self.close, "SASL session expired")

    async def negotiate_versions(self, timeout: float) -> None:
        """Ask the server which versions of each API it serves, as Kafka's network client does
        on every new connection, so that each request goes at the highest version both sides
        know (a Kafka 3.9 voter serves Vote up to v1, a 4.x one up to v2)."""
        answer = await self.request(ApiVersionsRequest(client_software_name="kraftwire",
                                                       client_software_version="1"), API_VERSIONS_VERSION, timeout)
        assert isinstance(answer, ApiVersionsResponse)
        if answer.error_code == Error.NONE:
            self.peer_versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}

    def version_for(self, key: int) -> int | None:
        """The highest version of API ``key`` that both sides serve (this side's highest before
        the server was asked); None if the server serves none that this side does."""
        api = APIS[key]
        if self.peer_versions is None:
            return api.max_version
        served = self.peer_versions.get(key)
        if served is None:
            return None
        high, low = min(api.max_version, served[1]), max(api.min_version, served[0])
        return high if high >= low else None

    @property
    def is_open(self) -> bool:
        """Open and taking new requests."""
        if self.closed_reason is not None or self.transport is None:
            return False
        if self.retire_at is not None and time.monotonic() >= self.retire_at:
            if not self.pending:
                self.close("retired before its SASL session expires")
            return False
        return True

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
        if self._expiry is not None:
            self._expiry.cancel()
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
        if self._expiry is not None:
            self._expiry.cancel()
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
        if self.retire_at is not None and not self.pending and time.monotonic() >= self.retire_at:
            self.close("retired before its SASL session expires")
