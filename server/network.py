"""The listener: bytes and sockets only.

Each connection splits its byte stream into frames, hands every frame to the router and
writes the responses back in request order, even when a later request is answered first
(a heartbeat that needs no commit overtaking a registration that waits for fsync). Anything
malformed closes that one connection with one log line; other clients never notice.

A TLS listener authenticates clients by certificate; a SASL listener gives each connection a
SASL session that the router drives. Connections idle for ``connections.max.idle.ms`` are
closed, and the bytes received but not yet handled, over all connections, are bounded by
``queued.max.request.bytes``: past it, a connection in the middle of a request is not read
from until bytes are released, while whole requests are still handled (they release theirs).
"""

from __future__ import annotations

import asyncio
import logging
import select
import socket
import ssl
import time
from collections import deque
from typing import Callable, Protocol

from protocol.errors import DecodeError
from protocol.framing import FrameReader, FrameTooLarge
from server.context import ANONYMOUS, Principal, RequestContext
from server.security.sasl import SaslSession
from server.security.settings import SecurityConfig
from server.security.tls import distinguished_name, map_principal_name, server_context

log = logging.getLogger("kraftwire.network")

# Requests of one connection handled in one turn of the event loop before other connections get
# theirs: enough to keep a pipelining broker's throughput, few enough to keep everyone's latency.
FRAMES_PER_TURN = 64


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


