"""Kafka framing of a byte stream, and resynchronisation after gaps."""
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.replay.framing import REQUEST, RESPONSE, Frame, Framer
from tools.replay.problems import Problem


def request(correlation_id: int, body: bytes = b"", api_key: int = 3, version: int = 12) -> bytes:
    """A framed request: size, api key, version, correlation id, client id, body."""
    frame = struct.pack(">hhih", api_key, version, correlation_id, 6) + b"replay" + body
    return struct.pack(">i", len(frame)) + frame


def response(correlation_id: int, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def body_of(framed: bytes) -> bytes:
    return framed[4:]


def run(framer: Framer, pieces) -> list:
    """Feed data (bytes) and gaps (ints); the events, finish included, with timestamps dropped."""
    out = []
    for ts, piece in enumerate(pieces):
        out += framer.gap(ts, piece) if isinstance(piece, int) else framer.feed(ts, piece)
    out += framer.finish()
    return [e.data if isinstance(e, Frame) else (e.kind, e.offset, e.size) for e in out]


REQUESTS = [request(i, bytes(range(i * 7 % 50))) for i in range(1, 7)]
STREAM = b"".join(REQUESTS)


def offset_of(index: int) -> int:
    return sum(map(len, REQUESTS[:index]))


def test_frames_come_out_whole_wherever_the_stream_is_split():
    expected = [body_of(r) for r in REQUESTS]
    for cut in range(len(STREAM) + 1):
        assert run(Framer(REQUEST), [STREAM[:cut], STREAM[cut:]]) == expected
    assert run(Framer(REQUEST), [STREAM[i : i + 1] for i in range(len(STREAM))]) == expected


def test_frame_timestamp_is_when_its_last_byte_arrived():
    framer = Framer(REQUEST)
    assert framer.feed(10, REQUESTS[0][:5]) == []
    assert framer.feed(20, REQUESTS[0][5:] + REQUESTS[1][:3]) == [Frame(20, body_of(REQUESTS[0]))]


def test_large_frame_across_many_pieces():
    big = request(1, bytes(300_000))
    pieces = [big[i : i + 1460] for i in range(0, len(big), 1460)] + [REQUESTS[2]]
    assert run(Framer(REQUEST), pieces) == [body_of(big), body_of(REQUESTS[2])]


def test_gap_inside_a_frame_of_known_size_keeps_the_framing():
    damaged = REQUESTS[1]
    pieces = [REQUESTS[0] + damaged[:20], 10, damaged[30:] + b"".join(REQUESTS[2:])]
    assert run(Framer(REQUEST), pieces) == [
        body_of(REQUESTS[0]),
        ("damaged_frame", offset_of(1), len(damaged)),
        *[body_of(r) for r in REQUESTS[2:]],
    ]


def test_several_gaps_inside_one_frame():
    damaged = request(2, bytes(100))
    pieces = [REQUESTS[0] + damaged[:20], 10, damaged[30:50], 5, damaged[55:] + REQUESTS[2]]
    assert run(Framer(REQUEST), pieces) == [
        body_of(REQUESTS[0]),
        ("damaged_frame", len(REQUESTS[0]), len(damaged)),
        body_of(REQUESTS[2]),
    ]


def test_gap_past_the_end_of_a_frame_resyncs_at_the_next_provable_start():
    r1, r2, r3 = REQUESTS[1], REQUESTS[2], REQUESTS[3]
    # The gap hides the end of r1 and the first 6 bytes of r2: r2's tail cannot be framed.
    pieces = [REQUESTS[0] + r1[:10], len(r1) - 10 + 6, r2[6:] + b"".join(REQUESTS[3:])]
    assert run(Framer(REQUEST), pieces) == [
        body_of(REQUESTS[0]),
        ("damaged_frame", offset_of(1), len(r1)),
        ("resync", offset_of(3), len(r2) - 6),
        *[body_of(r) for r in REQUESTS[3:]],
    ]
    assert r3 == REQUESTS[3]


def test_gap_exactly_over_a_frame_resumes_on_the_next_without_skipping():
    pieces = [REQUESTS[0], len(REQUESTS[1]), b"".join(REQUESTS[2:])]
    assert run(Framer(REQUEST), pieces) == [
        body_of(REQUESTS[0]),
        ("resync", offset_of(2), 0),
        *[body_of(r) for r in REQUESTS[2:]],
    ]


def test_gap_that_cuts_a_size_prefix_loses_its_bytes():
    pieces = [REQUESTS[0] + REQUESTS[1][:2], len(REQUESTS[1]) - 2, b"".join(REQUESTS[2:])]
    assert run(Framer(REQUEST), pieces) == [
        body_of(REQUESTS[0]),
        ("resync", offset_of(2), 2),
        *[body_of(r) for r in REQUESTS[2:]],
    ]


def test_stream_joined_mid_frame():
    pieces = [STREAM[7:]]
    assert run(Framer(REQUEST, synced=False), pieces) == [
        ("resync", offset_of(1) - 7, len(REQUESTS[0]) - 7),
        *[body_of(r) for r in REQUESTS[1:]],
    ]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 10_000])
