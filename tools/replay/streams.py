"""A capture file -> TCP stream events: the capture, packet and reassembly layers chained."""
from __future__ import annotations

from typing import Iterator

from tools.replay.capture import Source, read_packets
from tools.replay.packet import Segment, decode_segment
from tools.replay.problems import Problem
from tools.replay.tcp import Reassembler, StreamEvent


def stream_events(source: Source, reassembler: Reassembler | None = None) -> Iterator[StreamEvent | Problem]:
    """Every stream event of the capture in capture order, with the problems of each layer.

    A packet's decoding problem has the packet's ordinal (0-based) as its offset, since that
    is what finds it again in tshark or Wireshark (as frame number offset + 1).
    """
    reassembler = Reassembler() if reassembler is None else reassembler
    feed = reassembler.feed
    ordinal = -1
    for item in read_packets(source):
        if isinstance(item, Problem):
            yield item
            continue
        ordinal += 1
        decoded = decode_segment(item.link_type, item.data, item.orig_len)
        if isinstance(decoded, Segment):
            yield from feed(item.timestamp_ns, decoded)
        elif decoded is not None:
            yield decoded._replace(offset=ordinal, detail=f"packet {ordinal}: {decoded.detail}")
    yield from reassembler.finish()
