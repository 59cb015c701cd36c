"""The capture writer: handshake, sequence numbers, segmentation, FIN, checksums, flushing."""
import shutil
import struct
import subprocess

import pytest

from captures import formats as f
from captures import pcapng_writer
from tools.replay.capture import Packet, read_packets
from captures.formats import TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN
from tools.replay.packet import decode_segment

T0 = 1_700_000_000_000_000_000


def segments(source):
    packets = [p for p in read_packets(source) if isinstance(p, Packet)]
    return [decode_segment(p.link_type, p.data, p.orig_len) for p in packets]


def ones_complement_sum(data: bytes) -> int:
    """The textbook loop, to check the writer's big-integer shortcut against."""
    if len(data) % 2:
        data += b"\0"
    total = 0
    for (word,) in struct.iter_unpack("!H", data):
        total += word
        total = (total & 0xFFFF) + (total >> 16)
    return total


def test_connection_writes_handshake_data_and_fin(tmp_path):
    path = tmp_path / "c.pcapng"
    with pcapng_writer.open(path) as writer:
        conn = writer.connection(("10.0.0.1", 50000), ("10.0.0.2", 9092), T0, client_isn=100, server_isn=2**32 - 1, mss=1000)
        conn.client_to_server(bytes(2500), T0 + 1)
        conn.server_to_client(b"ok", T0 + 2)
        conn.close(T0 + 3)
    got = [(s.sport, s.seq, s.ack, s.flags, len(s.payload)) for s in segments(path)]
    assert got == [
        (50000, 100, 0, TCP_SYN, 0),
        (9092, 2**32 - 1, 101, TCP_SYN | TCP_ACK, 0),
        (50000, 101, 0, TCP_ACK, 0),
        (50000, 101, 0, TCP_ACK, 1000),
        (50000, 1101, 0, TCP_ACK, 1000),
        (50000, 2101, 0, TCP_ACK | TCP_PSH, 500),
        (9092, 0, 2601, TCP_ACK | TCP_PSH, 2),
        (50000, 2601, 2, TCP_FIN | TCP_ACK, 0),
        (9092, 2, 2602, TCP_FIN | TCP_ACK, 0),
        (50000, 2602, 3, TCP_ACK, 0),
    ]
    timestamps = [p.timestamp_ns for p in read_packets(path)]
    assert timestamps == [T0] * 3 + [T0 + 1] * 3 + [T0 + 2] + [T0 + 3] * 3


@pytest.mark.parametrize("client,server", [(("10.1.2.3", 1234), ("10.3.2.1", 9092)), (("fd00::7", 1234), ("fd00::9", 9092))])
def test_checksums_are_correct(client, server):
    frame = pcapng_writer.tcp_packet(client[0], client[1], server[0], server[1], 5, 6, TCP_ACK, b"odd length!")
    ip = frame[14:]
    if ip[0] >> 4 == 4:
        assert ones_complement_sum(ip[:20]) == 0xFFFF
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(ip) - 20)
        tcp = ip[20:]
    else:
        tcp = ip[40:]
        pseudo = ip[8:40] + struct.pack("!I3xB", len(tcp), 6)
    assert ones_complement_sum(pseudo + tcp) == 0xFFFF


def test_checksum_shortcut_matches_the_loop_on_edge_values():
    for data in (b"", b"\0\0", b"\xff\xff", b"\xff\xff\xff\xff", b"\x01", bytes(range(256)) * 3):
        assert pcapng_writer._checksum(data) == ~ones_complement_sum(data) & 0xFFFF


def test_file_is_readable_while_the_writer_is_open(tmp_path):
    path = tmp_path / "live.pcapng"
    writer = pcapng_writer.open(path)
    conn = writer.connection(("10.0.0.1", 1), ("10.0.0.2", 9092), T0, client_isn=0, server_isn=0)
    assert len(segments(path)) == 3
    conn.client_to_server(b"abc", T0 + 1)
    assert segments(path)[-1].payload == b"abc"
    conn.close(T0 + 2)
    assert len(segments(path)) == 7
    writer.close()


def test_sending_on_a_closed_connection_is_an_error(tmp_path):
    with pcapng_writer.open(tmp_path / "x.pcapng") as writer:
        conn = writer.connection(("10.0.0.1", 1), ("10.0.0.2", 9092), T0)
        conn.close(T0)
        conn.close(T0)  # closing twice writes nothing more
        with pytest.raises(ValueError):
            conn.client_to_server(b"late", T0)
    assert len(segments(tmp_path / "x.pcapng")) == 6


