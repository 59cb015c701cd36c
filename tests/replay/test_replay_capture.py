"""Reading pcap and pcapng files, well-formed, hand-crafted, and damaged."""
import io
import struct
from pathlib import Path

import pytest

from captures import formats as f
from captures import pcapng_writer
from tools.replay.capture import Packet, plain_positions, read_packets, read_positions
from tools.replay.problems import Problem

T0 = 1_700_000_000_123_456_789  # a timestamp with nanoseconds in it


def frame(n: int) -> bytes:
    """A recognisable fake frame of n bytes."""
    return bytes((n + i) % 256 for i in range(n))


def split(events):
    events = list(events)
    packets = [e for e in events if isinstance(e, Packet)]
    problems = [e for e in events if isinstance(e, Problem)]
    return packets, problems


# -- hand-crafted pcap ------------------------------------------------------------------------


def pcap_bytes(order: str, magic: int, link_type: int, records: list[tuple[int, int, bytes, int]], snaplen=65535):
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link_type)
    for sec, frac, data, orig in records:
        out += struct.pack(order + "IIII", sec, frac, len(data), orig) + data
    return out


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcap_microseconds_in_both_byte_orders(order):
    raw = pcap_bytes(order, f.PCAP_MAGIC_MICRO, 1, [(1_700_000_000, 123_456, frame(60), 60), (1_700_000_001, 7, frame(90), 1500)])
    packets, problems = split(read_packets(raw))
    assert problems == []
    assert packets == [
        Packet(1_700_000_000_123_456_000, 1, frame(60), 60),
        Packet(1_700_000_001_000_007_000, 1, frame(90), 1500),
    ]


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcap_nanoseconds_in_both_byte_orders(order):
    raw = pcap_bytes(order, f.PCAP_MAGIC_NANO, 113, [(1_700_000_000, 123_456_789, frame(44), 44)])
    assert list(read_packets(raw)) == [Packet(T0, 113, frame(44), 44)]


def test_pcap_link_type_field_ignores_fcs_bits():
    raw = pcap_bytes("<", f.PCAP_MAGIC_MICRO, 0x10000000 | 1, [(1, 0, frame(20), 20)])
    assert [p.link_type for p in read_packets(raw)] == [1]


def test_pcap_written_by_the_writer_round_trips(tmp_path):
    for order in "<>":
        for nano in (True, False):
            path = tmp_path / f"w{order == '<'}{nano}.pcap"
            with pcapng_writer.open(path, format="pcap", byte_order=order, nanosecond=nano) as writer:
                writer.write_packet(T0, frame(70))
                writer.write_packet(T0 + 1000, frame(80), orig_len=200)
            expected_t0 = T0 if nano else T0 // 1000 * 1000
            assert list(read_packets(path)) == [
                Packet(expected_t0, 1, frame(70), 70),
                Packet(expected_t0 + 1000, 1, frame(80), 200),
            ]
            head = path.read_bytes()[:4]
            assert head == struct.pack(order + "I", f.PCAP_MAGIC_NANO if nano else f.PCAP_MAGIC_MICRO)


# -- hand-crafted pcapng ----------------------------------------------------------------------


