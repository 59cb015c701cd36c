"""TCP stream events -> Kafka flows: which connections carry Kafka, who is the client, and
the frames of each direction.

A connection is Kafka when one of its ports is in `ports`, or, without ports, from the first
frame of its client's bytes that reads as a Kafka request (`request_reads`), and stays Kafka:
a misbehaving client's garbage before or after that frame is its fault to report, not proof
that the flow is something else. Frames are cut as the framer cuts them: from offset 0 of a
stream seen from its SYN, else from the first boundary it can prove. The client is the side
that sent the SYN, else the side talking to one of `ports`, else the side whose bytes parse as
requests. Until that is decided a connection's events are held back, up to `PROBE_LIMIT` bytes.
"""
from __future__ import annotations

import struct
from typing import Iterable, Iterator, NamedTuple

from protocol.api_keys import APIS
from protocol.errors import DecodeError
from protocol.generated.messages.request_header import RequestHeader
from tools.replay.framing import REQUEST, RESPONSE, Frame, Framer
from tools.replay.packet import format_endpoint
from tools.replay.problems import Problem
from tools.replay.rules import Violation, problem_violation, violation
from tools.replay.streams import Source, stream_events
from tools.replay.tcp import FlowKey, StreamData, StreamEnd, StreamEvent, StreamGap, StreamStart

# Bytes of a connection held back while deciding whether it carries Kafka.
PROBE_LIMIT = 64 * 1024
_KEY_VERSION = struct.Struct(">hh")
_MAX_API_KEY = 1000
_MAX_API_VERSION = 100


class FlowStart(NamedTuple):
    flow: str
    client: str
    server: str
    timestamp_ns: int


class FlowFrame(NamedTuple):
    flow: str
    direction: str  # framing.REQUEST or framing.RESPONSE
    timestamp_ns: int
    data: bytes  # the frame without its size prefix


class FlowEnd(NamedTuple):
    flow: str
    client: str
    server: str
    kafka: bool
    start_ns: int
    end_ns: int
    bytes_to_server: int
    bytes_to_client: int
    gap_bytes: int
    reason: str  # how the connection ended: fin, rst, reused, eof


FlowItem = FlowStart | FlowFrame | FlowEnd | Violation


def request_reads(frame: bytes) -> bool | None:
    """Whether a frame (without its size prefix) is a Kafka request: True when its header and
    body read to the last byte, False when they do not, None when its header reads but names an
    API or version the codecs leave out (JoinGroup, OffsetCommit, ...), whose body cannot be judged."""
    if len(frame) < _KEY_VERSION.size:
        return False
    api_key, version = _KEY_VERSION.unpack_from(frame)
    if not (0 <= api_key <= _MAX_API_KEY and 0 <= version <= _MAX_API_VERSION):
        return False
    api = APIS.get(api_key)
    known = api if api is not None and api.min_version <= version <= api.max_version else None
    try:
        header, pos = RequestHeader.decode(frame, known.request_header_version(version) if known else 1)
        if known:
            pos = known.request.decode(frame, version, pos)[1]
    except DecodeError:
        return False
    if header.correlation_id < 0:
        return False
    return pos == len(frame) if known else None


def request_parses(frame: bytes) -> bool:
    """Whether a frame reads whole as a request: what proves a frame boundary. A header alone
    does not: runs of zeros inside a body read as a Produce v0 header."""
    return request_reads(frame) is True


def kafka_flows(source: Source, capture: str, ports: Iterable[int] | None = None) -> Iterator[FlowItem]:
    """Frames of every Kafka connection of a capture, with its layers' violations."""
    return route(stream_events(source), capture, ports)


def route(events: Iterable[StreamEvent | Problem], capture: str, ports: Iterable[int] | None = None
          ) -> Iterator[FlowItem]:
    """Frames of the Kafka connections in some stream events (all of a capture's, or those of
    the connections of one share of it), with the violations of the events' problems."""
    router = _Router(capture, frozenset(ports or ()))
    for event in events:
        if isinstance(event, Problem):
            yield problem_violation(capture, event.kind, event.offset, event.detail)
        else:
            yield from router.event(event)
    yield from router.finish()


class _Probe:
    """Decides whether one direction's bytes are a client's Kafka requests: they are once a
    frame the framer cut reads as one, or as far as it can be read (`request_reads`)."""

    def __init__(self, synced: bool) -> None:
        self.framer = Framer(REQUEST, synced=synced, proves=request_parses)

    def data(self, ts: int, data: bytes) -> bool:
        return self._judge(self.framer.feed(ts, data))

    def gap(self, ts: int, size: int) -> bool:
        return self._judge(self.framer.gap(ts, size))

    def end(self) -> bool:
        return self._judge(self.framer.finish())

    @staticmethod
    def _judge(out: list[Frame | Problem]) -> bool:
        return any(type(item) is Frame and request_reads(item.data) is not False for item in out)