def test_unknown_format_is_refused_before_a_file_is_made(tmp_path):
    with pytest.raises(ValueError):
        pcapng_writer.open(tmp_path / "x", format="erf")
    assert not (tmp_path / "x").exists()


def test_closing_twice_is_harmless(tmp_path):
    with pcapng_writer.open(tmp_path / "x.pcapng") as writer:
        writer.close()
    assert list(read_packets(tmp_path / "x.pcapng")) == []


def test_pcap_header_fields(tmp_path):
    path = tmp_path / "h.pcap"
    pcapng_writer.open(path, format="pcap", snaplen=128, byte_order=">", nanosecond=False).close()
    header = f.PCAP_FILE_HEADER[">"].parse(path.read_bytes())
    assert (header.magic, header.version_major, header.version_minor) == (f.PCAP_MAGIC_MICRO, 2, 4)
    assert (header.snaplen, header.linktype) == (128, f.LINKTYPE_ETHERNET)


TSHARK = shutil.which("tshark")


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
@pytest.mark.parametrize("fmt", ["pcapng", "pcap"])
def test_tshark_sees_the_same_tcp_segments(tmp_path, fmt):
    path = tmp_path / f"t.{fmt}"
    with pcapng_writer.open(path, format=fmt) as writer:
        a = writer.connection(("10.0.0.1", 40000), ("10.0.0.2", 9092), T0)
        b = writer.connection(("fd00::1", 40001), ("fd00::2", 9092), T0)
        for i in range(20):
            a.client_to_server(bytes(100 * i), T0 + i)
            b.server_to_client(bytes(300 * i), T0 + i)
        a.close(T0 + 50)
        b.close(T0 + 50)
    ours = segments(path)
    result = subprocess.run(
        [TSHARK, "-r", str(path), "-o", "tcp.check_checksum:TRUE", "-Y", "tcp", "-T", "fields"]
        + ["-e", "tcp.srcport", "-e", "tcp.len", "-e", "tcp.checksum.status"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    theirs = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(theirs) == len(ours)
    assert [(int(port), int(length)) for port, length, _ in theirs] == [(s.sport, len(s.payload)) for s in ours]
    assert {status for _, _, status in theirs} == {"1"}  # tshark's "checksum good"


EDITCAP = shutil.which("editcap")


@pytest.mark.skipif(EDITCAP is None, reason="editcap (Wireshark's) is not installed")
@pytest.mark.parametrize("fmt,resolution_ns", [("pcap", 1000), ("nsecpcap", 1), ("pcapng", 1)])
def test_files_rewritten_by_editcap_read_the_same(tmp_path, fmt, resolution_ns):
    ours = tmp_path / "ours.pcapng"
    with pcapng_writer.open(ours) as writer:
        conn = writer.connection(("10.0.0.1", 40000), ("10.0.0.2", 9092), T0 + 123_456_789)
        for i in range(10):
            conn.client_to_server(bytes(range(256)) * i, T0 + 987_654_321 * i)
        conn.close(T0 + 10**10)
    theirs = tmp_path / f"theirs.{fmt}"
    subprocess.run([EDITCAP, "-F", fmt, str(ours), str(theirs)], check=True, capture_output=True)
    expected = [p._replace(timestamp_ns=p.timestamp_ns // resolution_ns * resolution_ns) for p in read_packets(ours)]
    assert list(read_packets(theirs)) == expected


@pytest.mark.skipif(EDITCAP is None, reason="editcap (Wireshark's) is not installed")
def test_snaplen_applied_by_editcap_shows_as_missing_payload(tmp_path):
    ours = tmp_path / "ours.pcapng"
    with pcapng_writer.open(ours) as writer:
        conn = writer.connection(("10.0.0.1", 40000), ("10.0.0.2", 9092), T0)
        conn.client_to_server(bytes(1000), T0)
    cut = tmp_path / "cut.pcapng"
    subprocess.run([EDITCAP, "-s", "100", str(ours), str(cut)], check=True, capture_output=True)
    data_segment = segments(cut)[-1]
    assert (len(data_segment.payload), data_segment.missing) == (100 - 54, 1000 - (100 - 54))
