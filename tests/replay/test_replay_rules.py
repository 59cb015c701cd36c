"""Each rule, raised by the fault it names, through the pure-Python decoder."""
import struct

import pytest

from protocol.generated.messages.metadata_request import MetadataRequest
from tests.replay import kafka_frames as k
from tools.replay.decode import validate
from tools.replay.packet import decode_segment
from tools.replay.rules import RULES

PAYLOAD_AT = 14 + 20 + 20  # the writer's packets: Ethernet, IPv4 and TCP headers without options


def rules_of(result):
    return sorted({v.rule for v in result.violations})


def frames_of(result):
    return [(f.api_name, f.direction, f.status) for f in result.frames]


def data_packets(data: bytes, from_client: bool):
    """(index, packet) of the packets carrying payload in one direction."""
    out = []
    for i, p in enumerate(k.packets(data)):
        segment = decode_segment(p.link_type, p.data, p.orig_len)
        if segment.payload and (segment.dport == k.SERVER[1]) == from_client:
            out.append((i, p))
    return out


def test_a_clean_conversation_breaks_no_rule():
    result = validate(k.capture([k.api_versions(), k.metadata(2), k.fetch(3, k.record_batch() + k.record_batch(3)),
                                 k.registration(4, 1, 10), k.heartbeat(5, 1, 10)]))
    assert result.violations == []
    assert [f.status for f in result.frames] == ["ok"] * 10
    responses = [f for f in result.frames if f.direction == "response"]
    assert all(f.latency_ms == pytest.approx(0.5) for f in responses)
    assert [f.client_id for f in responses] == ["replay-test"] * 5
    (flow,) = result.flows
    assert (flow.kafka, flow.requests, flow.responses, flow.unanswered, flow.end_reason) == (True, 5, 5, 0, "fin")


def test_every_rule_has_a_known_severity():
    assert {rule.severity for rule in RULES.values()} <= {"error", "warning", "info"}


def test_a_flipped_byte_in_a_body_is_a_decode_error_with_its_offset():
    data = bytearray(k.capture([k.api_versions(), k.metadata(2)]))
    index, packet = data_packets(bytes(data), from_client=True)[0]
    # The ApiVersions v3 request: size(4), then at frame offset 22, after the header (8),
    # client id (2+11) and tags (1), the compact length of client_software_name, now far
    # longer than the frame.
    at = bytes(data).index(packet.data) + PAYLOAD_AT + 4 + 22
    data[at] = 0x7F
    result = validate(bytes(data))
    assert rules_of(result) == ["decode_error"]
    (error,) = result.violations
    assert error.frame == 0 and error.offset == 22 and "ApiVersionsRequest v3" in error.detail
    assert [f.status for f in result.frames] == ["decode_error", "ok", "ok", "ok"]


def test_a_flipped_byte_in_a_size_prefix_is_a_framing_error():
    data = bytearray(k.capture([k.api_versions(), k.metadata(2), k.metadata(3)]))
    _, packet = data_packets(bytes(data), from_client=True)[1]
    data[bytes(data).index(packet.data) + PAYLOAD_AT] = 0x7F  # the Metadata request's size: 2 GB
    result = validate(bytes(data))
    assert "framing_error" in rules_of(result)
    # The answers still decode: they are matched to the requests framed before the damage.
    assert ("ApiVersions", "response", "ok") in frames_of(result)


def test_a_dropped_segment_is_a_gap_and_framing_resumes_after_it():
    data = k.capture([k.api_versions(), k.metadata(2), k.metadata(3), k.metadata(4)], mss=40)
    packets = k.packets(data)
    dropped, _ = data_packets(data, from_client=False)[2]  # inside the ApiVersions answer
    result = validate(k.rewrite(packets[:dropped] + packets[dropped + 1:]))
    assert {"gap", "framing_error"} <= set(rules_of(result))
    assert frames_of(result)[-2:] == [("Metadata", "request", "ok"), ("Metadata", "response", "ok")]
    (flow,) = result.flows
    assert flow.gap_bytes == 40


def test_a_reordered_segment_is_put_back_in_order():
    original = k.capture([k.api_versions(), k.metadata(2)], mss=40)
    packets = k.packets(original)
    (a, _), (b, _) = data_packets(original, from_client=False)[3:5]
    packets[a], packets[b] = packets[b], packets[a]
    result = validate(k.rewrite(packets))
    assert result.violations == []
    assert frames_of(result) == frames_of(validate(original))


def test_a_bad_crc_in_fetch_records_is_a_crc_mismatch():
    bad = bytearray(k.record_batch(3))
    bad[-1] ^= 0x01  # the last record's last byte: covered by the CRC, not by any length
    result = validate(k.capture([k.fetch(1, k.record_batch() + bytes(bad))]))
    assert rules_of(result) == ["record_batch_crc_mismatch"]
    (mismatch,) = result.violations
    assert "base offset 3" in mismatch.detail and mismatch.frame == 1


def test_a_heartbeat_with_a_stale_epoch():
    result = validate(k.capture([k.registration(1, 1, 10), k.heartbeat(2, 1, 10), k.heartbeat(3, 1, 9)]))
    assert rules_of(result) == ["stale_broker_epoch"]
    (stale,) = result.violations
    assert stale.frame == 4 and "epoch 9, registered with 10" in stale.detail


