"""A share's rows, its plain connections read straight from segments to frames.

Most connections of a Kafka capture are plain: seen from their handshake, every segment
carrying data in sequence, each packet of the shape `packet` reads on its fast path. For those,
the reassembler's events and the router's probing only hand the bytes on unchanged; here each
direction's payloads go from the capture's bytes straight to its framer, and its frames to the
flow's decoder, in one loop per connection over header fields read for all the share's packets
at once (`index.fast_headers`).

A connection is plain only while nothing needs the general path's judgement: a segment out of
sequence, a retransmission, a reset, a size prefix that cannot be one, a frame left unfinished,
or a first request that does not read as Kafka's. Then its rows so far are dropped and the
connection goes through the general path (`index.share_events`, `flows.route`) whole, with the
other connections that are not plain, so the rows are the same whichever path reads it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Union

import numpy as np

from captures.formats import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN
from tools.replay.capture import Buffer, open_buffer
from tools.replay.decode import FlowDecoder, FlowRow, FrameRow, decode_flows
from tools.replay.flows import PROBE_LIMIT, FlowEnd, request_reads, route
from tools.replay.framing import REQUEST, RESPONSE, Frame, Framer
from tools.replay.index import Headers, Share, fast_headers, share_events
from tools.replay.packet import format_endpoint
from tools.replay.rules import ControllerEvent, Violation
from tools.replay.paths import local_path

if TYPE_CHECKING:
    import numpy.typing as npt

Row = Union[FrameRow, Violation, FlowRow, ControllerEvent]

_SEQ_MASK = 0xFFFFFFFF
_HANDSHAKE_FLAGS = TCP_SYN | TCP_ACK | TCP_FIN | TCP_RST
# Connections larger than this go the general way: a plain one's rows are held until it ends.
_MAX_PLAIN_BYTES = 64 << 20


def decode_share(share: Share, capture: str, ports: frozenset[int]) -> Iterator[Row]:
    """The rows of a share's flows (see `decode.decode_flows`): its plain connections first,
    then the others."""
    general = np.ones(len(share.packets), bool)
    with open_buffer(local_path(share.path)) as buf:
        data = np.frombuffer(buf, np.uint8)
        try:
            headers = fast_headers(data, share.packets)
        finally:
            del data  # a mapped file cannot close while an array still looks into it
        for rows, columns in _candidates(share, headers):
            decoded = _plain(buf, columns, share.eof_ns, capture, ports)
            if decoded is not None:
                general[rows] = False
                yield from decoded
    if general.any():
        rest = Share(share.path, share.eof_ns, share.packets[general], share.owners[general])
        yield from decode_flows(route(share_events(rest), capture, ports), capture)


# A connection's packets' time, source, destination, sequence number, flags, payload start and
# end, one list each.
Columns = list[list[int]]


def _candidates(share: Share, headers: Headers) -> Iterator[tuple[npt.NDArray[np.intp], Columns]]:
    """(which packets, their `Columns`) of each connection whose packets all have the fast
    path's shape and hold their whole payload, in capture order."""
    owners = share.owners
    bad = np.ones(len(owners), bool)
    bad[headers.rows] = headers.missing > 0
    weights = np.bincount(owners, weights=share.packets["caplen"])
    rejected = np.bincount(owners, weights=bad, minlength=len(weights)) > 0
    rejected |= weights > _MAX_PLAIN_BYTES
    # Each packet's place in `headers` (all packets of a candidate are there).
    place = np.full(len(owners), -1, np.intp)
    place[headers.rows] = np.arange(len(headers.rows))
    order = np.argsort(owners, kind="stable")
    order = order[~rejected[owners[order]]]
    if not len(order):
        return
    bounds = np.flatnonzero(np.diff(owners[order])) + 1
    at = place[order]
    timestamps = share.packets["timestamp_ns"][order].tolist()
    fields = [timestamps, *(column[at].tolist() for column in
                            (headers.src, headers.dst, headers.seq, headers.flags, headers.payload_at,
                             headers.payload_end))]
    lows = [0, *bounds.tolist()]
    highs = [*bounds.tolist(), len(order)]
    for low, high in zip(lows, highs):
        yield order[low:high], [column[low:high] for column in fields]


def _plain(buf: Buffer, columns: Columns, eof_ns: int, capture: str, ports: frozenset[int]) -> list[Row] | None:
    """The rows of one connection read the plain way, or None when it is not plain."""
    timestamps, sources, destinations, seqs, flags, starts, ends = columns
    if len(timestamps) < 2:
        return None
    client, server = sources[0], destinations[0]
    # The client's SYN, then the server's SYN-ACK, neither with data.
    if (flags[0] & _HANDSHAKE_FLAGS != TCP_SYN or flags[1] & _HANDSHAKE_FLAGS != TCP_SYN | TCP_ACK
            or sources[1] != server or destinations[1] != client or starts[0] != ends[0] or starts[1] != ends[1]):
        return None
    client_address, client_port = (client >> 16).to_bytes(4, "big"), client & 0xFFFF
    server_address, server_port = (server >> 16).to_bytes(4, "big"), server & 0xFFFF
    if ports and not (client_port in ports or server_port in ports):
        return None  # not Kafka: the general path says so
    client_name, server_name = format_endpoint(client_address, client_port), format_endpoint(server_address, server_port)
    flow = f"{client_name} -> {server_name}"
    decoder = FlowDecoder(capture, flow)
    frame = decoder.frame
    rows: list[Row] = []
    framers = (Framer(REQUEST), Framer(RESPONSE))
    directions = (REQUEST, RESPONSE)
    expected = [(seqs[0] + 1) & _SEQ_MASK, (seqs[1] + 1) & _SEQ_MASK]  # the next sequence number of each
    ended = [False, False]
    sent = [0, 0]
    kafka = bool(ports)
    last_ns = timestamps[1]
    for ts, source, destination, seq, flag, start, end in zip(*(column[2:] for column in columns)):
        if flag & (TCP_SYN | TCP_RST):
            return None
        side = 0 if source == client else 1
        if (source, destination) != ((client, server) if side == 0 else (server, client)):
            return None  # another pair of endpoints with the same key
        fin = flag & TCP_FIN
        length = end - start
        if not (length or fin):
            continue  # an acknowledgement carries nothing for the streams
        if ended[side] or seq != expected[side]:
            return None
        last_ns = ts
        if length:
            sent[side] += length
            expected[side] = (seq + length) & _SEQ_MASK
            for item in framers[side].feed(ts, buf[start:end]):
                if type(item) is not Frame:
                    return None
                if not kafka:
                    # Probing would find the flow to be Kafka by this first request read whole.
                    if side != 0 or len(item.data) + 4 > PROBE_LIMIT or request_reads(item.data) is False:
                        return None
                    kafka = True
                rows += frame(directions[side], item.timestamp_ns, item.data)
        if fin:
            ended[side] = True
            if framers[side].finish():
                return None
    if not kafka:
        return None
    if not all(ended):
        last_ns = eof_ns
        if any(framer.finish() for framer, done in zip(framers, ended) if not done):
            return None
    rows.append(decoder.summary(FlowEnd(flow, client_name, server_name, True, timestamps[0], last_ns, sent[0], sent[1],
                                        0, "fin" if all(ended) else "eof")))
    return rows
