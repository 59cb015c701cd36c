"""One pass over a capture that deals its connections to the decoding tasks.

The pass walks the capture's records (where each packet lies, through
`capture.read_positions`, its bytes left unread) and reads every packet's flow key at fixed
offsets with numpy, many packets at once; packets of other shapes (VLAN tags, IP options,
IPv6, other link types) go one by one through `packet.decode_segment`. Connections are then
dealt to shares, the biggest first to the share with the fewest bytes so far, and a share is
the list of its packets' positions in capture order. A task reads its share's packets and no
others, so however many tasks there are, each payload byte is read by one of them, and each
problem of the capture as a whole is found once, here.

What the driver holds for this is 30 bytes for each TCP segment of the capture (a packed row of
26, and its connection's number), about twice that while the index is built, never the
packets' bytes.
"""
from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Iterator, NamedTuple

import numpy as np

from captures import formats as f
from tools.replay.capture import Buffer, Position, open_buffer, plain_positions, read_positions
from tools.replay.packet import FAST_LINK_OFFSETS, Segment, decode_segment_at
from tools.replay.problems import Problem
from tools.replay.rules import Violation, problem_violation, violation
from tools.replay.paths import local_path
from tools.replay.tcp import Reassembler, StreamEvent

if TYPE_CHECKING:
    import numpy.typing as npt

    Column = npt.NDArray[np.int64]
    Rows = npt.NDArray[np.void]

_MASK64 = (1 << 64) - 1
# Mixes the two endpoints of a connection into one 64-bit key; a collision only puts two
# connections in the same share.
_MIX = 0x9E3779B97F4A7C15
# Packet positions are gathered this many at a time before they become numpy rows.
_CHUNK = 1 << 16
# A packet's row: `capture.Position`'s fields, packed, each no wider than its values need.
PACKET = np.dtype([("timestamp_ns", "<i8"), ("link_type", "<u2"), ("at", "<i8"), ("caplen", "<u4"),
                   ("orig_len", "<u4")])


class Share(NamedTuple):
    """The packets of some connections of one capture, as one task reads them."""

    path: str
    eof_ns: int  # the time of the capture's last TCP segment: when connections still open end
    packets: Rows  # PACKET rows
    owners: npt.NDArray[np.int32]  # the connection of each of them, as in its capture's index

    def size(self) -> int:
        return int(self.packets["caplen"].sum())


class CaptureIndex(NamedTuple):
    path: str
    violations: list[Violation]  # the problems of the capture as a whole and of its packets
    packets: Rows  # the PACKET rows of its TCP segments, in capture order
    owners: npt.NDArray[np.int32]  # the connection of each of them, numbered from 0
    weights: npt.NDArray[np.float64]  # bytes captured per connection

    def shares(self, parts: int, share_bytes: int) -> list[Share]:
        """The connections dealt to at most `parts` shares of about `share_bytes` or more."""
        if not len(self.packets):
            return []
        count = max(1, min(parts, math.ceil(float(self.weights.sum()) / share_bytes)))
        share_of = _deal(self.weights, count)[self.owners]
        eof_ns = int(self.packets[-1]["timestamp_ns"])
        shares = [Share(self.path, eof_ns, self.packets[share_of == n], self.owners[share_of == n])
                  for n in range(count)]
        return [s for s in shares if len(s.packets)]


def index_capture(path: str, capture: str) -> CaptureIndex:
    """Find a capture's problems and its connections' packets. A file that cannot be read is
    a violation, not an error."""
    violations: list[Violation] = []
    try:
        with open_buffer(local_path(path)) as buf:
            packets = _positions(buf, capture, violations)
            keys, segments = _keys(buf, packets, capture, violations)
    except OSError as exc:
        return unreadable(path, [*violations, violation(capture, None, None, None, "unreadable_file", None, str(exc))])
    packets = packets[segments]
    connections, owners = np.unique(keys[segments], return_inverse=True)
    weights = np.bincount(owners, weights=packets["caplen"], minlength=len(connections)).astype(np.float64)
    return CaptureIndex(path, violations, packets, owners.astype(np.int32), weights)


