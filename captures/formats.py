"""Declarative layouts of capture files and of the packet headers inside them.

Every layout is a compiled `construct` definition. The per-packet layouts that the readers
parse millions of times also have a `struct.Struct` twin (the `*_FAST` names); tests check
that each twin reads the same fields as its construct definition.
"""
from __future__ import annotations

import struct

from construct import (
    BitsInteger,
    BitStruct,
    Bytes,
    Compiled,
    Construct,
    ConstructError,
    Flag,
    FixedSized,
    GreedyRange,
    Int8ub,
    Int16ub,
    Int16ul,
    Int32ub,
    Int32ul,
    Int32sb,
    Int32sl,
    Int64sb,
    Int64sl,
    Padding,
    Struct,
    this,
)

# What a compiled layout raises on bytes it cannot parse: compiled code unpacks with `struct`
# directly, so a short buffer surfaces as struct.error rather than as a ConstructError.
PARSE_ERRORS = (ConstructError, struct.error)

# Link-layer header types (tcpdump.org/linktypes.html) that the packet decoder understands.
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

LINK_TYPES = {
    LINKTYPE_NULL: "NULL",
    LINKTYPE_ETHERNET: "ETHERNET",
    LINKTYPE_RAW: "RAW",
    LINKTYPE_LOOP: "LOOP",
    LINKTYPE_LINUX_SLL: "LINUX_SLL",
    LINKTYPE_IPV4: "IPV4",
    LINKTYPE_IPV6: "IPV6",
    LINKTYPE_LINUX_SLL2: "LINUX_SLL2",
}

# The pcap link-type field carries FCS information in its upper bits.
PCAP_LINKTYPE_MASK = 0x03FFFFFF

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN = frozenset({0x8100, 0x88A8, 0x9100})

IPPROTO_TCP = 6

# ---------------------------------------------------------------------------------------------
# pcap: a 24-byte file header, then 16-byte record headers each followed by the packet bytes.
# The magic number, read in the writer's byte order, also tells the timestamp resolution.
PCAP_MAGIC_MICRO = 0xA1B2C3D4
PCAP_MAGIC_NANO = 0xA1B23C4D
PCAP_FILE_HEADER_SIZE = 24
PCAP_RECORD_HEADER_SIZE = 16


def _pcap_file_header(u16: Construct, u32: Construct, s32: Construct) -> Compiled:
    return Struct(
        "magic" / u32,
        "version_major" / u16,
        "version_minor" / u16,
        "thiszone" / s32,
        "sigfigs" / u32,
        "snaplen" / u32,
        "linktype" / u32,
    ).compile()


def _pcap_record_header(u32: Construct) -> Compiled:
    return Struct(
        "ts_sec" / u32,
        "ts_frac" / u32,
        "incl_len" / u32,
        "orig_len" / u32,
    ).compile()


# Keyed by the struct byte-order character, "<" or ">".
PCAP_FILE_HEADER = {
    "<": _pcap_file_header(Int16ul, Int32ul, Int32sl),
    ">": _pcap_file_header(Int16ub, Int32ub, Int32sb),
}
PCAP_RECORD_HEADER = {"<": _pcap_record_header(Int32ul), ">": _pcap_record_header(Int32ub)}
PCAP_RECORD_HEADER_FAST = {"<": struct.Struct("<IIII"), ">": struct.Struct(">IIII")}

# ---------------------------------------------------------------------------------------------
# pcapng: a sequence of blocks, each `type, total_length, body, total_length`, every block
# padded to 32 bits. A Section Header Block starts each section and fixes its byte order.
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_IDB = 0x00000001
PCAPNG_SPB = 0x00000003
PCAPNG_EPB = 0x00000006
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D
PCAPNG_KNOWN_BLOCKS = frozenset(
    # Used to recognise a block boundary after corruption: the four blocks above, plus the
    # obsolete packet block, name resolution, interface statistics, decryption secrets,
    # systemd journal export and the two custom block types.
    {PCAPNG_SHB, PCAPNG_IDB, 2, PCAPNG_SPB, 4, 5, PCAPNG_EPB, 9, 0x0A, 0xBAD, 0x40000BAD}
)
PCAPNG_BLOCK_HEADER_SIZE = 8
PCAPNG_EPB_FIXED_SIZE = 28  # block header + five 32-bit fields
PCAPNG_MIN_BLOCK_SIZE = 12

