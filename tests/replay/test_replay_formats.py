"""The struct twins of the per-packet layouts read what the construct layouts read."""
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from captures import formats as f

U32 = st.integers(0, 2**32 - 1)


@pytest.mark.parametrize("order", ["<", ">"])
@given(fields=st.tuples(U32, U32, U32, U32))
def test_pcap_record_header_twin(order, fields):
    raw = struct.pack(order + "IIII", *fields)
    parsed = f.PCAP_RECORD_HEADER[order].parse(raw)
    assert f.PCAP_RECORD_HEADER_FAST[order].unpack_from(raw) == (
        parsed.ts_sec,
        parsed.ts_frac,
        parsed.incl_len,
        parsed.orig_len,
    )


@pytest.mark.parametrize("order", ["<", ">"])
@given(if_id=U32, ts=st.integers(0, 2**64 - 1), data=st.binary(max_size=70), orig_extra=st.integers(0, 1000))
def test_enhanced_packet_block_twin(order, if_id, ts, data, orig_extra):
    padded = data + b"\0" * (-len(data) % 4)
    total = 32 + len(padded)
    raw = struct.pack(order + "7I", f.PCAPNG_EPB, total, if_id, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data) + orig_extra)
    raw += padded + struct.pack(order + "I", total)
    parsed = f.PCAPNG[order]["epb"].parse(raw)
    fast = f.PCAPNG_EPB_FAST[order].unpack_from(raw)
    assert fast == (
        parsed.block_type,
        parsed.block_total_length,
        parsed.interface_id,
        parsed.timestamp_high,
        parsed.timestamp_low,
        parsed.captured_length,
        parsed.original_length,
    )
    assert raw[f.PCAPNG_EPB_FIXED_SIZE : f.PCAPNG_EPB_FIXED_SIZE + fast[5]] == parsed.packet_data
    assert parsed.block_total_length_trailer == total


def test_epb_options_follow_the_padded_data():
    option = struct.pack("<HH", 1, 5) + b"hello\0\0\0" + struct.pack("<HH", 0, 0)
    total = 32 + 4 + len(option)
    raw = struct.pack("<7I", f.PCAPNG_EPB, total, 0, 0, 0, 3, 3) + b"abc\0" + option + struct.pack("<I", total)
    parsed = f.PCAPNG["<"]["epb"].parse(raw)
    assert [(o.code, o.value) for o in parsed.options] == [(1, b"hello"), (0, b"")]


def test_header_layouts_read_variable_parts_by_their_lengths():
    ip = f.IPV4.parse(bytes.fromhex("46000030000120000406") + b"\0\0" + bytes(8) + b"\x94\x04\0\0")
    assert (ip.version_ihl.ihl, ip.fragment.more_fragments, ip.fragment.offset, ip.options) == (6, True, 0, b"\x94\x04\0\0")
    tcp = f.TCP.parse(struct.pack("!HHIIBBHHH", 1, 2, 3, 4, 7 << 4, 0x12, 5, 6, 7) + b"\x02\x04\x05\xb4" * 2)
    assert (tcp.offset_reserved.data_offset, tcp.flags, tcp.options) == (7, 0x12, b"\x02\x04\x05\xb4" * 2)
    tag = f.VLAN_TAG.parse(b"\xa0\x64\x08\x00")
    assert (tag.tci.priority, tag.tci.drop_eligible, tag.tci.vlan_id, tag.ethertype) == (5, False, 100, 0x0800)


@pytest.mark.parametrize("order", ["<", ">"])
@given(fields=st.tuples(U32, U32))
def test_pcapng_block_header_twin(order, fields):
    raw = struct.pack(order + "II", *fields)
    parsed = f.PCAPNG[order]["block_header"].parse(raw)
    assert f.PCAPNG_BLOCK_HEADER_FAST[order].unpack_from(raw) == (parsed.block_type, parsed.block_total_length)