def unreadable(path: str, violations: list[Violation]) -> CaptureIndex:
    """The index of a capture none of whose packets could be read, for the reasons given."""
    return CaptureIndex(path, violations, np.zeros(0, PACKET), np.zeros(0, np.int32),
                        np.zeros(0, np.float64))


def share_events(share: Share) -> Iterator[StreamEvent]:
    """The stream events of a share's connections, its packets read where the index found them."""
    with open_buffer(local_path(share.path)) as buf:
        reassembler = Reassembler()
        feed = reassembler.feed
        for first in range(0, len(share.packets), _CHUNK):
            for timestamp_ns, link_type, at, caplen, orig_len in share.packets[first : first + _CHUNK].tolist():
                segment = decode_segment_at(link_type, buf, at, caplen, orig_len)
                assert isinstance(segment, Segment), "the index keeps TCP segments only"
                yield from feed(timestamp_ns, segment)
        yield from reassembler.finish(share.eof_ns)


def _positions(buf: Buffer, capture: str, violations: list[Violation]) -> Rows:
    """Every packet's row, in capture order; the capture's problems go to `violations`."""
    plain = plain_positions(buf)
    if plain is not None:
        rows = np.empty(len(plain.at), PACKET)
        for name, column in plain._asdict().items():
            rows[name] = column
        return rows
    chunks: list[Rows] = []
    pending: list[Position] = []

    def flush() -> None:
        chunks.append(np.fromiter(pending, PACKET, len(pending)))
        pending.clear()

    for item in read_positions(buf):
        if isinstance(item, Problem):
            violations.append(problem_violation(capture, item.kind, item.offset, item.detail))
        else:
            pending.append(item)
            if len(pending) == _CHUNK:
                flush()
    flush()
    return np.concatenate(chunks)


def _keys(buf: Buffer, packets: Rows, capture: str, violations: list[Violation]
          ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.intp]]:
    """(each packet's connection key, the ordinals of the packets that are TCP segments)."""
    keys = np.zeros(len(packets), np.uint64)
    done = np.zeros(len(packets), bool)
    if len(packets):
        data = np.frombuffer(buf, np.uint8)
        try:
            # A slice at a time: the header columns take several times the rows' own bytes.
            for first in range(0, len(packets), _CHUNK * 16):
                headers = fast_headers(data, packets[first : first + _CHUNK * 16])
                rows = headers.rows + first
                low = np.minimum(headers.src, headers.dst).astype(np.uint64)
                high = np.maximum(headers.src, headers.dst).astype(np.uint64)
                keys[rows] = low * np.uint64(_MIX) + high
                done[rows] = True
        finally:
            del data  # a mapped file cannot close while an array still looks into it
    segments = done.copy()
    for ordinal in np.flatnonzero(~done).tolist():
        _, link_type, at, caplen, orig_len = packets[ordinal].tolist()
        decoded = decode_segment_at(link_type, buf, at, caplen, orig_len)
        if isinstance(decoded, Segment):
            keys[ordinal] = connection_key(decoded.src, decoded.sport, decoded.dst, decoded.dport)
            segments[ordinal] = True
        elif decoded is not None:
            violations.append(problem_violation(capture, decoded.kind, ordinal, f"packet {ordinal}: {decoded.detail}"))
    return keys, np.flatnonzero(segments)


class Headers(NamedTuple):
    """The IPv4 and TCP fields of the packets that `packet.decode_segment` reads on its fast
    path, one column each, in the order of `rows`."""

    rows: Column  # which of the packets they are, ascending
    src: Column  # the source address and port as one number: address << 16 | port
    dst: Column
    seq: Column
    flags: Column
    payload_at: Column  # where the payload lies in the capture's bytes
    payload_end: Column
    missing: Column  # payload bytes the IP length promises but the capture does not hold


