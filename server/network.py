"""The listener: bytes and sockets only.

Each connection splits its byte stream into frames, hands every frame to the router and
writes the responses back in request order, even when a later request is answered first
(a heartbeat that needs no commit overtaking a registration that waits for fsync). Anything
malformed closes that one connection with one log line; other clients never notice.

A TLS listener authenticates clients by certificate; a SASL listener gives each connection a
SASL session that the router drives. Failed authentications (a TLS handshake, a SASL login)
are logged as Kafka logs them, but at most once per client address per FAILURE_LOG_WINDOW_S,
with the count of those not logged.

Bytes are bounded before they are read. A frame's size prefix is judged as soon as it arrives:
before SASL authentication a frame may not exceed ``sasl.server.max.receive.size``, as in
Kafka's SaslServerAuthenticator, and after it ``socket.request.max.bytes``; a larger one
closes the connection before its body is read. Only connections that have authenticated (or
need not) draw on ``queued.max.request.bytes``: a frame that does not arrive whole in one read
reserves its size from that budget before its body is read into a buffer allocated once, and
its connection is not read from while the budget is spent. As with Kafka's memory pool, one
frame may overdraw the budget, so a frame larger than the budget is still served. A connection
held back that way is not idle: ``connections.max.idle.ms`` counts only the time in which the
client could have sent something, and its peer's close is looked for meanwhile.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import logging
import select
import socket
import ssl
import struct
import time
from collections import deque
from typing import Callable, Protocol

from protocol.errors import DecodeError
from server.context import ANONYMOUS, Principal, RequestContext
from server.security.sasl import SaslSession
from server.security.settings import SecurityConfig
from server.security.tls import distinguished_name, map_principal_name, server_context

log = logging.getLogger("kraftwire.network")

# Requests of one connection handled in one turn of the event loop before other connections get
# theirs: enough to keep a pipelining broker's throughput, few enough to keep everyone's latency.
FRAMES_PER_TURN = 64
# How often connections held back for the shared budget are checked for a peer that went away:
# while a connection is not read from, the event loop cannot see its close.
PEER_CHECK_S = 1.0
# At most one line per client address in this window for failed authentications.
FAILURE_LOG_WINDOW_S = 60.0
# Addresses whose failures are tracked one by one; past it, one count covers the others.
FAILURE_LOG_ADDRESSES = 10_000
_SIZE = struct.Struct(">i")
# Linux reports a peer's half-close with POLLRDHUP even while unread bytes remain.
_PEER_GONE = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)


class RequestRejected(Exception):
    """A request the server will not answer (unknown API key, unsupported version)."""


class Pending(Protocol):
    """A response still being produced: an asyncio future of the encoded frame."""

    def done(self) -> bool: ...
    def result(self) -> bytes: ...
    def add_done_callback(self, fn: Callable) -> None: ...


# The router turns one request frame into the encoded response frame, a future of it, or
# None for requests that get no response.
Dispatch = Callable[["Connection", bytes], "bytes | Pending | None"]


class FailureLog:
    """Which failed authentications get a log line: the first from a client address, then none
    from that address until FAILURE_LOG_WINDOW_S has passed. The next line from the address
    tells how many were not logged; when the address goes quiet, ``expired`` gives a line of
    their count. A client retrying a wrong password in a loop writes one line a window, not
    one a retry. Time is passed in."""

    def __init__(self, window_s: float = FAILURE_LOG_WINDOW_S, max_addresses: int = FAILURE_LOG_ADDRESSES) -> None:
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._windows: dict[str, list[float]] = {}  # address -> [when its last line was logged, failures since]
        self.others = 0  # failures from addresses past max_addresses, not logged

    def failed(self, address: str, detail: str, now: float) -> str | None:
        """The line to log for this failure, or None when it is only counted."""
        window = self._windows.get(address)
        if window is not None and now - window[0] < self.window_s:
            window[1] += 1
            return None
        if window is None and len(self._windows) >= self.max_addresses:
            self.others += 1
            return None
        line = f"Failed authentication with /{address} ({detail})"
        if window is not None and window[1]:
            line += f"; {window[1]:.0f} more failed authentications from /{address} were not logged"
        self._windows[address] = [now, 0]
        return line

    def expired(self, now: float) -> list[str]:
        """Lines for the failures not logged from addresses quiet for a whole window since;
        those addresses are forgotten."""
        lines = []
        for address, (logged_at, unlogged) in list(self._windows.items()):
            if now - logged_at >= 2 * self.window_s or (not unlogged and now - logged_at >= self.window_s):
                del self._windows[address]
                if unlogged:
                    lines.append(f"{unlogged:.0f} more failed authentications from /{address} were not logged")
        if self.others:
            lines.append(f"{self.others} failed authentications from other addresses were not logged")
            self.others = 0
        return lines


class Connection(asyncio.Protocol):
    __slots__ = ("dispatch", "transport", "peer", "context", "_queue", "_closed", "on_close", "capture",
                 "_backlog", "_write_paused", "_read_paused", "_turn_pending", "sasl", "last_active",
                 "listener", "max_frame", "_head", "_body", "_filled", "_held", "charged", "charge", "_gone")

    def __init__(self, dispatch: Dispatch, max_frame: int, on_close: Callable[["Connection"], None],
                 listener: "Listener | None" = None) -> None:
        self.dispatch = dispatch
        self.max_frame = max_frame
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # Who the client is, for every request it sends; authentication will set the principal.
        self.context = RequestContext(ANONYMOUS, "?")
        self._queue: deque[bytes | Pending] = deque()
        self._closed = False
        self._gone = False  # connection_lost has run
        # Whole frames received but not yet handled: at most FRAMES_PER_TURN are handled before
        # the event loop turns to other connections.
        self._backlog: deque[bytes] = deque()
        self._write_paused = False  # the transport's buffer of unsent answers is over its limit
        self._read_paused = False
        self._turn_pending = False
        self.on_close = on_close
        self.capture = None  # set by the server when traffic is being captured
        self.listener = listener
        self.sasl: SaslSession | None = None  # on a SASL listener, set by the listener
        self.last_active = time.monotonic()
        self._head = b""  # the first bytes of a size prefix that arrived split
        # The frame being received, allocated whole from its size prefix, and how much is in.
        self._body: bytearray | None = None
        self._filled = 0
        # A frame waiting for the shared budget: its size and what arrived after its prefix.
        self._held: tuple[int, bytes] | None = None
        # Whether this connection draws on queued.max.request.bytes: once it has authenticated,
        # at once where nobody authenticates with SASL.
        self.charged = True
        self.charge = 0  # what it holds of that budget: frames received and not yet handled

    def met(self, transport: asyncio.BaseTransport) -> tuple | None:
        """Who is at the other end (known before a TLS handshake, for its failure's log line)."""
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
            self.context = RequestContext(ANONYMOUS, peer[0])
        return peer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream listener always passes a Transport; asyncio.Protocol declares the base class.
        self.transport = transport  # type: ignore[assignment]
        peer = self.met(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.capture is not None:
            self.capture.connected(peer, transport.get_extra_info("sockname"))
        self.context = RequestContext(self._certificate_principal(transport), self.context.client_address)

    def handshake_failed(self, exc: BaseException) -> None:
        """The TLS handshake failed: logged as a failed authentication, unless the peer only
        went away (a port probe), and forgotten."""
        if isinstance(exc, ssl.SSLError):
            self.authentication_failed(f"SSL handshake failed: {exc.reason or exc}")
        elif isinstance(exc, ConnectionAbortedError):  # no handshake within its timeout
            self.authentication_failed(f"SSL handshake failed: {exc}")
        else:
            log.debug("connection from %s closed during the TLS handshake: %r", self.peer, exc)
        self.connection_lost(None)

    def _certificate_principal(self, transport: asyncio.BaseTransport) -> Principal:
        """User:<mapped subject> for a client that presented a certificate, else ANONYMOUS (on a
        SASL listener the principal comes from SASL instead)."""
        ssl_object = transport.get_extra_info("ssl_object")
        listener = self.listener
        if ssl_object is None or listener is None or listener.security.uses_sasl:
            return ANONYMOUS
        certificate = ssl_object.getpeercert()
        if not certificate:
            return ANONYMOUS
        rules = list(listener.security.principal_rules)
        return Principal("User", map_principal_name(distinguished_name(certificate), rules))

    def authenticated(self, principal: Principal) -> None:
        """SASL authentication succeeded: later requests are the user's, and its bytes count
        against the shared budget from now on."""
        self.context = RequestContext(principal, self.context.client_address)
        if not self.charged:
            self.charged = True
            self._charge(sum(4 + len(frame) for frame in self._backlog))

    def authentication_failed(self, detail: str) -> None:
        """Close this connection after a failed authentication, logged as the listener's
        FailureLog allows."""
        line = (self.listener.failures.failed(self.context.client_address, detail, time.monotonic())
                if self.listener is not None else f"Failed authentication with /{self.peer} ({detail})")
        if line is not None:
            log.info("%s", line)
        self._closed = True
        self._queue.clear()
        self._backlog.clear()
        if self.transport is not None:
            self.transport.close()

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        if self._body is not None:
            return 4 + self._filled
        if self._held is not None:
            return 4 + len(self._held[1])
        return len(self._head)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._gone:
            return
        self._gone = True
        if not self._closed and self.pending:
            # The peer went away in the middle of a frame: a malformed stream like any other.
            log.warning("connection from %s closed in the middle of a frame (%d bytes discarded)",
                        self.peer, self.pending)
        self._closed = True
        self._queue.clear()
        self._backlog.clear()
        self._body = None
        self._held = None
        self._charge(-self.charge)
        if self.capture is not None:
            self.capture.close()
        self.on_close(self)

    def data_received(self, data: bytes) -> None:
        if self.capture is not None:
            self.capture.client_to_server(data)
        if self._closed:
            return
        self.last_active = time.monotonic()
        if self._held is not None:
            # Read before the pause took effect: kept with the frame that waits.
            size, part = self._held
            self._held = (size, part + data)
            return
        self._receive(data)

    def _limit(self) -> tuple[int, str]:
        """The largest frame this connection may send now, and the setting that says so."""
        listener = self.listener
        if listener is not None and self.sasl is not None and self.sasl.username is None:
            return listener.security.sasl_server_max_receive_size, "sasl.server.max.receive.size"
        return self.max_frame, "socket.request.max.bytes"

    def _receive(self, data: bytes) -> None:
        """Split ``data`` into frames. A frame that arrives whole is sliced out of it; one that
        does not is copied, part by part, into a buffer allocated once from its size prefix,
        after its size was allowed and, for a connection that draws on the shared budget,
        reserved from it."""
        frames: list[bytes] = []
        pos = 0
        n = len(data)
        while pos < n:
            body = self._body
            if body is not None:
                take = min(n - pos, len(body) - self._filled)
                memoryview(body)[self._filled:self._filled + take] = memoryview(data)[pos:pos + take]
                self._filled += take
                pos += take
                if self._filled == len(body):
                    frames.append(bytes(body))
                    self._body = None
                continue
            if self._head or n - pos < 4:
                need = 4 - len(self._head)
                self._head += data[pos:pos + need]
                pos += need
                if len(self._head) < 4:
                    break
                (size,) = _SIZE.unpack(self._head)
                self._head = b""
            else:
                (size,) = _SIZE.unpack_from(data, pos)
                pos += 4
            limit, setting = self._limit()
            if size < 0 or (limit >= 0 and size > limit):
                self._refuse_size(size, limit, setting)
                return
            if pos + size <= n:
                frames.append(data[pos:pos + size])
                if self.charged:
                    self._charge(4 + size)
                pos += size
                continue
            if self.charged and not self._reserve(size):
                self._held = (size, data[pos:])
                break
            self._body = bytearray(size)
            self._filled = 0
        if frames:
            self._backlog.extend(frames)
            self._handle_frames()

    def _refuse_size(self, size: int, limit: int, setting: str) -> None:
        reason = (f"frame of {size} bytes exceeds {setting}={limit}" if size >= 0
                  else f"invalid frame size {size}")
        if setting == "sasl.server.max.receive.size":
            # Kafka fails the authentication here: the client never said who it is.
            self.authentication_failed(f"invalid receive size before authentication: {reason}")
        else:
            self.reject(reason)

    def _reserve(self, size: int) -> bool:
        """Take a frame's size (and prefix) from the shared budget, or wait for it."""
        listener = self.listener
        if listener is not None and not listener.grant(self):
            self._set_reading(False)
            return False
        self._charge(4 + size)
        return True

    def granted(self) -> None:
        """The shared budget has room for the frame that waited: it is received now."""
        held = self._held
        if held is None or self._closed:
            return
        size, part = held
        self._held = None
        self._charge(4 + size)
        self.last_active = time.monotonic()  # the wait was the server's, not the client's
        self._body = bytearray(size)
        self._filled = 0
        if part:
            self._receive(part)
        self.resume_if_idle()

    def _charge(self, change: int) -> None:
        if not change:
            return
        self.charge += change
        listener = self.listener
        if listener is not None:
            listener.used += change
            if change < 0:
                listener.release()

    def _handle_frames(self) -> None:
        """Handle up to FRAMES_PER_TURN frames of the backlog, in order.

        A client that pipelines thousands of requests would otherwise hold the event loop for
        all of them (one read can bring megabytes) while every other client waits. While a
        backlog remains, or while unsent answers pile up because the client does not read them,
        this connection is not read from, so one client's requests never buffer without limit.
        """
        self._turn_pending = False
        backlog = self._backlog
        queue = self._queue
        out: list[bytes] = []  # answers ready in this turn, written with one call
        budget = FRAMES_PER_TURN
        while backlog and budget and not self._closed and not self._write_paused:
            budget -= 1
            frame = backlog.popleft()
            if self.charged:
                self._charge(-4 - len(frame))
            try:
                result = self.dispatch(self, frame)
            except (DecodeError, RequestRejected) as exc:
                self._write(out)
                self.reject(str(exc))
                return
            except Exception as exc:  # a handler bug must not take the server down
                self._write(out)
                log.exception("closing %s: request handler failed", self.peer)
                self.reject(f"handler failed: {exc!r}")
                return
            if result is None:
                continue
            if not queue and type(result) is bytes:
                out.append(result)
            else:
                queue.append(result)
                if not isinstance(result, bytes):
                    result.add_done_callback(self._drain)
        self._write(out)
        if queue:
            self._drain()
        if self._closed:
            return
        if backlog and not self._write_paused and not self._turn_pending:
            self._turn_pending = True
            asyncio.get_running_loop().call_soon(self._handle_frames)
        self._set_reading(not backlog and not self._write_paused and self._held is None)

    def resume_if_idle(self) -> None:
        """Read again once nothing holds this connection back."""
        if not self._closed and not self._backlog and not self._write_paused and self._held is None:
            self._set_reading(True)

    @property
    def held(self) -> bool:
        """Whether a frame of this connection waits for the shared budget."""
        return self._held is not None

    def _set_reading(self, reading: bool) -> None:
        if reading == self._read_paused and self.transport is not None:
            self._read_paused = not reading
            if reading:
                self.transport.resume_reading()
            else:
                self.transport.pause_reading()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._set_reading(False)

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self._closed:
            self._handle_frames()

    def _drain(self, _: object = None) -> None:
        queue = self._queue
        out: list[bytes] = []
        while queue and not self._closed:
            head = queue[0]
            if not isinstance(head, bytes):
                if not head.done():
                    break
                try:
                    head = head.result()
                except Exception as exc:  # a handler bug must not take the server down
                    self._write(out)
                    log.exception("closing %s: request handler failed", self.peer)
                    self.reject(f"handler failed: {exc}")
                    return
            queue.popleft()
            out.append(head)
        self._write(out)

    def _write(self, frames: list[bytes]) -> None:
        """Send answers in order with one write: a system call per answer would cost more than
        producing most answers."""
        transport = self.transport
        if not frames or transport is None or transport.is_closing():
            return  # nothing to send, or the peer went away and connection_lost is on its way
        if self.capture is not None:
            for frame in frames:
                self.capture.server_to_client(frame)
        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))

    def reject(self, reason: str) -> None:
        """Close this connection after one log line."""
        if not self._closed:
            log.warning("closing connection from %s: %s", self.peer, reason)
            self.close()

    def close(self) -> None:
        """Close this connection quietly (the server is stopping)."""
        self._closed = True
        self._queue.clear()
        self._backlog.clear()
        if self.transport is not None:
            self.transport.close()

    def peer_gone(self) -> bool:
        """Whether the peer closed its end, seen without reading (this connection is not read
        from while it waits for the budget)."""
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None:
            return False
        poller = select.poll()
        poller.register(sock.fileno(), _PEER_GONE)
        return bool(poller.poll(0))