def block(order: str, block_type: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    total = len(body) + 12
    return struct.pack(order + "II", block_type, total) + body + struct.pack(order + "I", total)


def option(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def shb(order: str) -> bytes:
    return block(order, f.PCAPNG_SHB, struct.pack(order + "IHHq", f.PCAPNG_BYTE_ORDER_MAGIC, 1, 0, -1))


def idb(order: str, link_type: int, snaplen: int = 0, options: bytes = b"") -> bytes:
    if options:
        options += option(order, 0, b"")
    return block(order, f.PCAPNG_IDB, struct.pack(order + "HHI", link_type, 0, snaplen) + options)


def epb(order: str, if_id: int, ticks: int, data: bytes, orig: int | None = None) -> bytes:
    orig = len(data) if orig is None else orig
    header = struct.pack(order + "IIIII", if_id, ticks >> 32, ticks & 0xFFFFFFFF, len(data), orig)
    return block(order, f.PCAPNG_EPB, header + data)


def spb(order: str, data: bytes, orig: int | None = None) -> bytes:
    orig = len(data) if orig is None else orig
    return block(order, f.PCAPNG_SPB, struct.pack(order + "I", orig) + data)


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_two_interfaces_with_their_own_link_types_and_resolutions(order):
    raw = (
        shb(order)
        + idb(order, f.LINKTYPE_ETHERNET)  # default resolution: microseconds
        + idb(order, f.LINKTYPE_LINUX_SLL, options=option(order, f.OPT_IF_TSRESOL, b"\x09"))
        + block(order, 0x00000BAD, b"custom block, skipped by its length")
        + epb(order, 0, 1_700_000_000_123_456, frame(61))
        + epb(order, 1, T0, frame(62), orig=1000)
        + block(order, 5, b"\0" * 20)  # interface statistics, skipped
        + epb(order, 0, 1_700_000_000_123_457, frame(63))
    )
    packets, problems = split(read_packets(raw))
    assert problems == []
    assert packets == [
        Packet(1_700_000_000_123_456_000, 1, frame(61), 61),
        Packet(T0, 113, frame(62), 1000),
        Packet(1_700_000_000_123_457_000, 1, frame(63), 63),
    ]


def test_pcapng_binary_resolution_and_time_offset():
    resol = option("<", f.OPT_IF_TSRESOL, bytes([0x80 | 10]))  # 2^-10 s per tick
    offset = option("<", f.OPT_IF_TSOFFSET, struct.pack("<q", 100))  # seconds
    raw = shb("<") + idb("<", f.LINKTYPE_RAW, options=resol + offset) + epb("<", 0, 1024 * 5 + 512, frame(40))
    assert list(read_packets(raw)) == [Packet(105_500_000_000, f.LINKTYPE_RAW, frame(40), 40)]


def test_pcapng_packet_time_beyond_64_bit_nanoseconds_is_a_corrupt_block():
    # 2^64 - 1 microseconds is about 1.8e22 ns, more than any 64-bit column of the tables holds.
    raw = shb("<") + idb("<", f.LINKTYPE_RAW) + epb("<", 0, (1 << 64) - 1, frame(40)) + epb("<", 0, 5, frame(41))
    packets, problems = split(read_packets(raw))
    assert packets == [Packet(5_000, f.LINKTYPE_RAW, frame(41), 41)]
    assert [p.kind for p in problems] == ["corrupt_block"]


def test_pcapng_simple_packet_block_uses_snaplen_and_previous_timestamp():
    raw = (
        shb("<")
        + idb("<", f.LINKTYPE_ETHERNET, snaplen=50, options=option("<", f.OPT_IF_TSRESOL, b"\x09"))
        + epb("<", 0, T0, frame(50), orig=80)
        + spb("<", frame(80)[:50], orig=80)
    )
    assert list(read_packets(raw)) == [Packet(T0, 1, frame(50), 80), Packet(T0, 1, frame(80)[:50], 80)]


def test_pcapng_sections_may_change_byte_order_and_interfaces():
    raw = (
        shb("<") + idb("<", f.LINKTYPE_ETHERNET) + epb("<", 0, 1, frame(30))
        + shb(">") + idb(">", f.LINKTYPE_LINUX_SLL2) + epb(">", 0, 2, frame(31))
    )
    assert list(read_packets(raw)) == [Packet(1000, 1, frame(30), 30), Packet(2000, 276, frame(31), 31)]


def test_pcapng_written_by_the_writer_round_trips(tmp_path):
    path = tmp_path / "w.pcapng"
    with pcapng_writer.open(path, snaplen=64) as writer:
        writer.write_packet(T0, frame(60))
        writer.write_packet(T0 + 5, frame(100))
    assert list(read_packets(path)) == [Packet(T0, 1, frame(60), 60), Packet(T0 + 5, 1, frame(100)[:64], 100)]


def test_sources_path_file_object_and_bytes_agree(tmp_path):
    path = tmp_path / "w.pcapng"
    with pcapng_writer.open(path) as writer:
        writer.write_packet(T0, frame(60))
    raw = path.read_bytes()
    expected = [Packet(T0, 1, frame(60), 60)]
    assert list(read_packets(path)) == expected
    assert list(read_packets(str(path))) == expected
    assert list(read_packets(raw)) == expected
    assert list(read_packets(bytearray(raw))) == expected
    assert list(read_packets(io.BytesIO(raw))) == expected
    with open(path, "rb") as fileobj:
        assert list(read_packets(fileobj)) == expected


# -- damage -----------------------------------------------------------------------------------


def test_zero_length_file(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(b"")
    expected = [Problem("empty_file", 0, 0, "the capture file is empty")]
    assert list(read_packets(path)) == expected
    assert list(read_packets(b"")) == expected


def test_unknown_format_and_short_headers():
    assert [p.kind for p in read_packets(b"GIF89a..")] == ["unknown_format"]
    assert [p.kind for p in read_packets(b"\xd4\xc3")] == ["truncated_file"]
    assert [(p.kind, p.size) for p in read_packets(struct.pack("<I", f.PCAP_MAGIC_MICRO) + b"\0" * 10)] == [
        ("truncated_file", 14)
    ]


def test_pcap_truncated_inside_the_last_packet():
    raw = pcap_bytes("<", f.PCAP_MAGIC_MICRO, 1, [(1, 0, frame(60), 60), (2, 0, frame(100), 100)])
    packets, problems = split(read_packets(raw[:-30]))
    assert packets == [Packet(1_000_000_000, 1, frame(60), 60)]
    assert [(p.kind, p.offset, p.size) for p in problems] == [("truncated_record", 24 + 16 + 60, 30)]


def test_pcap_truncated_inside_a_record_header():
    raw = pcap_bytes("<", f.PCAP_MAGIC_MICRO, 1, [(1, 0, frame(60), 60), (2, 0, frame(100), 100)])
    cut = 24 + 16 + 60 + 10
    packets, problems = split(read_packets(raw[:cut]))
    assert len(packets) == 1
    assert [(p.kind, p.offset, p.size) for p in problems] == [("truncated_record", 100, 6)]


def test_pcap_corrupt_record_is_skipped_and_the_rest_read():
    good = [(1, 0, frame(60), 60), (2, 0, frame(61), 61), (3, 0, frame(62), 62), (4, 0, frame(63), 63)]
    raw = bytearray(pcap_bytes("<", f.PCAP_MAGIC_MICRO, 1, good))
    second = 24 + 16 + 60
    struct.pack_into("<I", raw, second + 8, 0x7FFFFFFF)  # incl_len of the second record
    packets, problems = split(read_packets(bytes(raw)))
    assert [p.data for p in packets] == [frame(60), frame(62), frame(63)]
    assert [(p.kind, p.offset, p.size) for p in problems] == [("corrupt_record", second, 16 + 61)]


def test_pcapng_truncated_file_keeps_earlier_packets(tmp_path):
    path = tmp_path / "cut.pcapng"
    with pcapng_writer.open(path) as writer:
        for i in range(3):
            writer.write_packet(T0 + i, frame(60 + i))
    raw = path.read_bytes()
    # Section and interface blocks (28 + 32), then packet blocks of 92, 96 and 96 bytes.
    last_block = 28 + 32 + 92 + 96
    assert len(raw) == last_block + 96
    packets, problems = split(read_packets(raw[: last_block + 40]))
    assert [p.data for p in packets] == [frame(60), frame(61)]
    total = 96
    assert [(p.kind, p.offset, p.size) for p in problems] == [("truncated_block", last_block, total - 40)]


def test_pcapng_corrupt_block_is_skipped_by_finding_the_next_block():
    blocks = [epb("<", 0, i, frame(50 + i)) for i in range(4)]
    head = shb("<") + idb("<", 1)
    damaged = bytearray(blocks[1])
    struct.pack_into("<I", damaged, 4, 0xFFFF)  # its length no longer matches its trailer
    raw = head + blocks[0] + bytes(damaged) + blocks[2] + blocks[3]
    packets, problems = split(read_packets(raw))
    assert [p.data for p in packets] == [frame(50), frame(52), frame(53)]
    at = len(head) + len(blocks[0])
    assert [(p.kind, p.offset, p.size) for p in problems] == [("corrupt_block", at, len(blocks[1]))]


def test_unknown_link_type_interface_is_skipped_and_counted_the_rest_read():
    blocks = [
        shb("<"),
        idb("<", 147),  # a user link type
        idb("<", f.LINKTYPE_ETHERNET),
        epb("<", 0, 1, frame(40)),
        epb("<", 1, 2, frame(41)),
        epb("<", 0, 3, frame(42)),
        epb("<", 2, 4, frame(43)),  # an interface nobody declared
        epb("<", 1, 5, frame(44)),
    ]
    packets, problems = split(read_packets(b"".join(blocks)))
    assert [p.data for p in packets] == [frame(41), frame(44)]
    undeclared_at = sum(map(len, blocks[:6]))
    assert [(p.kind, p.offset, p.size) for p in problems] == [
        ("unknown_interface", undeclared_at, len(blocks[6])),
        ("unknown_link_type", len(blocks[0]), 2),
    ]
    assert "link type 147" in problems[1].detail


def test_pcap_with_unknown_link_type_reports_the_count():
    raw = pcap_bytes("<", f.PCAP_MAGIC_MICRO, 147, [(1, 0, frame(40), 40)] * 3)
    assert [(p.kind, p.size) for p in read_packets(raw)] == [("unknown_link_type", 3)]


# -- plain pcapng, read many blocks at once ----------------------------------------------------


def plain_cases() -> dict[str, tuple[bytes, bool]]:
    """Captures and whether each is plain (see `plain_positions`)."""
    two = (shb("<") + idb("<", f.LINKTYPE_ETHERNET)
           + idb("<", f.LINKTYPE_LINUX_SLL, options=option("<", f.OPT_IF_TSRESOL, b"\x09"))
           + block("<", 0x00000BAD, b"custom block, skipped by its length")
           + epb("<", 0, 1_700_000_000_123_456, frame(61)) + epb("<", 1, T0, frame(62), orig=1000)
           + block("<", 5, b"\0" * 20) + epb("<", 0, 1_700_000_000_123_457, frame(63)))
    mismatched = bytearray(two)
    struct.pack_into("<I", mismatched, len(two) - 4, 999)
    binary = option("<", f.OPT_IF_TSRESOL, bytes([0x80 | 10]))
    offset = option("<", f.OPT_IF_TSOFFSET, struct.pack("<q", 100))
    return {
        "two interfaces": (two, True),
        "time offset": (shb("<") + idb("<", f.LINKTYPE_RAW, options=offset) + epb("<", 0, 7, frame(40)), True),
        "no packets": (shb("<") + idb("<", f.LINKTYPE_RAW), True),
        "big-endian": (shb(">") + idb(">", f.LINKTYPE_ETHERNET) + epb(">", 0, 1, frame(30)), False),
        "binary time units": (shb("<") + idb("<", f.LINKTYPE_RAW, options=binary) + epb("<", 0, 9, frame(40)), False),
        "time past 64 bits": (shb("<") + idb("<", f.LINKTYPE_RAW) + epb("<", 0, (1 << 64) - 1, frame(40)), False),
        "simple packet": (shb("<") + idb("<", f.LINKTYPE_ETHERNET) + spb("<", frame(50)), False),
        "two sections": (shb("<") + idb("<", 1) + epb("<", 0, 1, frame(30)) + shb("<") + idb("<", 1), False),
        "interface after a packet": (shb("<") + idb("<", 1) + epb("<", 0, 1, frame(30)) + idb("<", 1)
                                     + epb("<", 1, 2, frame(31)), False),
        "unknown link type": (shb("<") + idb("<", 147) + epb("<", 0, 1, frame(30)), False),
        "packet on an undeclared interface": (shb("<") + idb("<", 1) + epb("<", 3, 1, frame(30)), False),
        "trailing length differs": (bytes(mismatched), False),
        "cut short": (two[:-9], False),
        "not a capture": (b"\0" * 64, False),
    }


@pytest.mark.parametrize("name", list(plain_cases()))
def test_plain_pcapng_read_at_once_gives_the_walk_s_positions(name):
    raw, plain = plain_cases()[name]
    walked = list(read_positions(raw))
    read = plain_positions(raw)
    assert (read is not None) == plain
    if read is not None:
        assert not any(isinstance(item, Problem) for item in walked)
        assert [tuple(int(v) for v in row) for row in zip(*read)] == walked


def test_the_walkthrough_capture_is_plain():
    raw = (Path(__file__).parent / "data" / "walkthrough.pcapng").read_bytes()
    read = plain_positions(raw)
    assert read is not None
    assert [tuple(int(v) for v in row) for row in zip(*read)] == list(read_positions(raw))
