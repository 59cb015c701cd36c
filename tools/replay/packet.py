"""One captured packet -> the TCP segment inside it, through its link and IP headers.

`decode_segment` first tries a `struct` fast path for the shapes Kafka captures almost always
have (untagged Ethernet, Linux cooked or raw IP carrying unfragmented IPv4 without options),
and otherwise walks the `construct` layouts of `formats`. Both paths must give identical
results; tests hold them to it.
"""
from __future__ import annotations

import socket
import struct
from typing import NamedTuple

from captures import formats as f
from tools.replay.capture import Buffer
from tools.replay.problems import Problem


class Segment(NamedTuple):
    src: bytes  # packed IPv4 (4 bytes) or IPv6 (16 bytes) address
    sport: int
    dst: bytes
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    # Payload bytes the IP length promises but the capture does not hold (snaplen truncation).
    missing: int


def format_endpoint(address: bytes, port: int) -> str:
    """`1.2.3.4:9092` or `[::1]:9092`."""
    if len(address) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, address)}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, address)}]:{port}"


def decode_segment(link_type: int, data: bytes, orig_len: int) -> Segment | Problem | None:
    """The TCP segment in one captured packet, `None` for packets that carry no TCP, or a
    `Problem` when the headers are damaged, cut short, or belong to an IP fragment."""
    return decode_segment_at(link_type, data, 0, len(data), orig_len)


def decode_segment_at(link_type: int, buf: Buffer, at: int, caplen: int, orig_len: int) -> Segment | Problem | None:
    """`decode_segment` of the packet of `caplen` bytes at `at` in a capture's bytes, which
    the fast path reads where they lie: only the payload is copied out."""
    segment = _fast(link_type, buf, at, caplen, orig_len)
    if segment is not None:
        return segment
    return decode_segment_declarative(link_type, buf[at : at + caplen], orig_len)


# ---------------------------------------------------------------------------------------------
# Fast path

# An option-less IPv4 header and the fixed part of the TCP header, read in one call:
# version/ihl, total length, flags/fragment offset, protocol, addresses, ports, seq, ack,
# data offset, flags.
_IPV4_TCP = struct.Struct("!BxHxxHxB2x4s4sHHIIBB")
FAST_LINK_OFFSETS = {
    # link type -> (offset of the IPv4 header, offset of the 2-byte ethertype or None)
    f.LINKTYPE_ETHERNET: (14, 12),
    f.LINKTYPE_LINUX_SLL: (16, 14),
    f.LINKTYPE_LINUX_SLL2: (20, 0),
    f.LINKTYPE_RAW: (0, None),
    f.LINKTYPE_IPV4: (0, None),
}
_ETHERTYPE_IPV4 = f.ETHERTYPE_IPV4.to_bytes(2, "big")


def _fast(link_type: int, buf: Buffer, at: int, caplen: int, orig_len: int) -> Segment | None:
    """The segment of the packet at `at`, or None whenever the declarative path must decide."""
    offsets = FAST_LINK_OFFSETS.get(link_type)
    if offsets is None:
        return None
    ip, ethertype_at = offsets
    if caplen < ip + 40 or (ethertype_at is not None and buf[at + ethertype_at : at + ethertype_at + 2] != _ETHERTYPE_IPV4):
        return None
    version_ihl, total_length, fragment, protocol, src, dst, sport, dport, seq, ack, data_offset, flags = (
        _IPV4_TCP.unpack_from(buf, at + ip)
    )
    if version_ihl != 0x45 or protocol != f.IPPROTO_TCP or fragment & 0x3FFF or data_offset < 0x50:
        return None
    payload_at = ip + 20 + (data_offset >> 4) * 4
    ip_end = ip + total_length
    if payload_at > ip_end or payload_at > caplen:
        return None
    if ip_end <= caplen:
        return Segment(src, sport, dst, dport, seq, ack, flags, buf[at + payload_at : at + ip_end], 0)
    end, missing = _payload_end(ip_end, caplen, orig_len)
    return Segment(src, sport, dst, dport, seq, ack, flags, buf[at + payload_at : at + end], missing)


def _payload_end(ip_end: int, caplen: int, orig_len: int) -> tuple[int, int]:
    """Where the captured payload ends and how many payload bytes the capture lacks.

    Bytes past the IP datagram are link padding (Ethernet's 60-byte minimum), never payload;
    bytes the datagram claims but the frame never had (orig_len) are not missing either.
    """
    missing = max(0, min(ip_end, orig_len) - caplen)
    return min(ip_end, caplen), missing


# ---------------------------------------------------------------------------------------------
# Declarative path


def decode_segment_declarative(link_type: int, data: bytes, orig_len: int) -> Segment | Problem | None:
    """`decode_segment` through the construct layouts alone; handles every supported shape."""
    try:
        network = _network_layer(link_type, data)
        if network is None or isinstance(network, Problem):
            return network
        version, at = network
        if version == 4:
            return _ipv4(data, at, orig_len)
        return _ipv6(data, at, orig_len)
    except f.PARSE_ERRORS as err:
        return Problem("truncated_headers", 0, len(data), f"link type {link_type}: {err}")


