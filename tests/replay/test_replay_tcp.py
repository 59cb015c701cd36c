"""TCP reassembly: order, duplicates, overlaps, holes, truncation, wrap-around, endings."""
from captures.formats import TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN
from tools.replay.packet import Segment
from tools.replay.tcp import FlowKey, Reassembler, StreamData, StreamEnd, StreamGap, StreamStart

C, S = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
CLIENT = FlowKey(C, 50000, S, 9092)
SERVER = CLIENT.reversed()
DATA = bytes(range(256)) * 4


def c(seq, payload=b"", flags=TCP_ACK, ack=0, missing=0):
    return Segment(C, 50000, S, 9092, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, flags, payload, missing)


def s(seq, payload=b"", flags=TCP_ACK, ack=0, missing=0):
    return Segment(S, 9092, C, 50000, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, flags, payload, missing)


def handshake(client_isn=1000, server_isn=5000):
    return [
        c(client_isn, flags=TCP_SYN),
        s(server_isn, flags=TCP_SYN | TCP_ACK, ack=client_isn + 1),
        c(client_isn + 1, ack=server_isn + 1),
    ]


def run(segments, **options):
    reassembler = Reassembler(**options)
    events = []
    for ts, segment in enumerate(segments):
        events += reassembler.feed(ts, segment)
    events += reassembler.finish()
    return reassembler, events


def pieces(events, key):
    """The stream of `key` as data runs and ("gap", size) markers, checking offsets add up."""
    out, offset = [], 0
    for event in events:
        if getattr(event, "key", None) != key:
            continue
        if isinstance(event, StreamData):
            assert event.offset == offset
            offset += len(event.data)
            if out and isinstance(out[-1], bytes):
                out[-1] += event.data
            else:
                out.append(event.data)
        elif isinstance(event, StreamGap):
            assert event.offset == offset
            offset += event.size
            out.append(("gap", event.size))
    return out


def ends(events):
    return [(e.key, e.offset, e.reason) for e in events if isinstance(e, StreamEnd)]


def test_handshake_in_order_data_and_fin():
    segments = handshake() + [
        c(1001, DATA[:100], flags=TCP_ACK | TCP_PSH, ack=5001),
        s(5001, DATA[:10], ack=1101),
        c(1101, DATA[100:300], ack=5011),
        c(1301, flags=TCP_FIN | TCP_ACK, ack=5011),
        s(5011, flags=TCP_FIN | TCP_ACK, ack=1302),
        c(1302, ack=5012),
    ]
    reassembler, events = run(segments)
    starts = [e for e in events if isinstance(e, StreamStart)]
    assert starts == [StreamStart(CLIENT, 0, "client", True), StreamStart(SERVER, 1, "server", True)]
    assert pieces(events, CLIENT) == [DATA[:300]]
    assert pieces(events, SERVER) == [DATA[:10]]
    assert ends(events) == [(CLIENT, 300, "fin"), (SERVER, 10, "fin")]
    assert reassembler.stats.gap_bytes == 0 and reassembler.stats.duplicate_bytes == 0


def test_retransmissions_are_dropped():
    segments = handshake() + [c(1001, DATA[:50]), c(1001, DATA[:50]), c(1051, DATA[50:80]), c(1001, DATA[:80])]
    reassembler, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:80]]
    assert reassembler.stats.duplicate_bytes == 50 + 80


def test_overlapping_segments_are_trimmed():
    segments = handshake() + [c(1001, DATA[:40]), c(1021, DATA[20:70]), c(1061, DATA[60:100])]
    reassembler, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:100]]
    assert reassembler.stats.duplicate_bytes == 20 + 10


def test_out_of_order_segments_wait_for_the_hole_to_fill():
    reassembler = Reassembler()
    for segment in handshake():
        reassembler.feed(0, segment)
    assert reassembler.feed(1, c(1041, DATA[40:60])) == []
    assert reassembler.feed(2, c(1021, DATA[20:40])) == []
    filled = reassembler.feed(3, c(1001, DATA[:20]))
    assert [(e.offset, e.data) for e in filled] == [(0, DATA[:20]), (20, DATA[20:40]), (40, DATA[40:60])]
    assert reassembler.stats.out_of_order_segments == 2


def test_reordered_overlapping_pieces_deliver_each_byte_once():
    segments = handshake() + [c(1061, DATA[60:90]), c(1031, DATA[30:70]), c(1011, DATA[10:35]), c(1001, DATA[:15])]
    _, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:90]]


def test_a_hole_the_peer_acknowledged_becomes_a_gap_at_once():
    reassembler = Reassembler()
    for segment in handshake():
        reassembler.feed(0, segment)
    reassembler.feed(1, c(1001, DATA[:100]))
    assert reassembler.feed(2, c(1201, DATA[200:300])) == []  # 1101..1200 never captured
    released = reassembler.feed(3, s(5001, ack=1301))
    assert released == [StreamGap(CLIENT, 3, 100, 100), StreamData(CLIENT, 3, 200, DATA[200:300])]
    assert reassembler.stats.gap_bytes == 100


def test_an_unacknowledged_hole_becomes_a_gap_at_the_end():
    segments = handshake() + [c(1001, DATA[:100]), c(1151, DATA[150:200])]
    reassembler, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:100], ("gap", 50), DATA[150:200]]
    assert ends(events) == [(CLIENT, 200, "eof"), (SERVER, 0, "eof")]


def test_snaplen_truncated_segment_is_data_then_a_gap():
    segments = handshake() + [c(1001, DATA[:60], missing=940), c(2001, DATA[:30])]
    reassembler, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:60], ("gap", 940), DATA[:30]]
    assert reassembler.stats.gap_bytes == 940