class Connection(asyncio.Protocol):
    __slots__ = ("dispatch", "reader", "transport", "peer", "context", "_queue", "_closed", "on_close", "capture",
                 "_backlog", "_write_paused", "_read_paused", "_turn_pending", "sasl", "last_active",
                 "buffered", "listener", "max_frame", "_shared")

    def __init__(self, dispatch: Dispatch, max_frame: int, on_close: Callable[["Connection"], None],
                 listener: "Listener | None" = None) -> None:
        self.dispatch = dispatch
        self.reader = FrameReader(max_frame)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # Who the client is, for every request it sends; authentication will set the principal.
        self.context = RequestContext(ANONYMOUS, "?")
        self._queue: deque[bytes | Pending] = deque()
        self._closed = False
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
        self.buffered = 0  # bytes received and not yet handled: a partial frame and the backlog
        self.max_frame = max_frame
        # Whether this connection's buffered bytes count against the listener's shared bound
        # (queued.max.request.bytes): only once its client is known, so that nobody who never
        # logs in can starve those who did.
        self._shared = True
        if listener is not None and listener.security.uses_sasl:
            self._shared = False
            self.reader.limit = min(max_frame, listener.security.sasl_max_receive_size)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream listener always passes a Transport; asyncio.Protocol declares the base class.
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if peer:
            self.context = RequestContext(self._certificate_principal(transport), peer[0])
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.capture is not None:
            self.capture.connected(peer, transport.get_extra_info("sockname"))


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
        """SASL authentication succeeded: later requests are the user's, may be as large as
        any client's, and share the listener's bound on buffered bytes."""
        self.context = RequestContext(principal, self.context.client_address)
        self.reader.limit = self.max_frame
        if not self._shared:
            self._shared = True
            if self.listener is not None:
                self.listener.buffered += self.buffered

    @property
    def paused(self) -> bool:
        """Not read from because of back-pressure: its own backlog or unsent answers, or the
        listener's bound on buffered bytes."""
        return self._read_paused

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed and self.reader.pending:
            # The peer went away in the middle of a frame: a malformed stream like any other.
            log.warning("connection from %s closed in the middle of a frame (%d bytes discarded)",
                        self.peer, self.reader.pending)
        self._closed = True
        self._queue.clear()
        self._backlog.clear()
        self._account(-self.buffered)
        if self.capture is not None:
            self.capture.close()
        self.on_close(self)

    def data_received(self, data: bytes) -> None:
        if self.capture is not None:
            self.capture.client_to_server(data)
        self.last_active = time.monotonic()
        self._account(len(data))
        try:
            frames = self.reader.feed(data)
        except FrameTooLarge as exc:
            self.reject(str(exc))
            return
        if self.listener is not None and self._shared and self.reader.pending and self.listener.over_limit():
            # A request still arriving while the total is over the bound: this connection
            # waits, the others (whose requests are whole) go on.
            self.listener.waiting.add(self)
            self._set_reading(False)
        if frames:
            self._backlog.extend(frames)
            self._handle_frames()

    def _account(self, change: int) -> None:
        self.buffered += change
        if self.listener is not None and self._shared:
            self.listener.buffered += change
            if change < 0:
                self.listener.release()

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
            self._account(-4 - len(frame))
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
        waiting = self.listener is not None and self in self.listener.waiting
        self._set_reading(not backlog and not self._write_paused and not waiting)

    def resume_if_idle(self) -> None:
        """Read again once the total of buffered bytes dropped below the bound."""
        if not self._closed and not self._backlog and not self._write_paused:
            self._set_reading(True)

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

    def abort(self, reason: str) -> None:
        """Drop this connection at once: it may not send another byte (failed authentication)."""
        if not self._closed:
            log.warning("closing connection from %s: %s", self.peer, reason)
            self._closed = True
            self._queue.clear()
            self._backlog.clear()
            if self.transport is not None:
                self.transport.close()


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
        self.buffered = 0  # bytes received and not yet handled, over all connections
        self.waiting: set[Connection] = set()  # not read from until the total drops
        self._idle_timer: asyncio.TimerHandle | None = None

    def _new_connection(self) -> Connection:
        conn = Connection(self.dispatch, self.max_frame, self._closed, self)
        self.connections.add(conn)
        if self.capture_factory is not None:
            conn.capture = self.capture_factory()
        if self.security.uses_sasl:
            if self.sasl_factory is None:
                raise ValueError("a SASL listener needs the SASL sessions' factory")
            conn.sasl = self.sasl_factory()
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self.waiting.discard(conn)

    def over_limit(self) -> bool:
        limit = self.security.queued_max_request_bytes
        return limit > 0 and self.buffered > limit

    def release(self) -> None:
        if self.waiting and not self.over_limit():
            waiting, self.waiting = self.waiting, set()
            for conn in waiting:
                conn.resume_if_idle()

    async def start(self, host: str, port: int, sock: socket.socket | None = None) -> tuple[str, int]:
        """Serve on ``sock`` (bound already, by ``bind``) or on a new socket for host:port."""
        loop = asyncio.get_running_loop()
        context: ssl.SSLContext | None = server_context(self.security.tls) if self.security.uses_tls else None
        if sock is not None:
            self.server = await loop.create_server(self._new_connection, sock=sock, backlog=4096, ssl=context)
        else:
            self.server = await loop.create_server(self._new_connection, host or None, port,
                                                   reuse_address=True, backlog=4096, ssl=context)
        self._schedule_idle_check()
        return self.server.sockets[0].getsockname()[:2]

    def _schedule_idle_check(self) -> None:
        idle_ms = self.security.connections_max_idle_ms
        if idle_ms > 0:
            interval = max(0.05, min(idle_ms / 4000, 30.0))
            self._idle_timer = asyncio.get_running_loop().call_later(interval, self._close_idle)

    def _close_idle(self) -> None:
        """Close connections silent for connections.max.idle.ms. One paused for back-pressure
        is waiting on the server, not idle, and stays (unless its peer has gone, which a paused
        transport never reports since it reads nothing); only the one holding most of the
        shared bound is closed once idle, or nobody could ever be read from again."""
        cutoff = time.monotonic() - self.security.connections_max_idle_ms / 1000
        hoarder = max(self.waiting, key=lambda c: c.buffered) if self.waiting and self.over_limit() else None
        for conn in [c for c in self.connections if c.last_active < cutoff]:
            if conn.paused and conn is not hoarder:
                if peer_closed(conn.transport):
                    conn.reject("the peer closed the connection while it was paused")
                continue
            conn.reject(f"idle for longer than connections.max.idle.ms={self.security.connections_max_idle_ms}")
        self._schedule_idle_check()

    async def stop(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self.server is not None:
            self.server.close()
            for conn in list(self.connections):
                conn.close()
            await self.server.wait_closed()


def peer_closed(transport: asyncio.BaseTransport | None) -> bool:
    """Whether the peer has hung up, asked of the socket without reading from it."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return transport is None or transport.is_closing()
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLRDHUP)
    return any(events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))


def bind(host: str, port: int) -> socket.socket:
    """The listening socket for host:port, bound now: the process takes its port before it
    writes anything, so a port in use fails start-up with nothing formatted or changed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=4096)
