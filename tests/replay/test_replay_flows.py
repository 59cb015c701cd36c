"""Which flows are Kafka, and what a misbehaving client's bad frames do to a Kafka flow: each
capture is judged by the pure-Python decoder, compared with tshark's Kafka dissector where
tshark is installed, and a few go through the Spark job."""
from __future__ import annotations

import collections
import struct

import pytest

from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from tests.replay import kafka_frames as k
from tests.replay import tshark
from captures import pcapng_writer
from tools.replay import job
from tools.replay.capture import Packet
from tools.replay.decode import validate
from tools.replay.flows import PROBE_LIMIT, request_parses, request_reads
from captures.formats import TCP_ACK, TCP_PSH
from tools.replay.packet import decode_segment

GARBAGE = b"\xff" * 12  # a size prefix of -1 and 8 more bytes: no frame at all
PORT = k.SERVER[1]
API_VERSIONS_REQUEST = k.api_versions()[0]
REGISTRATION = k.registration(1, broker_id=1, epoch=10)


def frames_of(result) -> list[tuple]:
    return [(f.api_name, f.direction, f.status) for f in result.frames]


def violations_of(result) -> list[tuple]:
    """(rule, offset, frame, the problem's kind for framing errors) of every violation."""
    return [(v.rule, v.offset, v.frame, v.detail.split(": ")[1] if v.rule == "framing_error" else None)
            for v in result.violations]


def segment(packet: Packet):
    return decode_segment(packet.link_type, packet.data, packet.orig_len)


def client_packet(timestamp_ns: int, seq: int, ack: int, payload: bytes) -> Packet:
    frame = pcapng_writer.tcp_packet(*k.CLIENT, *k.SERVER, seq, ack, TCP_ACK | TCP_PSH, payload)
    return Packet(timestamp_ns, 1, frame, len(frame))


def without_handshake(data: bytes, first: int = 3) -> bytes:
    """The capture from packet `first` on: the writer's SYN, SYN-ACK and ACK come first."""
    return k.rewrite(k.packets(data)[first:])


def retransmitted_and_overlapping() -> bytes:
    """Every client segment sent twice, and between two client segments one more that covers
    the second half of the first and the first half of the next."""
    packets = k.packets(k.capture([k.api_versions(), k.metadata(2), k.metadata(3)], mss=40))
    out = []
    for packet, following in zip(packets, packets[1:] + [None]):
        out.append(packet)
        this = segment(packet)
        if not this.payload or this.dport != PORT:
            continue
        out.append(packet)
        after = segment(following) if following is not None else None
        if after is not None and after.payload and after.dport == PORT:
            half = len(this.payload) // 2
            out.append(client_packet(packet.timestamp_ns, this.seq + half, this.ack,
                                     this.payload[half:] + after.payload[:half]))
    return k.rewrite(out)


CAPTURES = {
    "valid_then_garbage": lambda: k.capture([k.api_versions(), (GARBAGE, None)]),
    "valid_then_garbage_without_syn": lambda: without_handshake(k.capture([k.api_versions(), (GARBAGE, None)])),
    "garbage_then_valid": lambda: k.capture([(GARBAGE, None), k.api_versions(), k.metadata(2)]),
    "framed_garbage_between_valid": lambda: k.capture([k.api_versions(), (k.raw_frame(GARBAGE), None), k.metadata(2)]),
    "one_byte_segments": lambda: k.capture([k.api_versions(), k.metadata(2)], mss=1),
    "without_syn": lambda: without_handshake(k.capture([k.api_versions(), k.metadata(2), k.metadata(3)])),
    # Also without the registration request's first 40 bytes: joined inside a frame.
    "joined_mid_frame": lambda: without_handshake(
        k.capture([REGISTRATION, k.metadata(2), k.metadata(3), k.metadata(4)], mss=40), 4),
    "retransmitted_and_overlapping": retransmitted_and_overlapping,
    "only_garbage": lambda: k.capture([(GARBAGE, None), (bytes(range(256)) * 4, b"\xee" * 100)]),
}


@pytest.fixture(scope="module")
def results() -> dict:
    return {name: validate(build()) for name, build in CAPTURES.items()}


