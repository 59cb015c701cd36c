"""Captures written by the writer, damaged on purpose, read back down to Kafka frames."""
import io
import struct

import pytest

from captures import pcapng_writer
from tools.replay.capture import Packet, read_packets
from tools.replay.framing import REQUEST, RESPONSE, Frame, Framer
from tools.replay.packet import decode_segment
from tools.replay.problems import Problem
from tools.replay.streams import stream_events
from tools.replay.tcp import StreamData, StreamEnd, StreamGap, StreamStart

T0 = 1_700_000_000_000_000_000
CLIENT_ISN, SERVER_ISN = 1000, 2**32 - 3000  # the server's numbers wrap during the test


def request(correlation_id: int, body_size: int) -> bytes:
    frame = struct.pack(">hhih", 1, 16, correlation_id, 6) + b"replay" + bytes([correlation_id % 256]) * body_size
    return struct.pack(">i", len(frame)) + frame


def response(correlation_id: int, body_size: int) -> bytes:
    frame = struct.pack(">i", correlation_id) + bytes([0xA0 | correlation_id % 16]) * body_size
    return struct.pack(">i", len(frame)) + frame


SIZES = [10, 3000, 50, 5000, 20, 7000]
REQUESTS = [request(i, size) for i, size in enumerate(SIZES)]
RESPONSES = [response(i, size * 2) for i, size in enumerate(SIZES)]


def write_conversation(writer, client=("10.0.0.1", 50000), server=("10.0.0.2", 9092), t=T0):
    conn = writer.connection(client, server, t, client_isn=CLIENT_ISN, server_isn=SERVER_ISN)
    for i, (req, resp) in enumerate(zip(REQUESTS, RESPONSES)):
        conn.client_to_server(req, t + 10 * i + 1)
        conn.server_to_client(resp, t + 10 * i + 2)
    conn.close(t + 1000)


def frames_of(events):
    """Per direction: its frames' bytes, then all problems and gaps, in order."""
    framers, frames, problems = {}, {}, []
    for event in events:
        if isinstance(event, Problem):
            problems.append(event)
        elif isinstance(event, StreamStart):
            # The server's port tells the directions apart even when no handshake was seen.
            kind = REQUEST if event.key.dport == 9092 else RESPONSE
            framers[event.key] = Framer(kind, synced=event.from_syn)
            frames[event.key] = []
        else:
            framer = framers[event.key]
            if isinstance(event, StreamData):
                out = framer.feed(event.timestamp_ns, event.data)
            elif isinstance(event, StreamGap):
                problems.append(event)
                out = framer.gap(event.timestamp_ns, event.size)
            else:
                assert isinstance(event, StreamEnd)
                out = framer.finish()
            frames[event.key] += [e.data for e in out if isinstance(e, Frame)]
            problems += [e for e in out if isinstance(e, Problem)]
    return frames, problems


def by_role(frames):
    client = next(k for k in frames if k.dport == 9092)
    return frames[client], frames[client.reversed()]


@pytest.mark.parametrize("fmt", ["pcapng", "pcap"])
def test_clean_capture_gives_back_every_frame(tmp_path, fmt):
    path = tmp_path / f"clean.{fmt}"
    with pcapng_writer.open(path, format=fmt) as writer:
        write_conversation(writer)
    frames, problems = frames_of(stream_events(path))
    assert problems == []
    requests, responses = by_role(frames)
    assert requests == [r[4:] for r in REQUESTS]
    assert responses == [r[4:] for r in RESPONSES]


def test_interleaved_connections_over_ipv4_and_ipv6(tmp_path):
    path = tmp_path / "two.pcapng"
    with pcapng_writer.open(path) as writer:
        a = writer.connection(("10.0.0.1", 40000), ("10.0.0.2", 9092), T0, client_isn=1, server_isn=2)
        b = writer.connection(("fd00::1", 40001), ("fd00::2", 9093), T0, client_isn=3, server_isn=4)
        for i, req in enumerate(REQUESTS):
            a.client_to_server(req, T0 + i)
            b.client_to_server(REQUESTS[-1 - i], T0 + i)
        a.close(T0 + 100)
        b.close(T0 + 100)
    frames, problems = frames_of(stream_events(path))
    assert problems == []
    by_port = {key.sport: value for key, value in frames.items()}
    assert by_port[40000] == [r[4:] for r in REQUESTS]
    assert by_port[40001] == [r[4:] for r in reversed(REQUESTS)]
    assert by_port[9092] == by_port[9093] == []


def conversation_packets() -> list[Packet]:
    buffer = io.BytesIO()
    with pcapng_writer.open(buffer) as writer:
        write_conversation(writer)
    return [p for p in read_packets(buffer.getvalue()) if isinstance(p, Packet)]


def find(packets, from_client: bool, stream_offset: int) -> int:
    """Index of the data packet that starts at `stream_offset` of one direction."""
    base = CLIENT_ISN + 1 if from_client else SERVER_ISN + 1
    for i, p in enumerate(packets):
        segment = decode_segment(p.link_type, p.data, p.orig_len)
        if segment.payload and (segment.dport == 9092) == from_client:
            if (segment.seq - base) & 0xFFFFFFFF == stream_offset:
                return i
    raise LookupError(stream_offset)


def rewrite(packets) -> bytes:
    buffer = io.BytesIO()
    with pcapng_writer.open(buffer) as writer:
        for p in packets:
            writer.write_packet(p.timestamp_ns, p.data, p.orig_len)
    return buffer.getvalue()


