"""Writing captures of TCP connections synthesised from application bytes.

    with pcapng_writer.open("kafka.pcapng") as capture:
        conn = capture.connection(("10.0.0.1", 50000), ("10.0.0.2", 9092))
        conn.client_to_server(request_bytes, ts_ns)
        conn.server_to_client(response_bytes, ts_ns)
        conn.close()

Each connection gets a SYN/SYN-ACK/ACK handshake, data segments of at most `mss` bytes with
consistent sequence and acknowledgement numbers, and a FIN exchange; every packet is an
Ethernet frame with IPv4 or IPv6 (by address) and correct checksums. Each connection call
flushes the file, so a reader sees the traffic as it happens.
"""
from __future__ import annotations

import builtins
import ipaddress
import os
import random
import struct
import time
from typing import BinaryIO, Self, TypedDict, Union, Unpack

from captures import formats as f
from captures.formats import TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN

_ETHERNET = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_IPV6 = struct.Struct("!IHBB16s16s")
_TCP = struct.Struct("!HHIIBBHHH")
_EPB = struct.Struct("<7I")
_U32 = struct.Struct("<I")
_SEQ_MASK = 0xFFFFFFFF
# The largest snaplen libpcap writes; used when no truncation is asked for.
_FULL_SNAPLEN = 262144

Endpoint = tuple[str, int]


def tcp_packet(
    src: str,
    sport: int,
    dst: str,
    dport: int,
    seq: int,
    ack: int,
    flags: int,
    payload: bytes = b"",
    window: int = 65535,
) -> bytes:
    """An Ethernet frame carrying one TCP segment over IPv4 or IPv6, checksums included."""
    src_ip, dst_ip = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    src_addr, dst_addr = src_ip.packed, dst_ip.packed
    tcp_length = _TCP.size + len(payload)
    if src_ip.version == 4:
        pseudo = src_addr + dst_addr + struct.pack("!BBH", 0, f.IPPROTO_TCP, tcp_length)
    else:
        pseudo = src_addr + dst_addr + struct.pack("!I3xB", tcp_length, f.IPPROTO_TCP)
    header = _TCP.pack(sport, dport, seq & _SEQ_MASK, ack & _SEQ_MASK, 5 << 4, flags, window, 0, 0)
    checksum = _checksum(pseudo + header + payload)
    tcp = header[:16] + checksum.to_bytes(2, "big") + header[18:] + payload
    if src_ip.version == 4:
        ip = _IPV4.pack(0x45, 0, 20 + tcp_length, 0, 0x4000, 64, f.IPPROTO_TCP, 0, src_addr, dst_addr)
        ip = ip[:10] + _checksum(ip).to_bytes(2, "big") + ip[12:]
        ethertype = f.ETHERTYPE_IPV4
    else:
        ip = _IPV6.pack(6 << 28, tcp_length, f.IPPROTO_TCP, 64, src_addr, dst_addr)
        ethertype = f.ETHERTYPE_IPV6
    return _ETHERNET.pack(_mac(dst_addr), _mac(src_addr), ethertype) + ip + tcp


def _checksum(data: bytes) -> int:
    # The ones'-complement sum of 16-bit words is the whole big-endian number modulo 0xFFFF,
    # since 0x10000 = 1 (mod 0xFFFF): one C-speed big-integer operation instead of a loop.
    if len(data) % 2:
        data += b"\0"
    number = int.from_bytes(data, "big")
    folded = number % 0xFFFF
    if folded == 0 and number:
        folded = 0xFFFF
    return ~folded & 0xFFFF


def _mac(address: bytes) -> bytes:
    # A locally administered address derived from the IP, so each host keeps one MAC.
    return b"\x02\x00" + address[-4:]