@pytest.mark.parametrize("name", ["valid_then_garbage", "valid_then_garbage_without_syn"])
def test_garbage_after_a_request_is_a_framing_error_in_a_kafka_flow(results, name):
    result = results[name]
    assert [f.kafka for f in result.flows] == [True]
    assert frames_of(result) == [("ApiVersions", "request", "ok"), ("ApiVersions", "response", "ok")]
    at = len(API_VERSIONS_REQUEST)
    assert violations_of(result) == [("framing_error", at, None, "bad_size"),
                                     ("framing_error", at, None, "unsynchronised")]
    assert result.flows[0].requests == 1 and result.flows[0].client == f"{k.CLIENT[0]}:{k.CLIENT[1]}"


def test_garbage_before_the_first_request_is_skipped_and_the_flow_is_kafka(results):
    result = results["garbage_then_valid"]
    assert [f.kafka for f in result.flows] == [True]
    assert frames_of(result) == [("ApiVersions", "request", "ok"), ("ApiVersions", "response", "ok"),
                                 ("Metadata", "request", "ok"), ("Metadata", "response", "ok")]
    # The bad size prefix at 0, then framing resumes right after the 12 bytes.
    assert violations_of(result) == [("framing_error", 0, None, "bad_size"),
                                     ("framing_error", len(GARBAGE), None, "resync")]
    assert result.violations[1].detail.endswith("after skipping 12 bytes since offset 0")


def test_a_garbage_frame_is_a_decode_error_on_that_frame(results):
    result = results["framed_garbage_between_valid"]
    assert frames_of(result) == [("ApiVersions", "request", "ok"), ("ApiVersions", "response", "ok"),
                                 (None, "request", "decode_error"),
                                 ("Metadata", "request", "ok"), ("Metadata", "response", "ok")]
    # Nothing answers garbage, so the Metadata answer that follows is not out of order.
    assert violations_of(result) == [("decode_error", 0, 2, None)]
    assert "API key -1" in result.violations[0].detail


def test_a_frame_split_into_one_byte_segments_reads_as_if_whole(results):
    whole = validate(k.capture([k.api_versions(), k.metadata(2)]))
    result = results["one_byte_segments"]
    assert result.violations == []
    assert result.frames == whole.frames


def test_a_flow_without_syn_reads_from_its_first_byte_when_a_frame_proves_it(results):
    whole = validate(k.capture([k.api_versions(), k.metadata(2), k.metadata(3)]))
    result = results["without_syn"]
    assert result.violations == []
    # Unsynchronised framers hold each frame until it is proven: the order across directions
    # shifts, the frames do not.
    assert sorted(frames_of(result)) == sorted(frames_of(whole))
    assert result.flows[0].client == f"{k.CLIENT[0]}:{k.CLIENT[1]}"


def test_a_flow_joined_inside_a_frame_is_read_from_the_first_provable_boundary(results):
    result = results["joined_mid_frame"]
    skipped = len(REGISTRATION[0]) - 40
    assert violations_of(result) == [("framing_error", skipped, None, "resync"),
                                     ("response_without_request", 0, 1, None)]
    assert result.violations[0].detail.endswith(f"after skipping {skipped} bytes since offset 0")
    requests = [f for f in frames_of(result) if f[1] == "request"]
    assert requests == [("Metadata", "request", "ok")] * 3
    # The registration's answer is framed, though the request it answers was not seen.
    assert [f.correlation_id for f in result.frames if f.direction == "response"] == [1, 2, 3, 4]


def test_retransmitted_and_overlapping_segments_are_read_once(results):
    clean = validate(k.capture([k.api_versions(), k.metadata(2), k.metadata(3)], mss=40))
    result = results["retransmitted_and_overlapping"]
    assert result.violations == []
    assert result.frames == clean.frames


def test_a_flow_of_only_garbage_is_not_kafka(results):
    result = results["only_garbage"]
    assert [f.kafka for f in result.flows] == [False]
    assert result.frames == []
    assert [(v.rule, v.detail) for v in result.violations] == [
        ("non_kafka_flow", "its bytes do not parse as Kafka requests")]


def test_a_plausible_header_over_a_body_that_does_not_parse_is_not_kafka():
    # An ApiVersions v3 header whose body is 0xff: the header alone proves nothing.
    header = k.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, 1)[4:25]
    result = validate(k.capture([(k.raw_frame(header + b"\xff" * 20), None)]))
    assert [f.kafka for f in result.flows] == [False] and result.frames == []