def test_damaged_capture_loses_exactly_the_damaged_frames():
    packets = conversation_packets()
    request_at = [sum(map(len, REQUESTS[:i])) for i in range(len(REQUESTS))]
    response_at = [sum(map(len, RESPONSES[:i])) for i in range(len(RESPONSES))]

    dropped = find(packets, True, request_at[3] + 1460)  # the middle of request 3
    duplicated = find(packets, False, response_at[1])
    swapped = find(packets, True, request_at[1])  # request 1's first two segments
    truncated = find(packets, False, response_at[5])  # response 5's first segment

    damaged = list(packets)
    damaged[truncated] = damaged[truncated]._replace(data=damaged[truncated].data[:100])
    damaged[swapped], damaged[swapped + 1] = damaged[swapped + 1], damaged[swapped]
    damaged.insert(duplicated + 1, packets[duplicated])
    del damaged[dropped + 1]  # shifted by the insert above, which comes first
    assert len(damaged) == len(packets)

    frames, problems = frames_of(stream_events(rewrite(damaged)))
    requests, responses = by_role(frames)
    assert requests == [r[4:] for i, r in enumerate(REQUESTS) if i != 3]
    assert responses == [r[4:] for i, r in enumerate(RESPONSES) if i != 5]
    summary = [
        (type(p).__name__, p.offset, p.size) if isinstance(p, StreamGap) else (p.kind, p.offset, p.size)
        for p in problems
    ]
    assert summary == [
        ("StreamGap", request_at[3] + 1460, 1460),
        ("damaged_frame", request_at[3], len(REQUESTS[3])),
        ("StreamGap", response_at[5] + 100 - 54, 1460 - (100 - 54)),
        ("damaged_frame", response_at[5], len(RESPONSES[5])),
    ]


def test_capture_joined_mid_stream_resyncs_each_direction():
    packets = conversation_packets()
    # Start inside request 1 (its second segment) and inside response 1.
    first = find(packets, True, len(REQUESTS[0]) + 1460)
    frames, problems = frames_of(stream_events(rewrite(packets[first:])))
    requests, responses = by_role(frames)
    assert requests == [r[4:] for r in REQUESTS[2:]]
    assert responses == [r[4:] for r in RESPONSES[1:]]
    resyncs = [(p.kind, p.offset, p.size) for p in problems]
    skipped_request_bytes = len(REQUESTS[0]) + len(REQUESTS[1]) - (len(REQUESTS[0]) + 1460)
    assert sorted(resyncs) == [("resync", 0, 0), ("resync", skipped_request_bytes, skipped_request_bytes)]


def test_decode_problems_carry_the_packet_number():
    packets = conversation_packets()
    cut = packets[5]._replace(data=packets[5].data[:30])
    events = list(stream_events(rewrite(packets[:5] + [cut])))
    problems = [e for e in events if isinstance(e, Problem)]
    assert [(p.kind, p.offset) for p in problems] == [("truncated_headers", 5)]
    assert problems[0].detail.startswith("packet 5: ")


def test_hand_made_pcapng_with_cooked_null_and_vlan_interfaces():
    """Three connections, each captured on its own interface with its own link type, in a
    big-endian pcapng whose packets are re-wrapped from the writer's Ethernet frames."""

    def block(block_type: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack(">II", block_type, len(body) + 12) + body + struct.pack(">I", len(body) + 12)

    link_headers = [
        struct.pack(">HHIHBB8s", 0x0800, 0, 2, 1, 0, 6, b"\2\0\0\0\0\1"),  # SLL2
        struct.pack("<I", 30),  # NULL written by a little-endian macOS: AF_INET6
        b"\2\0\0\0\0\2\2\0\0\0\0\1" + struct.pack(">HHHHH", 0x88A8, 7, 0x8100, 8, 0x0800),  # QinQ
    ]
    link_types = [276, 0, 1]
    endpoints = [
        (("10.0.0.1", 41000), ("10.0.0.2", 9092)),
        (("fd00::1", 41001), ("fd00::2", 9092)),
        (("10.0.0.3", 41002), ("10.0.0.2", 9092)),
    ]
    raw = block(0x0A0D0D0A, struct.pack(">IHHq", 0x1A2B3C4D, 1, 0, -1))
    for link_type in link_types:
        raw += block(1, struct.pack(">HHI", link_type, 0, 0))
    for if_id, (client, server) in enumerate(endpoints):
        buffer = io.BytesIO()
        with pcapng_writer.open(buffer) as writer:
            conn = writer.connection(client, server, T0, client_isn=1, server_isn=2)
            for i, req in enumerate(REQUESTS[:3]):
                conn.client_to_server(req, T0 + i)
                conn.server_to_client(RESPONSES[i], T0 + i)
            conn.close(T0 + 9)
        for p in read_packets(buffer.getvalue()):
            frame = link_headers[if_id] + p.data[14:]
            ticks = p.timestamp_ns // 1000  # the default resolution: microseconds
            raw += block(6, struct.pack(">IIIII", if_id, ticks >> 32, ticks & 0xFFFFFFFF, len(frame), len(frame)) + frame)

    frames, problems = frames_of(stream_events(raw))
    assert problems == []
    by_port = {key.sport: value for key, value in frames.items()}
    for port in (41000, 41001, 41002):
        assert by_port[port] == [r[4:] for r in REQUESTS[:3]]
    assert len(frames) == 6
    assert all(value in ([r[4:] for r in RESPONSES[:3]], [r[4:] for r in REQUESTS[:3]]) for value in frames.values())