class Connection:
    """One TCP connection of a capture, from handshake to FIN."""

    def __init__(
        self, writer: _Writer, client: Endpoint, server: Endpoint, timestamp_ns: int, client_isn: int, server_isn: int, mss: int
    ) -> None:
        self._writer = writer
        self._client, self._server = client, server
        self._mss = mss
        self._client_seq = (client_isn + 1) & _SEQ_MASK
        self._server_seq = (server_isn + 1) & _SEQ_MASK
        self._closed = False
        self._packet(True, client_isn, 0, TCP_SYN, b"", timestamp_ns)
        self._packet(False, server_isn, self._client_seq, TCP_SYN | TCP_ACK, b"", timestamp_ns)
        self._packet(True, self._client_seq, self._server_seq, TCP_ACK, b"", timestamp_ns)
        writer.flush()

    def client_to_server(self, data: bytes, timestamp_ns: int | None = None) -> None:
        self._send(True, data, timestamp_ns)

    def server_to_client(self, data: bytes, timestamp_ns: int | None = None) -> None:
        self._send(False, data, timestamp_ns)

    def close(self, timestamp_ns: int | None = None) -> None:
        """FIN from the client, FIN from the server, the client's last ACK."""
        if self._closed:
            return
        self._closed = True
        ts = time.time_ns() if timestamp_ns is None else timestamp_ns
        self._packet(True, self._client_seq, self._server_seq, TCP_FIN | TCP_ACK, b"", ts)
        self._client_seq = (self._client_seq + 1) & _SEQ_MASK
        self._packet(False, self._server_seq, self._client_seq, TCP_FIN | TCP_ACK, b"", ts)
        self._server_seq = (self._server_seq + 1) & _SEQ_MASK
        self._packet(True, self._client_seq, self._server_seq, TCP_ACK, b"", ts)
        self._writer.flush()

    def _send(self, from_client: bool, data: bytes, timestamp_ns: int | None) -> None:
        if self._closed:
            raise ValueError("connection is closed")
        ts = time.time_ns() if timestamp_ns is None else timestamp_ns
        for at in range(0, len(data), self._mss):
            chunk = data[at : at + self._mss]
            flags = TCP_ACK | (TCP_PSH if at + self._mss >= len(data) else 0)
            if from_client:
                self._packet(True, self._client_seq, self._server_seq, flags, chunk, ts)
                self._client_seq = (self._client_seq + len(chunk)) & _SEQ_MASK
            else:
                self._packet(False, self._server_seq, self._client_seq, flags, chunk, ts)
                self._server_seq = (self._server_seq + len(chunk)) & _SEQ_MASK
        self._writer.flush()

    def _packet(self, from_client: bool, seq: int, ack: int, flags: int, payload: bytes, ts: int) -> None:
        (src, sport), (dst, dport) = (self._client, self._server) if from_client else (self._server, self._client)
        self._writer.write_packet(ts, tcp_packet(src, sport, dst, dport, seq, ack, flags, payload))


