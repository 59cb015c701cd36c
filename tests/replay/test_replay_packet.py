"""Link, IP and TCP header decoding, and the fast path held equal to the declarative one."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from captures import formats as f
from captures.formats import TCP_ACK, TCP_PSH
from captures.pcapng_writer import tcp_packet
from tools.replay.packet import (
    Segment,
    decode_segment,
    decode_segment_declarative,
    format_endpoint,
)
from tools.replay.problems import Problem

PAYLOAD = b"\x00\x00\x00\x0bkafka bytes"
A4, B4 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
A6 = bytes.fromhex("fd000000000000000000000000000001")
B6 = bytes.fromhex("fd000000000000000000000000000002")


def ipv4_tcp(payload=PAYLOAD, ip_options=b"", tcp_options=b"", fragment=0x4000, protocol=6) -> bytes:
    """A hand-made IPv4 packet (checksums left zero: the decoder does not judge them)."""
    tcp = struct.pack("!HHIIBBHHH", 50000, 9092, 1000, 2000, (5 + len(tcp_options) // 4) << 4, TCP_ACK | TCP_PSH, 512, 0, 0)
    tcp += tcp_options + payload
    ihl = 5 + len(ip_options) // 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + len(tcp), 7, fragment, 64, protocol, 0, A4, B4)
    return ip + ip_options + tcp


def ipv6_tcp(payload=PAYLOAD, extensions: list[tuple[int, bytes]] = ()) -> bytes:
    """A hand-made IPv6 packet; `extensions` are (header type, header bytes after its first 2)."""
    tcp = struct.pack("!HHIIBBHHH", 50000, 9092, 1000, 2000, 5 << 4, TCP_ACK, 512, 0, 0) + payload
    chain = b""
    types = [t for t, _ in extensions] + [6]
    for (kind, body), following in zip(extensions, types[1:]):
        if kind == f.IPV6_AUTH_HEADER:
            length = (len(body) + 2) // 4 - 2
        else:
            length = (len(body) + 2) // 8 - 1
        chain += bytes([following, length]) + body
    header = struct.pack("!IHBB16s16s", 6 << 28, len(chain) + len(tcp), types[0], 64, A6, B6)
    return header + chain + tcp


def expected(src=A4, dst=B4, payload=PAYLOAD, flags=TCP_ACK | TCP_PSH, missing=0) -> Segment:
    return Segment(src, 50000, dst, 9092, 1000, 2000, flags, payload, missing)


ETHERNET = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01"


def both_paths(link_type: int, data: bytes, orig_len: int | None = None):
    orig_len = len(data) if orig_len is None else orig_len
    result = decode_segment(link_type, data, orig_len)
    assert decode_segment_declarative(link_type, data, orig_len) == result
    return result


def test_writer_packets_decode_to_their_fields():
    frame = tcp_packet("10.0.0.1", 50000, "10.0.0.2", 9092, 1000, 2000, TCP_ACK | TCP_PSH, PAYLOAD)
    assert both_paths(f.LINKTYPE_ETHERNET, frame) == expected()
    frame6 = tcp_packet("fd00::1", 50000, "fd00::2", 9092, 1000, 2000, TCP_ACK, PAYLOAD)
    assert both_paths(f.LINKTYPE_ETHERNET, frame6) == expected(A6, B6, flags=TCP_ACK)


@pytest.mark.parametrize(
    "tags",
    [
        [(0x8100, 100)],  # 802.1Q
        [(0x88A8, 10), (0x8100, 200)],  # 802.1ad with an inner 802.1Q tag
        [(0x9100, 1), (0x8100, 2), (0x8100, 3)],
    ],
)
def test_vlan_tags_single_and_stacked(tags):
    frame = ETHERNET + struct.pack("!H", tags[0][0])
    inner_types = [t for t, _ in tags[1:]] + [f.ETHERTYPE_IPV4]
    for (_, vlan_id), inner in zip(tags, inner_types):
        frame += struct.pack("!HH", vlan_id, inner)
    assert both_paths(f.LINKTYPE_ETHERNET, frame + ipv4_tcp()) == expected()


def test_linux_cooked_sll_and_sll2():
    sll = struct.pack("!HHH8sH", 0, 1, 6, b"\x02\0\0\0\0\x01\0\0", f.ETHERTYPE_IPV4)
    assert both_paths(f.LINKTYPE_LINUX_SLL, sll + ipv4_tcp()) == expected()
    sll6 = struct.pack("!HHH8sH", 4, 772, 0, b"", f.ETHERTYPE_IPV6)
    assert both_paths(f.LINKTYPE_LINUX_SLL, sll6 + ipv6_tcp()) == expected(A6, B6, flags=TCP_ACK)
    sll2 = struct.pack("!HHIHBB8s", f.ETHERTYPE_IPV4, 0, 3, 1, 0, 6, b"\x02\0\0\0\0\x01\0\0")
    assert both_paths(f.LINKTYPE_LINUX_SLL2, sll2 + ipv4_tcp()) == expected()
    sll2_6 = struct.pack("!HHIHBB8s", f.ETHERTYPE_IPV6, 0, 1, 772, 4, 0, b"")
    assert both_paths(f.LINKTYPE_LINUX_SLL2, sll2_6 + ipv6_tcp()) == expected(A6, B6, flags=TCP_ACK)


@pytest.mark.parametrize("order", ["<", ">"])
def test_bsd_null_in_either_host_byte_order(order):
    assert both_paths(f.LINKTYPE_NULL, struct.pack(order + "I", 2) + ipv4_tcp()) == expected()
    for family in (10, 24, 28, 30):
        packet = struct.pack(order + "I", family) + ipv6_tcp()
        assert both_paths(f.LINKTYPE_NULL, packet) == expected(A6, B6, flags=TCP_ACK)


def test_openbsd_loop_is_network_order():
    assert both_paths(f.LINKTYPE_LOOP, struct.pack("!I", 2) + ipv4_tcp()) == expected()
    assert both_paths(f.LINKTYPE_LOOP, struct.pack("!I", 24) + ipv6_tcp()) == expected(A6, B6, flags=TCP_ACK)


def test_raw_ip_link_types():
    assert both_paths(f.LINKTYPE_RAW, ipv4_tcp()) == expected()
    assert both_paths(f.LINKTYPE_RAW, ipv6_tcp()) == expected(A6, B6, flags=TCP_ACK)
    assert both_paths(f.LINKTYPE_IPV4, ipv4_tcp()) == expected()
    assert both_paths(f.LINKTYPE_IPV6, ipv6_tcp()) == expected(A6, B6, flags=TCP_ACK)


def test_ipv4_and_tcp_options_are_skipped_by_their_lengths():
    ip_options = b"\x94\x04\0\0"  # router alert
    tcp_options = b"\x02\x04\x05\xb4" + b"\x01\x01\x08\x0a" + b"\0" * 8  # MSS, NOPs, timestamps
    packet = ipv4_tcp(ip_options=ip_options, tcp_options=tcp_options)
    assert both_paths(f.LINKTYPE_RAW, packet) == expected()


def test_ipv6_extension_headers_are_skipped():
    hop_by_hop = (0, b"\x01\x04\0\0\0\0")  # a PadN option filling 8 bytes
    destination = (60, b"\x01\x0c" + b"\0" * 12)  # 16 bytes
    routing = (43, b"\0\0\0\0\0\0")
    atomic_fragment = (44, b"\0\0\0\0\0\x01")  # offset 0, more-fragments clear
    packet = ipv6_tcp(extensions=[hop_by_hop, destination, routing, atomic_fragment])
    assert both_paths(f.LINKTYPE_RAW, packet) == expected(A6, B6, flags=TCP_ACK)


def test_ipv6_authentication_header_counts_in_four_byte_units():
    auth = (51, b"\0\0" + b"\0" * 4 + b"\0" * 4 + b"\0" * 12)  # 24 bytes: length field 4
    packet = ipv6_tcp(extensions=[auth])
    assert packet[40 + 1] == 4
    assert both_paths(f.LINKTYPE_RAW, packet) == expected(A6, B6, flags=TCP_ACK)


def test_fragments_are_flagged():
    for fragment in (0x2000, 0x0010, 0x2010):  # more-fragments, an offset, both
        result = both_paths(f.LINKTYPE_RAW, ipv4_tcp(fragment=fragment))
        assert isinstance(result, Problem) and result.kind == "ip_fragment"
    later_fragment = (44, b"\0\x08\0\0\0\x01")  # offset 1 (8 bytes)
    result = both_paths(f.LINKTYPE_RAW, ipv6_tcp(extensions=[later_fragment]))
    assert isinstance(result, Problem) and result.kind == "ip_fragment"


def test_non_tcp_packets_are_not_problems():
    assert both_paths(f.LINKTYPE_RAW, ipv4_tcp(protocol=17)) is None  # UDP
    arp = ETHERNET + b"\x08\x06" + b"\0" * 28
    assert both_paths(f.LINKTYPE_ETHERNET, arp) is None
    assert both_paths(f.LINKTYPE_NULL, struct.pack("<I", 7) + ipv4_tcp()) is None
    no_next_header = struct.pack("!IHBB16s16s", 6 << 28, 0, 59, 64, A6, B6)
    assert both_paths(f.LINKTYPE_RAW, no_next_header) is None


def test_truncated_and_malformed_headers_are_problems():
    frame = ETHERNET + b"\x08\x00" + ipv4_tcp()
    for cut in (5, 14, 20, 33, 14 + 20 + 10):
        result = both_paths(f.LINKTYPE_ETHERNET, frame[:cut], len(frame))
        assert isinstance(result, Problem) and result.kind == "truncated_headers", cut
    bad_ihl = bytearray(ipv4_tcp())
    bad_ihl[0] = 0x44
    assert both_paths(f.LINKTYPE_RAW, bytes(bad_ihl)).kind == "malformed_ip"
    bad_offset = bytearray(ipv4_tcp())
    bad_offset[20 + 12] = 0x40
    assert both_paths(f.LINKTYPE_RAW, bytes(bad_offset)).kind == "malformed_tcp"
    assert both_paths(147, b"\0" * 60).kind == "unknown_link_type"


def test_snaplen_truncation_is_counted_as_missing_payload():
    payload = bytes(range(200))
    frame = ETHERNET + b"\x08\x00" + ipv4_tcp(payload=payload)
    result = both_paths(f.LINKTYPE_ETHERNET, frame[:96], len(frame))
    assert result == expected(payload=payload[:42], missing=158)


def test_ethernet_padding_is_not_payload():
    frame = ETHERNET + b"\x08\x00" + ipv4_tcp(payload=b"ab")
    padded = frame + b"\0" * (60 - len(frame))
    assert both_paths(f.LINKTYPE_ETHERNET, padded) == expected(payload=b"ab")


def test_segmentation_offload_zero_length_uses_the_frame_length():
    packet = bytearray(ipv4_tcp(payload=b"x" * 3000))
    packet[2:4] = b"\0\0"
    assert both_paths(f.LINKTYPE_RAW, bytes(packet)) == expected(payload=b"x" * 3000)


def test_format_endpoint():
    assert format_endpoint(A4, 9092) == "10.0.0.1:9092"
    assert format_endpoint(A6, 9092) == "[fd00::1]:9092"


BASES = [
    (f.LINKTYPE_ETHERNET, ETHERNET + b"\x08\x00" + ipv4_tcp()),
    (f.LINKTYPE_LINUX_SLL, struct.pack("!HHH8sH", 0, 1, 6, b"", f.ETHERTYPE_IPV4) + ipv4_tcp()),
    (f.LINKTYPE_LINUX_SLL2, struct.pack("!HHIHBB8s", f.ETHERTYPE_IPV4, 0, 3, 1, 0, 6, b"") + ipv4_tcp()),
    (f.LINKTYPE_RAW, ipv4_tcp(ip_options=b"\x01\x01\x01\x00", tcp_options=b"\x01" * 4)),
]


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(BASES),
    edits=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 120),
    extra_orig=st.integers(0, 64),
)
def test_fast_path_equals_declarative_path_on_mangled_packets(base, edits, cut, extra_orig):
    link_type, packet = base
    packet = bytearray(packet)
    for at, value in edits:
        if at < len(packet):
            packet[at] = value
    data = bytes(packet[: max(0, len(packet) - cut)])
    orig_len = len(data) + extra_orig
    assert decode_segment(link_type, data, orig_len) == decode_segment_declarative(link_type, data, orig_len)