def test_resync_result_does_not_depend_on_how_data_arrives(chunk):
    data = STREAM[7:]
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    assert run(Framer(REQUEST, synced=False), pieces) == run(Framer(REQUEST, synced=False), [data])


def test_a_plausible_header_inside_a_frame_is_not_taken_for_a_boundary():
    # A body that holds a header-shaped run; the frame it would make ends in the middle of
    # the next real frame, where no plausible header follows.
    decoy = struct.pack(">ihhih", 30, 1, 2, 50, -1)
    first = request(1, b"\xff" * 3 + decoy + b"\xff" * 40)
    stream = first + request(2, bytes(60)) + request(3, bytes(10)) + request(4)
    result = run(Framer(REQUEST, synced=False), [stream[1:]])
    assert result[0] == ("resync", len(first) - 1, len(first) - 1)
    assert result[1:] == [body_of(request(2, bytes(60))), body_of(request(3, bytes(10))), body_of(request(4))]


def test_correlation_ids_must_rise_along_the_proof():
    # Two frames in a row but with a falling correlation id: not proof of a boundary.
    stream = request(9, b"\xff" * 5) + request(4, b"\xff" * 5) + request(10) + request(11)
    result = run(Framer(REQUEST, synced=False), [b"\xff" + stream])
    assert result[0] == ("resync", len(request(9, b"\xff" * 5)) + 1, len(request(9, b"\xff" * 5)) + 1)
    assert result[1:] == [body_of(request(4, b"\xff" * 5)), body_of(request(10)), body_of(request(11))]


def test_a_last_frame_that_ends_with_the_data_is_proven_at_the_end():
    framer = Framer(REQUEST, synced=False)
    assert framer.feed(0, b"\xff" * 5 + REQUESTS[0]) == []
    assert [(e.kind, e.offset, e.size) if isinstance(e, Problem) else e.data for e in framer.finish()] == [
        ("resync", 5, 5),
        body_of(REQUESTS[0]),
    ]


def test_data_before_a_gap_is_judged_against_the_gap():
    pieces = [b"\xff" * 3 + REQUESTS[0] + REQUESTS[1], 50, b"\xff" * 9]
    assert run(Framer(REQUEST, synced=False), pieces) == [
        ("resync", 3, 3),
        body_of(REQUESTS[0]),
        body_of(REQUESTS[1]),
        ("unsynchronised", 3 + len(REQUESTS[0]) + len(REQUESTS[1]) + 50, 9),
    ]


def test_implausible_size_loses_sync_and_finds_the_next_frame():
    garbage = struct.pack(">i", -5) + b"\x7f" * 20
    pieces = [REQUESTS[0] + garbage + b"".join(REQUESTS[1:])]
    assert run(Framer(REQUEST), pieces) == [
        body_of(REQUESTS[0]),
        ("bad_size", len(REQUESTS[0]), 4),
        ("resync", len(REQUESTS[0]) + len(garbage), len(garbage)),
        *[body_of(r) for r in REQUESTS[1:]],
    ]


def test_frames_above_the_maximum_size_are_implausible():
    framer = Framer(REQUEST, max_frame_size=1000)
    assert [(e.kind, e.offset) for e in framer.feed(0, request(1, bytes(2000))[:100])] == [("bad_size", 0)]


def test_response_stream_resync():
    responses = [response(i, bytes(range(i * 11 % 40))) for i in range(1, 8)]
    stream = b"".join(responses)
    pieces = [stream[:30], 25, stream[55:]]
    end_of_damaged = len(responses[0]) + len(responses[1]) + len(responses[2])
    result = run(Framer(RESPONSE), pieces)
    assert result[0] == body_of(responses[0])
    assert result[1] == ("damaged_frame", len(responses[0]), len(responses[1]))
    skipped = end_of_damaged - 55
    assert result[2] == ("resync", end_of_damaged, skipped)
    assert result[3:] == [body_of(r) for r in responses[3:]]


def test_stream_ending_inside_a_frame():
    assert run(Framer(REQUEST), [STREAM[:-5]]) == [
        *[body_of(r) for r in REQUESTS[:-1]],
        ("incomplete_frame", offset_of(5), len(REQUESTS[-1]) - 5),
    ]


def test_stream_that_never_resyncs():
    assert run(Framer(REQUEST, synced=False), [b"\xff" * 100, 10, b"\xee" * 20]) == [("unsynchronised", 0, 120)]


def test_kind_is_checked():
    with pytest.raises(ValueError):
        Framer("both")