class _Writer:
    def __init__(self, fileobj: BinaryIO, snaplen: int, owns_file: bool) -> None:
        self._file = fileobj
        self._owns_file = owns_file
        self.snaplen = snaplen
        fileobj.write(self._file_header())
        fileobj.flush()

    def _file_header(self) -> bytes:
        raise NotImplementedError

    def _record(self, timestamp_ns: int, data: bytes, orig_len: int) -> bytes:
        raise NotImplementedError

    def write_packet(self, timestamp_ns: int, frame: bytes, orig_len: int | None = None) -> None:
        """Append one Ethernet frame, cut to the snaplen; `orig_len` defaults to its length."""
        if orig_len is None:
            orig_len = len(frame)
        if self.snaplen and len(frame) > self.snaplen:
            frame = frame[: self.snaplen]
        self._file.write(self._record(timestamp_ns, frame, orig_len))

    def connection(
        self,
        client: Endpoint,
        server: Endpoint,
        timestamp_ns: int | None = None,
        client_isn: int | None = None,
        server_isn: int | None = None,
        mss: int = 1460,
    ) -> Connection:
        """Open a connection (its handshake is written now); ISNs are random unless given."""
        ts = time.time_ns() if timestamp_ns is None else timestamp_ns
        if client_isn is None:
            client_isn = random.getrandbits(32)
        if server_isn is None:
            server_isn = random.getrandbits(32)
        return Connection(self, client, server, ts, client_isn, server_isn, mss)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.flush()
        if self._owns_file:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class PcapngWriter(_Writer):
    """pcapng: one section, one Ethernet interface with nanosecond timestamps."""

    def _file_header(self) -> bytes:
        layouts = f.PCAPNG["<"]
        shb = layouts["shb"].build(
            dict(
                block_type=f.PCAPNG_SHB,
                block_total_length=28,
                byte_order_magic=f.PCAPNG_BYTE_ORDER_MAGIC,
                version_major=1,
                version_minor=0,
                section_length=-1,  # unknown: the file is written as it goes
                options=[],
                block_total_length_trailer=28,
            )
        )
        options = [dict(code=f.OPT_IF_TSRESOL, length=1, value=b"\x09"), dict(code=f.OPT_ENDOFOPT, length=0, value=b"")]
        idb = layouts["idb"].build(
            dict(
                block_type=f.PCAPNG_IDB,
                block_total_length=32,
                linktype=f.LINKTYPE_ETHERNET,
                reserved=0,
                snaplen=self.snaplen,
                options=options,
                block_total_length_trailer=32,
            )
        )
        return shb + idb

    def _record(self, timestamp_ns: int, data: bytes, orig_len: int) -> bytes:
        padding = -len(data) % 4
        total = f.PCAPNG_EPB_FIXED_SIZE + len(data) + padding + 4
        header = _EPB.pack(
            f.PCAPNG_EPB, total, 0, timestamp_ns >> 32, timestamp_ns & 0xFFFFFFFF, len(data), orig_len
        )
        return header + data + b"\0" * padding + _U32.pack(total)


class PcapWriter(_Writer):
    """pcap in either byte order, with microsecond or nanosecond timestamps."""

    def __init__(
        self, fileobj: BinaryIO, snaplen: int, owns_file: bool, byte_order: str = "<", nanosecond: bool = True
    ) -> None:
        self._order = byte_order
        self._nanosecond = nanosecond
        self._record_header = f.PCAP_RECORD_HEADER_FAST[byte_order]
        super().__init__(fileobj, snaplen, owns_file)

    def _file_header(self) -> bytes:
        return f.PCAP_FILE_HEADER[self._order].build(
            dict(
                magic=f.PCAP_MAGIC_NANO if self._nanosecond else f.PCAP_MAGIC_MICRO,
                version_major=2,
                version_minor=4,
                thiszone=0,
                sigfigs=0,
                snaplen=self.snaplen or _FULL_SNAPLEN,
                linktype=f.LINKTYPE_ETHERNET,
            )
        )

    def _record(self, timestamp_ns: int, data: bytes, orig_len: int) -> bytes:
        seconds, fraction = divmod(timestamp_ns, 1_000_000_000)
        if not self._nanosecond:
            fraction //= 1000
        return self._record_header.pack(seconds, fraction, len(data), orig_len) + data


class PcapOptions(TypedDict, total=False):
    byte_order: str
    nanosecond: bool


def open(  # shadows the builtin on purpose: callers write pcapng_writer.open(path)
    path: Union[str, "os.PathLike[str]", BinaryIO],
    format: str = "pcapng",
    snaplen: int = 0,
    **options: Unpack[PcapOptions],
) -> PcapngWriter | PcapWriter:
    """A writer on `path` (or an open binary file): format "pcapng", or "pcap" with the
    options `byte_order` ("<" or ">") and `nanosecond`. `snaplen` > 0 truncates packets."""
    if format not in ("pcapng", "pcap"):
        raise ValueError(f"format must be 'pcapng' or 'pcap', not {format!r}")
    if format == "pcapng" and options:
        raise TypeError(f"the pcapng format takes no {', '.join(options)} option")
    fileobj: BinaryIO
    if isinstance(path, (str, os.PathLike)):
        fileobj, owns_file = builtins.open(path, "wb"), True
    else:
        fileobj, owns_file = path, False
    if format == "pcap":
        return PcapWriter(fileobj, snaplen, owns_file, **options)
    return PcapngWriter(fileobj, snaplen, owns_file)