class _Connection:
    __slots__ = (
        "flow", "starts", "ended", "client", "kafka", "why_not", "announced", "held", "held_bytes", "probes",
        "framers", "bytes", "gap_bytes", "start_ns", "end_ns", "reason",
    )

    def __init__(self, flow: str, ts: int) -> None:
        self.flow = flow
        self.starts: dict[FlowKey, StreamStart] = {}
        self.ended: set[FlowKey] = set()
        self.client: FlowKey | None = None  # the client's direction
        self.kafka: bool | None = None  # undecided while None
        self.why_not = "none of its ports is a Kafka port"  # said of a flow found not to be Kafka
        self.announced = False  # FlowStart sent
        self.held: list[StreamEvent] = []
        self.held_bytes = 0
        self.probes: dict[FlowKey, _Probe] = {}
        self.framers: dict[FlowKey, Framer] = {}
        self.bytes: dict[FlowKey, int] = {}
        self.gap_bytes = 0
        self.start_ns = self.end_ns = ts
        self.reason = "eof"

    def endpoints(self) -> tuple[str, str]:
        key = self.client or next(iter(self.starts))
        return format_endpoint(key.src, key.sport), format_endpoint(key.dst, key.dport)


class _Router:
    def __init__(self, capture: str, ports: frozenset[int]) -> None:
        self.capture = capture
        self.ports = ports
        self.active: dict[FlowKey, _Connection] = {}
        self.uses: dict[tuple[tuple[bytes, int], ...], int] = {}  # connections per address/port pair, for flow ids

    def event(self, event: StreamEvent) -> Iterator[FlowItem]:
        key = event.key
        if type(event) is StreamData:
            conn = self.active[key]
            conn.end_ns = event.timestamp_ns
            conn.bytes[key] = conn.bytes.get(key, 0) + len(event.data)
            if conn.kafka:
                # The bulk of a capture: data of a connection known to be Kafka, framed at once.
                out = conn.framers[key].feed(event.timestamp_ns, event.data)
                if out:
                    yield from self._framed(conn, key, out)
            elif conn.kafka is None:
                yield from self._probe(conn, event)
            return
        if type(event) is StreamStart:
            for stale in self._stale(key):
                yield from self._close(stale)
            conn = self._start(event)
        else:
            conn = self.active[key]
        conn.end_ns = event.timestamp_ns
        if type(event) is StreamGap:
            conn.gap_bytes += event.size
        if conn.kafka is None:
            yield from self._probe(conn, event)
        elif conn.kafka:
            yield from self._frames(conn, event)
        if type(event) is StreamEnd:
            conn.ended.add(key)
            conn.reason = event.reason
            if conn.ended.issuperset(conn.starts) and (len(conn.starts) == 2 or event.reason != "fin"):
                yield from self._close(conn)

    def finish(self) -> Iterator[FlowItem]:
        for conn in list(dict.fromkeys(self.active.values())):
            yield from self._close(conn)

    # --- connections -----------------------------------------------------------------------------

    def _stale(self, key: FlowKey) -> list[_Connection]:
        """Connections a new stream on `key` cannot belong to: the same ports again after
        they ended (the reassembler ends a connection before it reports one reusing them)."""
        found = [self.active.get(key), self.active.get(key.reversed())]
        return [
            conn for conn in dict.fromkeys(found)
            if conn is not None and (key in conn.starts or conn.ended.issuperset(conn.starts))
        ]

    def _start(self, start: StreamStart) -> _Connection:
        key = start.key
        conn = self.active.get(key.reversed())
        if conn is None:
            pair = tuple(sorted(((key.src, key.sport), (key.dst, key.dport))))
            uses = self.uses[pair] = self.uses.get(pair, 0) + 1
            client, server = format_endpoint(key.src, key.sport), format_endpoint(key.dst, key.dport)
            flow = f"{client} -> {server}" if uses == 1 else f"{client} -> {server} #{uses}"
            conn = _Connection(flow, start.timestamp_ns)
        self.active[key] = conn
        conn.starts[key] = start
        if conn.client is None:
            if start.role is not None:
                conn.client = key if start.role == "client" else key.reversed()
            elif self.ports and (key.dport in self.ports) != (key.sport in self.ports):
                conn.client = key if key.dport in self.ports else key.reversed()
        if conn.kafka is None and self.ports:
            conn.kafka = key.dport in self.ports or key.sport in self.ports
        return conn

    def _forget(self, conn: _Connection) -> None:
        for key in conn.starts:
            if self.active.get(key) is conn:
                del self.active[key]

    def _close(self, conn: _Connection) -> Iterator[FlowItem]:
        self._forget(conn)
        if conn.kafka is None:
            self._not_kafka(conn, "its bytes do not parse as Kafka requests")
        kafka = conn.kafka is True
        if not kafka and any(conn.bytes.values()):
            yield violation(self.capture, conn.flow, None, conn.start_ns, "non_kafka_flow", None, conn.why_not)
        if kafka:
            for key, framer in conn.framers.items():
                yield from self._framed(conn, key, framer.finish())
        client, server = conn.endpoints()
        to_server = conn.bytes.get(conn.client, 0) if conn.client else sum(conn.bytes.values())
        to_client = conn.bytes.get(conn.client.reversed(), 0) if conn.client else 0
        yield FlowEnd(conn.flow, client, server, kafka, conn.start_ns, conn.end_ns, to_server, to_client,
                      conn.gap_bytes, conn.reason)

    @staticmethod
    def _not_kafka(conn: _Connection, why: str) -> None:
        conn.kafka = False
        conn.why_not = why
        conn.held.clear()

    # --- deciding ----------------------------------------------------------------------------

    def _probe(self, conn: _Connection, event: StreamEvent) -> Iterator[FlowItem]:
        conn.held.append(event)
        if isinstance(event, StreamStart):
            return
        candidates = [conn.client] if conn.client is not None else list(conn.starts)
        key = event.key
        if key not in candidates:
            return
        probe = conn.probes.get(key)
        if probe is None:
            if isinstance(event, StreamEnd):
                return
            probe = conn.probes[key] = _Probe(conn.starts[key].from_syn)
        if isinstance(event, StreamData):
            conn.held_bytes += len(event.data)
            verdict = probe.data(event.timestamp_ns, event.data)
        elif isinstance(event, StreamGap):
            verdict = probe.gap(event.timestamp_ns, event.size)
        else:
            # A last frame that ends with the stream is proven by that end.
            verdict = probe.end()
        if verdict:
            conn.client = key
            conn.kafka = True
            held, conn.held = conn.held, []
            for e in held:
                yield from self._frames(conn, e)
        elif conn.held_bytes > PROBE_LIMIT:
            self._not_kafka(conn, f"no Kafka request found in its first {conn.held_bytes} bytes")

    # --- framing -----------------------------------------------------------------------------

    def _frames(self, conn: _Connection, event: StreamEvent) -> Iterator[FlowItem]:
        key = event.key
        if isinstance(event, StreamStart):
            if conn.client is None:
                # Decided by port alone with both ports in the list: the first to start is the client.
                conn.client = key
            if not conn.announced:
                conn.announced = True
                yield FlowStart(conn.flow, *conn.endpoints(), conn.start_ns)
            if key == conn.client:
                # A request read whole proves its start after garbage as well as in the probe,
                # so framing resumes where the probe found the flow to be Kafka.
                conn.framers[key] = Framer(REQUEST, synced=event.from_syn, proves=request_parses)
            else:
                conn.framers[key] = Framer(RESPONSE, synced=event.from_syn)
            return
        framer = conn.framers[key]
        if isinstance(event, StreamData):
            out = framer.feed(event.timestamp_ns, event.data)
        elif isinstance(event, StreamGap):
            yield violation(self.capture, conn.flow, None, event.timestamp_ns, "gap", event.offset,
                            f"{event.size} bytes of the {framer.kind} stream missing at stream offset {event.offset}")
            out = framer.gap(event.timestamp_ns, event.size)
        else:
            out = framer.finish()
            del conn.framers[key]
        if out:
            yield from self._framed(conn, key, out)

    def _framed(self, conn: _Connection, key: FlowKey, out: list[Frame | Problem]) -> Iterator[FlowItem]:
        direction = REQUEST if key == conn.client else RESPONSE
        flow = conn.flow
        for item in out:
            if isinstance(item, Frame):
                yield FlowFrame(flow, direction, item.timestamp_ns, item.data)
            elif item.size or item.kind != "resync":  # a stream joined right at a frame start lost nothing
                yield violation(self.capture, flow, None, conn.end_ns, "framing_error", item.offset,
                                f"{direction} stream: {item.kind}: {item.detail}")