BODY_BYTES = st.binary(max_size=300).map(lambda b: bytes(0xC0 | x for x in b))


@settings(max_examples=300, deadline=None)
@given(
    first_id=st.integers(0, 2**31 - 100),
    bodies=st.lists(BODY_BYTES, min_size=3, max_size=12),
    gap_spec=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 400)), max_size=3),
    chunk=st.integers(1, 2000),
)
def test_gaps_never_produce_wrong_frames_and_framing_recovers(first_id, bodies, gap_spec, chunk):
    frames = [request(first_id + i, body) for i, body in enumerate(bodies)]
    starts = [sum(map(len, frames[:i])) for i in range(len(frames) + 1)]
    stream = b"".join(frames)
    # Non-overlapping gaps, each hiding `length` bytes at a relative position.
    gaps, at = [], 0
    for where, length in sorted(gap_spec):
        begin = max(at, int(where * len(stream)))
        end = min(len(stream), begin + length)
        if begin < end:
            gaps.append((begin, end))
            at = end + 1
    pieces, at = [], 0
    for begin, end in gaps + [(len(stream), len(stream))]:
        pieces += [stream[i : min(i + chunk, begin)] for i in range(at, begin, chunk)]
        if end > begin:
            pieces.append(end - begin)
        at = end
    result = run(Framer(REQUEST), pieces)

    emitted = [r for r in result if isinstance(r, bytes)]
    bodies_in_order = [body_of(f) for f in frames]
    positions = [bodies_in_order.index(e) for e in emitted]
    assert positions == sorted(set(positions)), "frames out of order, repeated or invented"
    for i, frame in enumerate(frames):
        untouched = all(end <= starts[i] or begin >= starts[i + 1] for begin, end in gaps)
        before_any_gap = not gaps or starts[i + 1] <= gaps[0][0]
        after_last_gap = gaps and starts[i] >= gaps[-1][1]
        if untouched and (before_any_gap or after_last_gap):
            assert body_of(frame) in emitted, f"frame {i} lost"


@pytest.mark.parametrize("kind", [REQUEST, RESPONSE])
def test_random_bytes_never_prove_a_boundary(kind):
    data = random.Random(7).randbytes(2 << 20)
    pieces = [data[i : i + 1460] for i in range(0, len(data), 1460)]
    assert run(Framer(kind, synced=False), pieces) == [("unsynchronised", 0, len(data))]


def test_correlation_ids_far_apart_prove_nothing():
    stream = request(1, b"\xff" * 5) + request(1 + 2**20, b"\xff" * 5) + request(2 + 2**20)
    result = run(Framer(REQUEST, synced=False), [b"\xff" + stream])
    first = len(request(1, b"\xff" * 5)) + 1
    assert result == [("resync", first, first), body_of(request(1 + 2**20, b"\xff" * 5)), body_of(request(2 + 2**20))]


def whole(frame: bytes) -> bool:
    """A `proves` check that reads only the test's own requests whole."""
    return frame in {body_of(r) for r in REQUESTS}


def test_a_frame_read_whole_proves_its_start_though_garbage_follows():
    stream = REQUESTS[0] + b"\xff" * 20
    # The next header is garbage, so only reading the frame whole proves it.
    assert run(Framer(REQUEST, synced=False), [stream]) == [("unsynchronised", 0, len(stream))]
    assert run(Framer(REQUEST, synced=False, proves=whole), [stream]) == [
        ("resync", 0, 0),
        body_of(REQUESTS[0]),
        ("bad_size", len(REQUESTS[0]), 4),
        ("unsynchronised", len(REQUESTS[0]), 20),
    ]


def test_after_a_bad_size_a_frame_read_whole_resumes_the_framing():
    stream = b"\xff" * 12 + REQUESTS[0] + b"\xff" * 20
    assert run(Framer(REQUEST), [stream]) == [("bad_size", 0, 4), ("unsynchronised", 0, len(stream))]
    assert run(Framer(REQUEST, proves=whole), [stream]) == [
        ("bad_size", 0, 4),
        ("resync", 12, 12),
        body_of(REQUESTS[0]),
        ("bad_size", 12 + len(REQUESTS[0]), 4),
        ("unsynchronised", 12 + len(REQUESTS[0]), 20),
    ]


def test_an_earlier_start_still_undecided_wins_over_a_later_one_proven():
    # The first frame's body holds a header-shaped chain that proves itself before the next
    # real header arrives; the real start, decided a piece later, must win.
    decoy = response(1, b"\x00" * 4) + response(2)
    first = response(7, decoy)
    second = response(8, b"\x00" * 3)
    pieces = [first, second]
    assert run(Framer(RESPONSE, synced=False), pieces) == [("resync", 0, 0), body_of(first), body_of(second)]