def fast_headers(data: npt.NDArray[np.uint8], packets: Rows) -> Headers:
    """The header fields of those of `packets` (in the capture's bytes `data`) that
    `packet.decode_segment` reads on its fast path (IPv4 without options, unfragmented,
    carrying TCP): the same tests and the same fields, column-wise."""
    parts = [_fast_headers(data, packets, link_type, ip, ethertype_at)
             for link_type, (ip, ethertype_at) in FAST_LINK_OFFSETS.items()]
    joined = Headers(*(np.concatenate(column) for column in zip(*parts)))
    order = np.argsort(joined.rows, kind="stable")
    return Headers(*(column[order] for column in joined))


def _fast_headers(data: npt.NDArray[np.uint8], packets: Rows, link_type: int, ip: int, ethertype_at: int | None
                  ) -> Headers:
    caplen = packets["caplen"].astype(np.int64)
    rows = np.flatnonzero((packets["link_type"] == link_type) & (caplen >= ip + 40))
    start = packets["at"][rows]
    if ethertype_at is not None:
        ethertype = _be(data, start + ethertype_at, 2)
        kept = ethertype == f.ETHERTYPE_IPV4
        rows, start = rows[kept], start[kept]
    base = start + ip
    total_length = _be(data, base + 2, 2)
    data_offset = data[base + 32].astype(np.int64)
    payload_at = ip + 20 + (data_offset >> 4) * 4
    ip_end = ip + total_length
    kept = ((data[base] == 0x45) & (data[base + 9] == f.IPPROTO_TCP) & ((_be(data, base + 6, 2) & 0x3FFF) == 0)
            & (data_offset >= 0x50) & (payload_at <= ip_end) & (payload_at <= caplen[rows]))
    rows, start, base, payload_at, ip_end = rows[kept], start[kept], base[kept], payload_at[kept], ip_end[kept]
    captured = caplen[rows]
    missing = np.maximum(0, np.minimum(ip_end, packets["orig_len"][rows].astype(np.int64)) - captured)
    return Headers(rows, _be(data, base + 12, 4) << 16 | _be(data, base + 20, 2),
                   _be(data, base + 16, 4) << 16 | _be(data, base + 22, 2), _be(data, base + 24, 4),
                   data[base + 33].astype(np.int64), start + payload_at, start + np.minimum(ip_end, captured), missing)


def _be(data: npt.NDArray[np.uint8], at: Column, width: int) -> Column:
    """Big-endian unsigned integers of `width` bytes at each position of `at`."""
    value = np.zeros(len(at), np.int64)
    for i in range(width):
        value = value << 8 | data[at + i]
    return value


def connection_key(src: bytes, sport: int, dst: bytes, dport: int) -> int:
    """The key both directions of a connection share: what `_fast_keys` computes, for any
    address family."""
    a, b = _endpoint(src, sport), _endpoint(dst, dport)
    return (min(a, b) * _MIX + max(a, b)) & _MASK64


def _endpoint(address: bytes, port: int) -> int:
    value = int.from_bytes(address, "big") << 16 | port
    # An IPv4 endpoint fits in 48 bits and stays itself; an IPv6 one is folded to 64.
    return (value ^ value >> 64 ^ value >> 128) & _MASK64


def _deal(weights: npt.NDArray[np.float64], count: int) -> npt.NDArray[np.int64]:
    """Which of `count` shares each connection goes to: biggest first, to the lightest share."""
    share_of = np.zeros(len(weights), np.int64)
    if count == 1:
        return share_of
    loads = [(0.0, n) for n in range(count)]
    for connection in np.argsort(-weights, kind="stable").tolist():
        load, n = heapq.heappop(loads)
        share_of[connection] = n
        heapq.heappush(loads, (load + float(weights[connection]), n))
    return share_of