def test_truncated_segment_out_of_order_keeps_its_hole():
    segments = handshake() + [c(1101, DATA[100:120], missing=80), c(1001, DATA[:100]), c(1201, DATA[200:210])]
    _, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:120], ("gap", 80), DATA[200:210]]


def test_sequence_numbers_wrap_around():
    isn = 2**32 - 50
    segments = handshake(client_isn=isn) + [
        c(isn + 1, DATA[:30]),
        c(isn + 61, DATA[60:100]),  # past the wrap, ahead of its turn
        c(isn + 31, DATA[30:60]),  # crosses the wrap
        c(isn + 1, DATA[:10]),  # an old retransmission from before the wrap
    ]
    reassembler, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:100]]
    assert reassembler.stats.duplicate_bytes == 10


def test_flow_joined_mid_stream():
    segments = [c(777_000, DATA[:40], ack=9), s(9, DATA[:5], ack=777_040), c(777_040, DATA[40:60], ack=14)]
    _, events = run(segments)
    starts = [e for e in events if isinstance(e, StreamStart)]
    assert starts == [StreamStart(CLIENT, 0, None, False), StreamStart(SERVER, 1, None, False)]
    assert pieces(events, CLIENT) == [DATA[:60]]
    assert pieces(events, SERVER) == [DATA[:5]]


def test_missed_syn_is_recovered_from_the_syn_ack():
    segments = [s(5000, flags=TCP_SYN | TCP_ACK, ack=1001), c(1001, DATA[:10], ack=5001)]
    _, events = run(segments)
    starts = [e for e in events if isinstance(e, StreamStart)]
    assert starts == [StreamStart(CLIENT, 0, "client", True), StreamStart(SERVER, 0, "server", True)]
    assert pieces(events, CLIENT) == [DATA[:10]]


def test_bytes_lost_before_a_fin_are_a_gap_sized_by_the_fin():
    segments = handshake() + [c(1001, DATA[:10]), c(1051, flags=TCP_FIN | TCP_ACK)]
    _, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:10], ("gap", 40)]
    assert ends(events)[0] == (CLIENT, 50, "fin")


def test_out_of_order_fin_ends_the_stream_once_the_data_arrives():
    reassembler = Reassembler()
    for segment in handshake():
        reassembler.feed(0, segment)
    assert reassembler.feed(1, c(1011, DATA[10:20], flags=TCP_FIN | TCP_ACK)) == []
    events = reassembler.feed(2, c(1001, DATA[:10]))
    assert events == [
        StreamData(CLIENT, 2, 0, DATA[:10]),
        StreamData(CLIENT, 2, 10, DATA[10:20]),
        StreamEnd(CLIENT, 2, 20, "fin"),
    ]


def test_reset_ends_both_directions_and_releases_held_data():
    segments = handshake() + [c(1001, DATA[:10]), c(1031, DATA[30:40]), s(5001, DATA[:7]), s(5008, flags=TCP_RST)]
    _, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:10], ("gap", 20), DATA[30:40]]
    assert sorted(ends(events)) == sorted([(CLIENT, 40, "rst"), (SERVER, 7, "rst")])


def test_late_segments_of_an_ended_connection_are_ignored():
    segments = handshake() + [
        c(1001, DATA[:10]),
        c(1011, flags=TCP_FIN | TCP_ACK),
        s(5001, flags=TCP_FIN | TCP_ACK, ack=1012),
        c(1001, DATA[:10]),  # a late retransmission
    ]
    reassembler, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:10]]
    assert [e for e in events if isinstance(e, StreamStart)][2:] == []
    assert reassembler.stats.ignored_segments == 1


def test_a_new_syn_on_the_same_ports_starts_a_new_connection():
    segments = handshake() + [c(1001, DATA[:10])] + handshake(client_isn=90_000, server_isn=7) + [c(90_001, DATA[:5])]
    _, events = run(segments)
    assert ends(events) == [(CLIENT, 10, "reused"), (SERVER, 0, "reused"), (CLIENT, 5, "eof"), (SERVER, 0, "eof")]
    assert [e.from_syn for e in events if isinstance(e, StreamStart)] == [True] * 4


def test_retransmitted_syn_is_not_a_new_connection():
    segments = handshake() + [c(1000, flags=TCP_SYN), c(1001, DATA[:10])]
    _, events = run(segments)
    assert len([e for e in events if isinstance(e, StreamStart)]) == 2
    assert pieces(events, CLIENT) == [DATA[:10]]


def test_keepalive_probe_is_not_data():
    segments = handshake() + [c(1001, DATA[:10]), c(1010, b"\0"), c(1011, DATA[10:20])]
    _, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:20]]


def test_buffer_limit_gives_up_the_oldest_hole():
    reassembler = Reassembler(max_buffer=100)
    for segment in handshake():
        reassembler.feed(0, segment)
    assert reassembler.feed(1, c(1011, DATA[10:70])) == []
    events = reassembler.feed(2, c(1071, DATA[70:130]))
    assert events == [StreamGap(CLIENT, 2, 0, 10), StreamData(CLIENT, 2, 10, DATA[10:70]), StreamData(CLIENT, 2, 70, DATA[70:130])]


def test_connections_are_kept_apart():
    other = FlowKey(C, 50001, S, 9092)
    segments = handshake() + [
        Segment(C, 50001, S, 9092, 70, 0, TCP_ACK, DATA[:3], 0),
        c(1001, DATA[:4]),
        Segment(C, 50001, S, 9092, 73, 0, TCP_ACK, DATA[3:6], 0),
    ]
    _, events = run(segments)
    assert pieces(events, CLIENT) == [DATA[:4]]
    assert pieces(events, other) == [DATA[:6]]