OPT_ENDOFOPT = 0
OPT_IF_TSRESOL = 9
OPT_IF_TSOFFSET = 14


def _pcapng_layouts(u16: Construct, u32: Construct, s64: Construct) -> dict[str, Compiled]:
    option = Struct(
        "code" / u16,
        "length" / u16,
        "value" / Bytes(this.length),
        Padding(-this.length % 4),
    )

    def options(fixed_size: int) -> Construct:
        # Options fill whatever the block's total length leaves after its fixed fields.
        return "options" / FixedSized(this.block_total_length - fixed_size, GreedyRange(option))

    block_header = Struct("block_type" / u32, "block_total_length" / u32)
    shb = Struct(
        "block_type" / u32,
        "block_total_length" / u32,
        "byte_order_magic" / u32,
        "version_major" / u16,
        "version_minor" / u16,
        "section_length" / s64,
        options(28),
        "block_total_length_trailer" / u32,
    )
    idb = Struct(
        "block_type" / u32,
        "block_total_length" / u32,
        "linktype" / u16,
        "reserved" / u16,
        "snaplen" / u32,
        options(20),
        "block_total_length_trailer" / u32,
    )
    epb = Struct(
        "block_type" / u32,
        "block_total_length" / u32,
        "interface_id" / u32,
        "timestamp_high" / u32,
        "timestamp_low" / u32,
        "captured_length" / u32,
        "original_length" / u32,
        "packet_data" / Bytes(this.captured_length),
        Padding(-this.captured_length % 4),
        "options"
        / FixedSized(
            this.block_total_length - 32 - this.captured_length - (-this.captured_length % 4),
            GreedyRange(option),
        ),
        "block_total_length_trailer" / u32,
    )
    spb = Struct(
        "block_type" / u32,
        "block_total_length" / u32,
        "original_length" / u32,
        # Captured bytes plus padding; the captured length is min(original, snaplen).
        "packet_data" / Bytes(this.block_total_length - 16),
        "block_total_length_trailer" / u32,
    )
    return {
        "option": option.compile(),
        "block_header": block_header.compile(),
        "shb": shb.compile(),
        "idb": idb.compile(),
        "epb": epb.compile(),
        "spb": spb.compile(),
    }


PCAPNG = {"<": _pcapng_layouts(Int16ul, Int32ul, Int64sl), ">": _pcapng_layouts(Int16ub, Int32ub, Int64sb)}
PCAPNG_BLOCK_HEADER_FAST = {"<": struct.Struct("<II"), ">": struct.Struct(">II")}
# block_type, block_total_length, interface_id, timestamp_high, timestamp_low,
# captured_length, original_length
PCAPNG_EPB_FAST = {"<": struct.Struct("<7I"), ">": struct.Struct(">7I")}
PCAPNG_U32 = {"<": struct.Struct("<I"), ">": struct.Struct(">I")}

