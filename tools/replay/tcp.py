"""TCP reassembly: segments of many connections -> one ordered byte stream per direction.

Every byte position of a stream is accounted for exactly once, either as `StreamData` or as a
`StreamGap` of a known size; missing bytes are never glued over. A hole before buffered data
is declared a gap only when it cannot be filled any more: the peer acknowledged past it (the
bytes reached the peer but not the capture), the buffer limit was hit, or the connection ended.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
from typing import Iterable, Iterator, NamedTuple, Union

from captures.formats import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN
from tools.replay.packet import Segment, format_endpoint

_SEQ_MASK = 0xFFFFFFFF
_HALF_SEQ_SPACE = 1 << 31


class FlowKey(NamedTuple):
    """One direction of a connection: bytes flow from `src:sport` to `dst:dport`."""

    src: bytes
    sport: int
    dst: bytes
    dport: int

    def reversed(self) -> FlowKey:
        return FlowKey(self.dst, self.dport, self.src, self.sport)

    def __str__(self) -> str:
        return f"{format_endpoint(self.src, self.sport)} -> {format_endpoint(self.dst, self.dport)}"


class StreamStart(NamedTuple):
    key: FlowKey
    timestamp_ns: int
    role: str | None  # "client" (sent the SYN), "server", or None when no handshake was seen
    from_syn: bool  # offset 0 is the first byte after the SYN, not a point joined mid-stream


class StreamData(NamedTuple):
    key: FlowKey
    timestamp_ns: int
    offset: int
    data: bytes


class StreamGap(NamedTuple):
    key: FlowKey
    timestamp_ns: int
    offset: int
    size: int


class StreamEnd(NamedTuple):
    key: FlowKey
    timestamp_ns: int
    offset: int
    reason: str  # "fin", "rst", "reused" (a new SYN on the same ports) or "eof"


StreamEvent = Union[StreamStart, StreamData, StreamGap, StreamEnd]
# A flow key as a plain tuple, which a FlowKey equals.
_Key = tuple[bytes, int, bytes, int]


@dataclasses.dataclass
class TcpStats:
    segments: int = 0
    duplicate_bytes: int = 0  # retransmitted or overlapping bytes dropped as already delivered
    out_of_order_segments: int = 0
    gap_bytes: int = 0
    ignored_segments: int = 0  # segments of a connection that had already ended


class _Direction:
    __slots__ = (
        "key", "peer", "role", "started", "base", "offset", "pending", "pending_bytes", "acked", "fin_at", "ended"
    )

    def __init__(self, key: FlowKey) -> None:
        self.key = key
        self.peer: _Direction = self
        self.role: str | None = None
        self.started = False
        self.base = 0  # sequence number of stream offset 0
        self.offset = 0  # next stream offset to deliver
        # Sorted (start offset, is_hole, bytes or hole size) pieces waiting for earlier bytes.
        self.pending: list[tuple[int, int, bytes | int]] = []
        self.pending_bytes = 0
        self.acked = 0  # highest stream offset the peer acknowledged
        self.fin_at: int | None = None
        self.ended = False

    def offset_of(self, seq: int) -> int:
        # Sequence numbers wrap; the nearer of the two readings is the right one.
        delta = (seq - self.base - self.offset) & _SEQ_MASK
        if delta >= _HALF_SEQ_SPACE:
            delta -= 1 << 32
        return self.offset + delta


class _Connection:
    __slots__ = ("dirs", "closed")

    def __init__(self, key: FlowKey) -> None:
        forward, backward = _Direction(key), _Direction(key.reversed())
        forward.peer, backward.peer = backward, forward
        self.dirs: dict[_Key, _Direction] = {key: forward, backward.key: backward}
        self.closed = False


class Reassembler:
    """Feed segments in capture order; each call returns the stream events they complete."""

    def __init__(self, max_buffer: int = 16 << 20, linger_ns: int = 120_000_000_000) -> None:
        # max_buffer: out-of-order bytes held per direction before the oldest hole is given up.
        # linger_ns: how long an ended connection still absorbs late retransmissions.
        self.max_buffer = max_buffer
        self.linger_ns = linger_ns
        self.stats = TcpStats()
        self._conns: dict[_Key, _Connection] = {}
        self._closed: collections.deque[tuple[int, _Connection]] = collections.deque()
        self._last_ts = 0

    def feed(self, timestamp_ns: int, segment: Segment) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        self._last_ts = timestamp_ns
        self.stats.segments += 1
        closed = self._closed
        if closed and closed[0][0] + self.linger_ns <= timestamp_ns:
            self._evict(timestamp_ns)
        # The segment's first four fields are its flow key: equal to, and hashed as, a FlowKey.
        key = segment[:4]
        conn = self._conns.get(key)
        flags = segment.flags
        seq = segment.seq

        if flags & TCP_RST:
            if conn is not None and not conn.closed:
                self._close(conn, timestamp_ns, "rst", out)
            return out
        if flags & TCP_SYN:
            if conn is not None and (conn.closed or self._new_isn(conn.dirs[key], seq)):
                if not conn.closed:
                    self._close(conn, timestamp_ns, "reused", out)
                conn = None
            if conn is None:
                conn = self._open(key)
            self._syn(conn, key, segment, timestamp_ns, out)
            seq = (seq + 1) & _SEQ_MASK
        elif conn is None:
            conn = self._open(key)
        elif conn.closed:
            self.stats.ignored_segments += 1
            return out

        d = conn.dirs[key]
        if flags & TCP_ACK:
            self._ack(conn, d.peer, segment.ack, timestamp_ns, out)
        length = len(segment.payload) + segment.missing
        if d.ended or not (length or flags & TCP_FIN):
            return out
        if not d.started:
            self._start(d, timestamp_ns, seq, False, out)
        self._segment(d, timestamp_ns, seq, segment, flags & TCP_FIN, out)
        if d.fin_at is not None and d.offset >= d.fin_at:
            self._end(conn, d, timestamp_ns, "fin", out)
        return out

    def finish(self, last_ts: int | None = None) -> list[StreamEvent]:
        """End every open stream: holes become gaps, then each direction gets its end, at
        `last_ts`, the time the capture ends, or else at the last segment fed's."""
        out: list[StreamEvent] = []
        for conn in dict.fromkeys(self._conns.values()):
            if not conn.closed:
                self._close(conn, self._last_ts if last_ts is None else last_ts, "eof", out)
        return out

    # -----------------------------------------------------------------------------------------

    def _open(self, key: _Key) -> _Connection:
        flow_key = FlowKey(*key)
        conn = _Connection(flow_key)
        self._conns[flow_key] = self._conns[flow_key.reversed()] = conn
        return conn

    @staticmethod
    def _new_isn(d: _Direction, seq: int) -> bool:
        # A SYN with the initial sequence number already known is a retransmission.
        return d.started and d.base != (seq + 1) & _SEQ_MASK

    def _syn(self, conn: _Connection, key: _Key, segment: Segment, ts: int, out: list[StreamEvent]) -> None:
        d = conn.dirs[key]
        peer = d.peer
        if segment.flags & TCP_ACK:
            d.role, peer.role = "server", "client"
            if not peer.started:
                # The SYN-ACK acknowledges the client's SYN: the client's stream starts there.
                self._start(peer, ts, segment.ack, True, out)
        else:
            d.role, peer.role = "client", "server"
        if not d.started:
            self._start(d, ts, (segment.seq + 1) & _SEQ_MASK, True, out)

    @staticmethod
    def _start(d: _Direction, ts: int, base: int, from_syn: bool, out: list[StreamEvent]) -> None:
        d.started = True
        d.base = base
        out.append(StreamStart(d.key, ts, d.role, from_syn))

    def _segment(self, d: _Direction, ts: int, seq: int, segment: Segment, fin: int, out: list[StreamEvent]) -> None:
        payload, missing = segment.payload, segment.missing
        start = d.offset_of(seq)
        end = start + len(payload) + missing
        if fin and d.fin_at is None:
            d.fin_at = end
        if start == d.offset and not d.pending:
            if payload:
                out.append(StreamData(d.key, ts, start, payload))
                d.offset = start + len(payload)
            if missing:
                self._gap(d, ts, missing, out)
            return
        if end <= d.offset:
            self.stats.duplicate_bytes += end - start
            return
        if start > d.offset:
            self.stats.out_of_order_segments += 1
        if payload:
            bisect.insort(d.pending, (start, 0, payload))
            d.pending_bytes += len(payload)
        if missing:
            bisect.insort(d.pending, (start + len(payload), 1, missing))
        self._drain(d, ts, d.acked, out)
        while d.pending_bytes > self.max_buffer:
            self._drain(d, ts, d.pending[0][0], out)

    def _drain(self, d: _Direction, ts: int, release_to: float, out: list[StreamEvent]) -> None:
        """Deliver pending pieces in order; a hole before a piece that starts at or before
        `release_to` becomes a gap, any later hole stops delivery."""
        pending = d.pending
        while pending:
            start, _, item = pending[0]
            if start > d.offset:
                if start > release_to:
                    return
                self._gap(d, ts, start - d.offset, out)
            pending.pop(0)
            cut = d.offset - start  # never negative: a hole before `start` was closed above
            if isinstance(item, int):  # a hole, held as its size
                if cut < item:
                    self._gap(d, ts, item - cut, out)
                continue
            size = len(item)
            d.pending_bytes -= size
            if cut >= size:
                self.stats.duplicate_bytes += size
            else:
                self.stats.duplicate_bytes += cut
                out.append(StreamData(d.key, ts, d.offset, item[cut:] if cut > 0 else item))
                d.offset = start + size

    def _gap(self, d: _Direction, ts: int, size: int, out: list[StreamEvent]) -> None:
        out.append(StreamGap(d.key, ts, d.offset, size))
        d.offset += size
        self.stats.gap_bytes += size

    def _ack(self, conn: _Connection, d: _Direction, ack: int, ts: int, out: list[StreamEvent]) -> None:
        """The peer acknowledged `d`'s bytes up to `ack`: holes below it will not be refilled."""
        if not d.started or d.ended:
            return
        acked = d.offset_of(ack)
        if acked <= d.acked:
            return
        d.acked = acked
        if d.pending and d.pending[0][0] <= acked:
            self._drain(d, ts, acked, out)
            if d.fin_at is not None and d.offset >= d.fin_at:
                self._end(conn, d, ts, "fin", out)

    def _end(self, conn: _Connection, d: _Direction, ts: int, reason: str, out: list[StreamEvent]) -> None:
        d.ended = True
        out.append(StreamEnd(d.key, ts, d.offset, reason))
        if all(x.ended or not x.started for x in conn.dirs.values()):
            self._mark_closed(conn, ts)

    def _close(self, conn: _Connection, ts: int, reason: str, out: list[StreamEvent]) -> None:
        for d in conn.dirs.values():
            if not d.started or d.ended:
                continue
            self._drain(d, ts, float("inf"), out)
            if d.fin_at is not None and d.offset < d.fin_at:
                # The FIN's sequence number proves how much was sent after the last byte seen.
                self._gap(d, ts, d.fin_at - d.offset, out)
            d.ended = True
            out.append(StreamEnd(d.key, ts, d.offset, "fin" if d.fin_at is not None else reason))
        self._mark_closed(conn, ts)

    def _mark_closed(self, conn: _Connection, ts: int) -> None:
        conn.closed = True
        self._closed.append((ts, conn))

    def _evict(self, ts: int) -> None:
        while self._closed and self._closed[0][0] + self.linger_ns <= ts:
            _, conn = self._closed.popleft()
            for key in conn.dirs:
                if self._conns.get(key) is conn:
                    del self._conns[key]


def reassemble(segments: Iterable[tuple[int, Segment]], **options: int) -> Iterator[StreamEvent]:
    """Stream events for `(timestamp_ns, segment)` pairs in capture order, then the ends."""
    reassembler = Reassembler(**options)
    for timestamp_ns, segment in segments:
        yield from reassembler.feed(timestamp_ns, segment)
    yield from reassembler.finish()