class _TlsLayer(asyncio.sslproto.SSLProtocol):
    """asyncio's TLS layer in front of a connection, telling it when the handshake fails: the
    event loop's own layer drops that failure without a word."""

    def __init__(self, conn: Connection, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        handshake: asyncio.Future[None] = loop.create_future()
        super().__init__(loop, conn, context, handshake, server_side=True)
        self.conn = conn
        handshake.add_done_callback(self._handshake_done)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn.met(transport)
        super().connection_made(transport)

    def _handshake_done(self, handshake: asyncio.Future[None]) -> None:
        if not handshake.cancelled() and handshake.exception() is not None:
            self.conn.handshake_failed(handshake.exception())  # type: ignore[arg-type]


class Listener:
    """Accepts connections on one endpoint and tracks them for shutdown."""

    def __init__(self, dispatch: Dispatch, max_frame: int, capture_factory: Callable | None = None,
                 security: SecurityConfig | None = None,
                 sasl_factory: Callable[[], SaslSession] | None = None) -> None:
        self.dispatch = dispatch
        self.max_frame = max_frame
        self.connections: set[Connection] = set()
        self.server: asyncio.base_events.Server | None = None
        self.capture_factory = capture_factory
        self.security = security or SecurityConfig()
        self.sasl_factory = sasl_factory
        self.tls_context: ssl.SSLContext | None = None
        self.used = 0  # bytes of queued.max.request.bytes held by connections
        self.waiting: deque[Connection] = deque()  # frames waiting for the budget, first come first
        self.failures = FailureLog()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._peer_timer: asyncio.TimerHandle | None = None

    def _new_connection(self) -> asyncio.BaseProtocol:
        conn = Connection(self.dispatch, self.max_frame, self._closed, self)
        self.connections.add(conn)
        if self.capture_factory is not None:
            conn.capture = self.capture_factory()
        if self.security.uses_sasl:
            if self.sasl_factory is None:
                raise ValueError("a SASL listener needs the SASL sessions' factory")
            conn.sasl = self.sasl_factory()
            # Bytes from a client that has not said who it is never hold the shared budget.
            conn.charged = False
        if self.tls_context is not None:
            return _TlsLayer(conn, self.tls_context)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if conn in self.waiting:
            self.waiting.remove(conn)
            self.release()

    def grant(self, conn: Connection) -> bool:
        """Whether a frame may be received now; if not, ``conn`` waits its turn. As Kafka's
        memory pool does, a frame is allowed while any of the budget is left, so the last one
        may overdraw it."""
        limit = self.security.queued_max_request_bytes
        if limit <= 0 or (self.used < limit and not self.waiting):
            return True
        self.waiting.append(conn)
        self._watch_peers()
        return False

    def release(self) -> None:
        limit = self.security.queued_max_request_bytes
        while self.waiting and self.used < limit:
            self.waiting.popleft().granted()

    def _watch_peers(self) -> None:
        if self._peer_timer is None:
            self._peer_timer = asyncio.get_running_loop().call_later(PEER_CHECK_S, self._check_peers)

    def _check_peers(self) -> None:
        """Close the waiting connections whose peer went away, so that they give back their
        share of the budget."""
        self._peer_timer = None
        for conn in [c for c in self.waiting if c.peer_gone()]:
            conn.close()
        if self.waiting:
            self._watch_peers()

    async def start(self, host: str, port: int, sock: socket.socket | None = None) -> tuple[str, int]:
        """Serve on ``sock`` (bound already, by ``bind``) or on a new socket for host:port."""
        loop = asyncio.get_running_loop()
        if self.security.uses_tls:
            self.tls_context = server_context(self.security.tls)
        if sock is not None:
            self.server = await loop.create_server(self._new_connection, sock=sock, backlog=4096)
        else:
            self.server = await loop.create_server(self._new_connection, host or None, port,
                                                   reuse_address=True, backlog=4096)
        self._schedule_idle_check()
        return self.server.sockets[0].getsockname()[:2]

    def _schedule_idle_check(self) -> None:
        idle_ms = self.security.connections_max_idle_ms
        interval = max(0.05, min(idle_ms / 4000, 30.0)) if idle_ms > 0 else 30.0
        self._idle_timer = asyncio.get_running_loop().call_later(interval, self._close_idle)

    def _close_idle(self) -> None:
        now = time.monotonic()
        for line in self.failures.expired(now):
            log.info("%s", line)
        idle_ms = self.security.connections_max_idle_ms
        if idle_ms > 0:
            cutoff = now - idle_ms / 1000
            # A connection waiting for the budget is held by the server: not idle. One still in
            # its TLS handshake (no transport yet) is bounded by the handshake's own timeout.
            for conn in [c for c in self.connections
                         if c.last_active < cutoff and not c.held and c.transport is not None]:
                conn.reject(f"idle for longer than connections.max.idle.ms={idle_ms}")
        self._schedule_idle_check()

    async def stop(self) -> None:
        for timer in (self._idle_timer, self._peer_timer):
            if timer is not None:
                timer.cancel()
        if self.server is not None:
            self.server.close()
            for conn in list(self.connections):
                conn.close()
            await self.server.wait_closed()


def bind(host: str, port: int) -> socket.socket:
    """The listening socket for host:port, bound now: the process takes its port before it
    writes anything, so a port in use fails start-up with nothing formatted or changed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=4096)