def _network_layer(link_type: int, data: bytes) -> tuple[int, int] | Problem | None:
    """(IP version, offset of the IP header), or None for packets that carry no IP."""
    if link_type == f.LINKTYPE_ETHERNET:
        header = f.ETHERNET.parse(data)
        at, ethertype = 14, header.ethertype
        while ethertype in f.ETHERTYPE_VLAN:
            ethertype = f.VLAN_TAG.parse(data[at:]).ethertype
            at += 4
        return _by_ethertype(ethertype, at)
    if link_type == f.LINKTYPE_LINUX_SLL:
        return _by_ethertype(f.LINUX_SLL.parse(data).protocol, 16)
    if link_type == f.LINKTYPE_LINUX_SLL2:
        return _by_ethertype(f.LINUX_SLL2.parse(data).protocol, 20)
    if link_type == f.LINKTYPE_NULL:
        family = f.NULL_HEADER.parse(data).family
        if family > 0xFFFF:  # written by a host of the other byte order
            family = int.from_bytes(family.to_bytes(4, "little"), "big")
        return _by_family(family)
    if link_type == f.LINKTYPE_LOOP:
        return _by_family(f.LOOP_HEADER.parse(data).family)
    if link_type == f.LINKTYPE_RAW:
        if not data:
            return Problem("truncated_headers", 0, 0, "raw IP packet is empty")
        version = data[0] >> 4
        return (version, 0) if version in (4, 6) else None
    if link_type == f.LINKTYPE_IPV4:
        return 4, 0
    if link_type == f.LINKTYPE_IPV6:
        return 6, 0
    return Problem("unknown_link_type", 0, len(data), f"link type {link_type} is not supported")


def _by_ethertype(ethertype: int, at: int) -> tuple[int, int] | None:
    if ethertype == f.ETHERTYPE_IPV4:
        return 4, at
    if ethertype == f.ETHERTYPE_IPV6:
        return 6, at
    return None


def _by_family(family: int) -> tuple[int, int] | None:
    if family == f.AF_INET:
        return 4, 4
    if family in f.AF_INET6:
        return 6, 4
    return None


def _ipv4(data: bytes, at: int, orig_len: int) -> Segment | Problem | None:
    if len(data) - at >= 1 and data[at] & 0x0F < 5:
        return Problem("malformed_ip", at, len(data) - at, "IPv4 header length below 20 bytes")
    ip = f.IPV4.parse(data[at:])
    if ip.version_ihl.version != 4:
        return Problem("malformed_ip", at, len(data) - at, f"IP version {ip.version_ihl.version} in an IPv4 packet")
    if ip.protocol != f.IPPROTO_TCP:
        return None
    if ip.fragment.more_fragments or ip.fragment.offset:
        return Problem("ip_fragment", at, len(data) - at, "IPv4 fragments are not reassembled")
    header_length = ip.version_ihl.ihl * 4
    # Zero is what a capture of a segmentation-offloaded packet shows; the frame length holds.
    end = at + ip.total_length if ip.total_length else orig_len
    if end < at + header_length + f.TCP_MIN_SIZE:
        return Problem("malformed_ip", at, len(data) - at, f"IPv4 total length {ip.total_length} too small")
    return _tcp(data, at + header_length, end, ip.src, ip.dst, orig_len)


def _ipv6(data: bytes, at: int, orig_len: int) -> Segment | Problem | None:
    ip = f.IPV6.parse(data[at:])
    if ip.vtf.version != 6:
        return Problem("malformed_ip", at, len(data) - at, f"IP version {ip.vtf.version} in an IPv6 packet")
    # A zero payload length means a jumbogram or a segmentation-offloaded packet: the frame's
    # own length is all there is to go by.
    end = at + f.IPV6_SIZE + ip.payload_length if ip.payload_length else orig_len
    next_header, pos = ip.next_header, at + f.IPV6_SIZE
    while next_header != f.IPPROTO_TCP:
        if next_header in f.IPV6_GENERIC_EXTENSIONS:
            extension = f.IPV6_EXTENSION.parse(data[pos:])
            pos += extension.length * 8 + 8
        elif next_header == f.IPV6_AUTH_HEADER:
            extension = f.IPV6_AUTH.parse(data[pos:])
            pos += extension.length * 4 + 8
        elif next_header == f.IPV6_FRAGMENT_HEADER:
            extension = f.IPV6_FRAGMENT.parse(data[pos:])
            if extension.fragment.offset or extension.fragment.more_fragments:
                return Problem("ip_fragment", at, len(data) - at, "IPv6 fragments are not reassembled")
            pos += 8
        else:
            return None
        next_header = extension.next_header
    if end < pos + f.TCP_MIN_SIZE:
        return Problem("malformed_ip", at, len(data) - at, "IPv6 payload length too small for TCP")
    return _tcp(data, pos, end, ip.src, ip.dst, orig_len)


def _tcp(data: bytes, at: int, ip_end: int, src: bytes, dst: bytes, orig_len: int) -> Segment | Problem:
    if len(data) - at >= 13 and data[at + 12] >> 4 < 5:
        return Problem("malformed_tcp", at, len(data) - at, "TCP data offset below 20 bytes")
    tcp = f.TCP.parse(data[at:])
    payload_at = at + tcp.offset_reserved.data_offset * 4
    if payload_at > ip_end:
        return Problem("malformed_tcp", at, len(data) - at, "TCP header runs past the IP payload")
    end, missing = _payload_end(ip_end, len(data), orig_len)
    return Segment(
        src, tcp.src_port, dst, tcp.dst_port, tcp.seq, tcp.ack, tcp.flags, data[payload_at:end], missing
    )