def test_a_long_flow_without_a_request_is_given_up_at_the_probe_limit():
    result = validate(k.capture([(b"\xee" * 1000, None)] * (PROBE_LIMIT // 1000 + 2)))
    assert [f.kafka for f in result.flows] == [False]
    assert result.violations[0].detail.startswith("no Kafka request found in its first ")


def test_which_frames_read_as_requests():
    frame = API_VERSIONS_REQUEST[4:]
    assert request_reads(frame) is True and request_parses(frame)
    assert request_reads(frame + b"\x00") is False  # a body must end where its frame does
    assert request_reads(frame[:-1]) is False
    assert request_reads(GARBAGE) is False
    # An API the codecs leave out (JoinGroup v9) reads as far as its header, which proves no boundary.
    join = struct.pack(">hhih", 11, 9, 5, 4) + b"join" + b"\x99" * 30
    assert request_reads(join) is None and not request_parses(join)
    assert request_reads(struct.pack(">hhih", 11, 9, -5, 4) + b"join") is False


def tshark_and_ours(name: str, result, tmp_path) -> tuple[tshark.Reading, tshark.Reading]:
    path = tmp_path / f"{name}.pcapng"
    path.write_bytes(CAPTURES[name]())
    ours = tshark.Reading(collections.Counter(f.api_key for f in result.frames if f.direction == "request"),
                          collections.Counter(f.direction + "s" for f in result.frames))
    return tshark.read(path, PORT), ours


@pytest.mark.parametrize("name", [name for name in CAPTURES if name != "joined_mid_frame"])
def test_tshark_finds_the_same_kafka_messages(results, name, tmp_path):
    tshark.require()
    theirs, ours = tshark_and_ours(name, results[name], tmp_path)
    assert theirs == ours


def test_tshark_finds_no_more_in_a_flow_joined_mid_frame(results, tmp_path):
    # tshark takes the first byte it sees for a frame start, reads a length from inside the
    # request it joined, and waits for that frame to the end of the stream; the responses,
    # seen from a frame start, it reads as we do.
    tshark.require()
    theirs, ours = tshark_and_ours("joined_mid_frame", results["joined_mid_frame"], tmp_path)
    assert theirs.messages["responses"] == ours.messages["responses"] == 4
    assert theirs.requests_per_api <= ours.requests_per_api == collections.Counter({3: 3})


def test_the_spark_job_keeps_the_good_frames_of_a_flow_with_bad_ones(spark, tmp_path):
    names = ["valid_then_garbage_without_syn", "garbage_then_valid", "only_garbage"]
    paths = {}
    for name in names:
        paths[name] = str(tmp_path / f"{name}.pcapng")
        (tmp_path / f"{name}.pcapng").write_bytes(CAPTURES[name]())
    out = tmp_path / "out"

    figures = job.validate(list(paths.values()), str(out), context=spark.sparkContext)

    frames = spark.read.parquet(str(out / "frames"))
    violations = spark.read.parquet(str(out / "violations"))
    flows = spark.read.parquet(str(out / "flows"))
    by_capture = collections.defaultdict(list)
    for row in frames.select("capture", "api_name", "direction", "status").collect():
        by_capture[row.capture].append((row.api_name, row.direction, row.status))
    assert sorted(by_capture[paths["valid_then_garbage_without_syn"]]) == [
        ("ApiVersions", "request", "ok"), ("ApiVersions", "response", "ok")]
    assert len(by_capture[paths["garbage_then_valid"]]) == 4
    assert paths["only_garbage"] not in by_capture
    found = {(r.capture, r.rule, r.offset) for r in violations.select("capture", "rule", "offset").collect()}
    assert (paths["valid_then_garbage_without_syn"], "framing_error", len(API_VERSIONS_REQUEST)) in found
    assert (paths["garbage_then_valid"], "framing_error", 0) in found
    assert (paths["only_garbage"], "non_kafka_flow", None) in found
    assert {r.capture: r.kafka for r in flows.select("capture", "kafka").collect()} == {
        paths["valid_then_garbage_without_syn"]: True, paths["garbage_then_valid"]: True, paths["only_garbage"]: False}
    assert figures["totals"]["kafka_flows"] == 2