# ---------------------------------------------------------------------------------------------
# Link-layer headers.
ETHERNET = Struct("dst" / Bytes(6), "src" / Bytes(6), "ethertype" / Int16ub).compile()
# An 802.1Q/802.1ad tag sits where the ethertype was; the tag protocol id is that ethertype.
VLAN_TAG = Struct(
    "tci" / BitStruct("priority" / BitsInteger(3), "drop_eligible" / Flag, "vlan_id" / BitsInteger(12)),
    "ethertype" / Int16ub,
).compile()
LINUX_SLL = Struct(
    "packet_type" / Int16ub,
    "arphrd_type" / Int16ub,
    "address_length" / Int16ub,
    "address" / Bytes(8),
    "protocol" / Int16ub,
).compile()
LINUX_SLL2 = Struct(
    "protocol" / Int16ub,
    "reserved" / Int16ub,
    "interface_index" / Int32ub,
    "arphrd_type" / Int16ub,
    "packet_type" / Int8ub,
    "address_length" / Int8ub,
    "address" / Bytes(8),
).compile()
# DLT_NULL stores the address family in the capturing host's byte order, LOOP in network order.
NULL_HEADER = Struct("family" / Int32ul).compile()
LOOP_HEADER = Struct("family" / Int32ub).compile()
# AF_INET is 2 everywhere; AF_INET6 differs by OS (Linux, NetBSD/OpenBSD, FreeBSD, macOS).
AF_INET = 2
AF_INET6 = frozenset({10, 24, 28, 30})

# ---------------------------------------------------------------------------------------------
# Network and transport headers.
IPV4 = Struct(
    "version_ihl" / BitStruct("version" / BitsInteger(4), "ihl" / BitsInteger(4)),
    "tos" / Int8ub,
    "total_length" / Int16ub,
    "identification" / Int16ub,
    "fragment"
    / BitStruct(
        "reserved" / Flag,
        "dont_fragment" / Flag,
        "more_fragments" / Flag,
        "offset" / BitsInteger(13),
    ),
    "ttl" / Int8ub,
    "protocol" / Int8ub,
    "checksum" / Int16ub,
    "src" / Bytes(4),
    "dst" / Bytes(4),
    "options" / Bytes(this.version_ihl.ihl * 4 - 20),
).compile()
IPV4_MIN_SIZE = 20

IPV6 = Struct(
    "vtf"
    / BitStruct("version" / BitsInteger(4), "traffic_class" / BitsInteger(8), "flow_label" / BitsInteger(20)),
    "payload_length" / Int16ub,
    "next_header" / Int8ub,
    "hop_limit" / Int8ub,
    "src" / Bytes(16),
    "dst" / Bytes(16),
).compile()
IPV6_SIZE = 40
# Extension headers that share the generic layout (length in 8-byte units past the first 8):
# hop-by-hop, routing, destination options, mobility, HIP, shim6.
IPV6_GENERIC_EXTENSIONS = frozenset({0, 43, 60, 135, 139, 140})
IPV6_EXTENSION = Struct(
    "next_header" / Int8ub, "length" / Int8ub, "data" / Bytes(this.length * 8 + 6)
).compile()
IPV6_FRAGMENT_HEADER = 44
IPV6_FRAGMENT = Struct(
    "next_header" / Int8ub,
    "reserved" / Int8ub,
    "fragment" / BitStruct("offset" / BitsInteger(13), "reserved" / BitsInteger(2), "more_fragments" / Flag),
    "identification" / Int32ub,
).compile()
# The authentication header counts its length in 4-byte units, minus two.
IPV6_AUTH_HEADER = 51
IPV6_AUTH = Struct("next_header" / Int8ub, "length" / Int8ub, "data" / Bytes(this.length * 4 + 6)).compile()

TCP = Struct(
    "src_port" / Int16ub,
    "dst_port" / Int16ub,
    "seq" / Int32ub,
    "ack" / Int32ub,
    "offset_reserved" / BitStruct("data_offset" / BitsInteger(4), "reserved" / BitsInteger(4)),
    "flags" / Int8ub,
    "window" / Int16ub,
    "checksum" / Int16ub,
    "urgent_pointer" / Int16ub,
    "options" / Bytes(this.offset_reserved.data_offset * 4 - 20),
).compile()
TCP_MIN_SIZE = 20
# TCP header flags
TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_PSH = 0x08
TCP_ACK = 0x10