def test_registration_in_one_flow_counts_for_heartbeats_in_another():
    result = validate(k.capture([k.registration(1, 1, 10)], [k.heartbeat(1, 1, 10), k.heartbeat(2, 2, 10)]))
    assert rules_of(result) == ["heartbeat_from_unregistered_broker"]
    assert "broker 2" in result.violations[0].detail


def test_a_registration_with_another_cluster_id():
    result = validate(k.capture([k.metadata(1), k.registration(2, 1, 10, cluster_id="another-cluster-id-xx")]))
    assert rules_of(result) == ["cluster_id_mismatch"]


def test_an_unknown_api_key_is_a_warning_unless_the_server_advertised_it():
    unknown = k.raw_frame(struct.pack(">hhih", 99, 0, 2, 4) + b"test" + b"\x00\x01")
    answer = k.raw_frame(struct.pack(">i", 2) + b"\x00\x00")
    result = validate(k.capture([(unknown, answer), k.metadata(3)]))
    assert rules_of(result) == ["unknown_api_key"]
    assert result.violations[0].severity == "warning"
    assert frames_of(result)[:2] == [(None, "request", "unknown_api_key"), (None, "response", "undecoded")]
    assert result.frames[0].client_id == "test" and result.frames[1].latency_ms is not None


def test_a_version_the_server_did_not_advertise():
    result = validate(k.capture([k.api_versions(Metadata=(0, 11)), k.metadata(2)]))
    assert rules_of(result) == ["version_not_advertised"]
    assert "Metadata v12, the server advertised v0-11" in result.violations[0].detail


def test_trailing_bytes_and_unknown_tagged_fields():
    trailing = k.request(MetadataRequest(topics=None), 12, 1)
    trailing = k.raw_frame(trailing[4:] + b"\xff\xff")
    tagged = k.request(MetadataRequest(topics=None, unknown_tagged_fields={99: b"x"}), 12, 2)
    result = validate(k.capture([(trailing, None), (tagged, None)]))
    assert [(v.rule, v.frame) for v in result.violations] == [("trailing_bytes", 0), ("unknown_tagged_fields", 1)]
    assert result.violations[1].severity == "info" and "MetadataRequest[99]" in result.violations[1].detail
    # Kafka reads a message from the front of its frame and ignores what follows: not an error.
    assert result.violations[0].severity == "info"
    assert {f.status for f in result.frames} == {"ok"}


def test_responses_without_requests_and_out_of_order():
    (req1, resp1), (req2, resp2) = k.metadata(1), k.metadata(2)
    stray = k.metadata(7)[1]
    result = validate(k.capture([(req1, None), (req2, resp2), (b"", resp1), (b"", stray)]))
    assert [(v.rule, v.frame) for v in result.violations] == [
        ("correlation_id_out_of_order", 2), ("response_without_request", 3), ("response_without_request", 4)]
    assert result.flows[0].unanswered == 1


def test_a_flow_joined_mid_way_is_found_by_its_frames():
    packets = k.packets(k.capture([k.metadata(1), k.metadata(2), k.metadata(3)]))
    result = validate(k.rewrite(packets[3:]))  # no handshake: who is the client is learnt from the bytes
    assert result.violations == []
    # Unsynchronised framers hold each frame until the next header proves it: the order
    # across directions shifts, the frames do not.
    assert sorted(frames_of(result)) == [("Metadata", "request", "ok")] * 3 + [("Metadata", "response", "ok")] * 3
    assert result.flows[0].client == f"{k.CLIENT[0]}:{k.CLIENT[1]}"


def test_a_flow_that_is_not_kafka():
    http = (b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    result = validate(k.capture([http], [k.metadata(1)]))
    assert rules_of(result) == ["non_kafka_flow"]
    assert [f.kafka for f in result.flows] == [False, True]
    assert frames_of(result) == [("Metadata", "request", "ok"), ("Metadata", "response", "ok")]


def test_ports_decide_which_flows_are_kafka():
    result = validate(k.capture([k.metadata(1)]), ports=[9092])
    assert rules_of(result) == ["non_kafka_flow"] and result.frames == []


def test_a_zero_length_file(tmp_path):
    path = tmp_path / "empty.pcapng"
    path.write_bytes(b"")
    result = validate(path)
    assert rules_of(result) == ["empty_file"] and result.frames == []


def test_a_truncated_file_keeps_what_precedes_the_cut():
    data = k.capture([k.api_versions(), k.metadata(2)])
    result = validate(data[:-30])
    assert "truncated_file" in rules_of(result)
    assert frames_of(result) == [("ApiVersions", "request", "ok"), ("ApiVersions", "response", "ok"),
                                 ("Metadata", "request", "ok"), ("Metadata", "response", "ok")]


def test_an_unknown_link_type():
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 147)
    record = struct.pack("<IIII", 1, 0, 4, 4) + b"abcd"
    result = validate(header + record)
    assert rules_of(result) == ["unknown_link_type"]
