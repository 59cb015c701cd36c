"""Packets out of pcap and pcapng files, with damage reported as `Problem`s, not raised.

A damaged region is skipped up to the next position that provably starts a record or block
again, so one bad spot does not lose the rest of the file.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import struct
from typing import BinaryIO, Callable, Generator, Iterator, NamedTuple, Union

import numpy as np
import numpy.typing as npt

from captures import formats as f
from tools.replay.problems import Problem

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO]
Buffer = Union[bytes, mmap.mmap]

# libpcap refuses records larger than this unless the snaplen says otherwise.
_MAX_RECORD = 262144
# A resynchronised pcap record must lie within a day of the last good one.
_MAX_CLOCK_JUMP_S = 86400
# Packet times, in nanoseconds, must fit the tables' 64-bit columns: a damaged 64-bit pcapng
# timestamp can overflow them and would fail a whole Spark job.
_MIN_TS_NS, _MAX_TS_NS = -(1 << 63), (1 << 63) - 1


class Packet(NamedTuple):
    timestamp_ns: int
    link_type: int
    data: bytes
    orig_len: int


class _Interface(NamedTuple):
    link_type: int
    known: bool  # whether the packet decoder understands the link type
    snaplen: int
    ts_mult: int  # nanoseconds per tick when a tick is a whole number of them, else 0
    ts_units: int  # ticks per second
    ts_offset_ns: int
    block_offset: int


def read_packets(source: Source) -> Iterator[Packet | Problem]:
    """Yield every packet of a pcap or pcapng capture, and a `Problem` for each damaged part.

    `source` is a path, an open binary file, or the file's bytes. Packets whose link type
    `formats.LINK_TYPES` does not list are skipped and counted in one problem per interface.
    """
    with open_buffer(source) as buf:
        for item in read_positions(buf):
            if isinstance(item, Problem):
                yield item
            else:
                timestamp_ns, link_type, at, caplen, orig_len = item
                yield Packet(timestamp_ns, link_type, buf[at : at + caplen], orig_len)


# Where one packet's bytes are in the capture, without them: (timestamp_ns, link type, offset,
# captured length, original length). A plain tuple: an index makes millions.
Position = tuple[int, int, int, int, int]


def read_positions(buf: Buffer) -> Iterator[Position | Problem]:
    """`read_packets` over a capture's bytes, giving where each packet lies instead of its bytes."""
    problem = format_problem(buf)
    if problem is not None:
        yield problem
        return
    magic = f.PCAPNG_U32["<"].unpack_from(buf, 0)[0]
    if magic == f.PCAPNG_SHB:
        yield from _read_pcapng(buf)
    else:
        order, nano = _PCAP_MAGICS[magic]
        yield from _read_pcap(buf, order, nano)


@contextlib.contextmanager
def open_buffer(source: Source) -> Iterator[Buffer]:
    if isinstance(source, bytes):
        yield source
    elif isinstance(source, (bytearray, memoryview)):
        yield bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fileobj, _map(fileobj) as buf:
            yield buf
    else:
        with _map(source) as buf:
            yield buf


@contextlib.contextmanager
def _map(fileobj: BinaryIO) -> Iterator[Buffer]:
    # Mapping keeps a multi-gigabyte capture out of memory; slicing an mmap copies only the
    # packet. Streams without a file descriptor, and empty files (which cannot be mapped),
    # are read whole.
    try:
        size = os.fstat(fileobj.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        yield fileobj.read()
        return
    if size == 0:
        yield b""
        return
    with mmap.mmap(fileobj.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        yield mapped


_PCAP_MAGICS = {
    # first four bytes read little-endian -> (byte order, nanosecond timestamps)
    f.PCAP_MAGIC_MICRO: ("<", False),
    f.PCAP_MAGIC_NANO: ("<", True),
    int.from_bytes(f.PCAP_MAGIC_MICRO.to_bytes(4, "little"), "big"): (">", False),
    int.from_bytes(f.PCAP_MAGIC_NANO.to_bytes(4, "little"), "big"): (">", True),
}


def format_problem(buf: Buffer) -> Problem | None:
    """Why a file that begins with ``buf`` is no capture: empty, too short for a magic number,
    or a magic number of neither format. None for pcap and pcapng; the first four bytes tell."""
    if len(buf) == 0:
        return Problem("empty_file", 0, 0, "the capture file is empty")
    if len(buf) < 4:
        return Problem("truncated_file", 0, len(buf), "too short to hold a file header")
    magic = f.PCAPNG_U32["<"].unpack_from(buf, 0)[0]
    if magic == f.PCAPNG_SHB or magic in _PCAP_MAGICS:
        return None
    return Problem("unknown_format", 0, len(buf), f"magic 0x{magic:08x} is neither pcap nor pcapng")


# ---------------------------------------------------------------------------------------------
# pcap


def _read_pcap(buf: Buffer, order: str, nano: bool) -> Iterator[Position | Problem]:
    n = len(buf)
    if n < f.PCAP_FILE_HEADER_SIZE:
        yield Problem("truncated_file", 0, n, "the pcap file header is cut short")
        return
    header = f.PCAP_FILE_HEADER[order].parse(bytes(buf[: f.PCAP_FILE_HEADER_SIZE]))
    link_type = header.linktype & f.PCAP_LINKTYPE_MASK
    known = link_type in f.LINK_TYPES
    max_len = max(header.snaplen, _MAX_RECORD)
    frac_ns = 1 if nano else 1000
    frac_limit = 1_000_000_000 if nano else 1_000_000
    unpack = f.PCAP_RECORD_HEADER_FAST[order].unpack_from
    hsize = f.PCAP_RECORD_HEADER_SIZE
    skipped = 0
    last_sec = None
    pos = f.PCAP_FILE_HEADER_SIZE
    while pos < n:
        if n - pos < hsize:
            yield Problem("truncated_record", pos, hsize - (n - pos), "the last record header is cut short")
            break
        sec, frac, incl, orig = unpack(buf, pos)
        if incl > max_len or frac >= frac_limit:
            resume = _resync_pcap(buf, pos + 1, unpack, max_len, frac_limit, last_sec)
            end = n if resume is None else resume
            yield Problem("corrupt_record", pos, end - pos, "implausible record header; bytes skipped")
            pos = end
            continue
        end = pos + hsize + incl
        if end > n:
            yield Problem(
                "truncated_record", pos, end - n, f"record of {incl} bytes has only {n - pos - hsize}"
            )
            break
        last_sec = sec
        if known:
            yield sec * 1_000_000_000 + frac * frac_ns, link_type, pos + hsize, incl, orig
        else:
            skipped += 1
        pos = end
    if skipped:
        yield _unknown_link_type(20, 0, link_type, skipped)


def _resync_pcap(
    buf: Buffer,
    start: int,
    unpack: Callable[[Buffer, int], tuple[int, ...]],
    max_len: int,
    frac_limit: int,
    last_sec: int | None,
) -> int | None:
    """First offset from `start` holding a plausible record that a second one follows."""
    n = len(buf)
    hsize = f.PCAP_RECORD_HEADER_SIZE

    def plausible(q: int) -> bool:
        sec, frac, incl, orig = unpack(buf, q)
        if incl > max_len or frac >= frac_limit or orig < incl:
            return False
        return last_sec is None or abs(sec - last_sec) <= _MAX_CLOCK_JUMP_S

    for q in range(start, n - hsize + 1):
        if not plausible(q):
            continue
        end = q + hsize + unpack(buf, q)[2]
        # The chain may also end exactly at the end of the file, or in a cut-short header.
        if end == n or (end < n and (n - end < hsize or plausible(end))):
            return q
    return None


# ---------------------------------------------------------------------------------------------
# pcapng


def _read_pcapng(buf: Buffer) -> Iterator[Position | Problem]:
    # The loop runs once per packet: module constants are bound to locals.
    n = len(buf)
    epb_type, spb_type, idb_type, shb_type = f.PCAPNG_EPB, f.PCAPNG_SPB, f.PCAPNG_IDB, f.PCAPNG_SHB
    min_block, epb_fixed = f.PCAPNG_MIN_BLOCK_SIZE, f.PCAPNG_EPB_FIXED_SIZE
    min_ts, max_ts = _MIN_TS_NS, _MAX_TS_NS
    order = "<"
    header = f.PCAPNG_BLOCK_HEADER_FAST[order].unpack_from
    u32 = f.PCAPNG_U32[order].unpack_from
    epb = f.PCAPNG_EPB_FAST[order].unpack_from
    interfaces: list[_Interface] = []
    skipped: dict[int, int] = {}
    last_ts = 0
    pos = 0
    while pos < n:
        if n - pos < min_block:
            yield Problem("truncated_block", pos, min_block - (n - pos), "the last block header is cut short")
            break
        block_type, total = header(buf, pos)
        if block_type == shb_type:
            section_order = _section_order(buf, pos)
            if section_order is None:
                pos = yield from _skip_corrupt(buf, pos, order, "section header with a bad byte-order magic")
                continue
            yield from _unknown_link_types(interfaces, skipped)
            order, interfaces, skipped = section_order, [], {}
            header = f.PCAPNG_BLOCK_HEADER_FAST[order].unpack_from
            u32 = f.PCAPNG_U32[order].unpack_from
            epb = f.PCAPNG_EPB_FAST[order].unpack_from
            total = u32(buf, pos + 4)[0]
        if total < min_block or total % 4:
            pos = yield from _skip_corrupt(buf, pos, order, f"block length {total} is invalid")
            continue
        if pos + total > n:
            yield Problem("truncated_block", pos, pos + total - n, f"block of {total} bytes has only {n - pos}")
            break
        if u32(buf, pos + total - 4)[0] != total:
            pos = yield from _skip_corrupt(buf, pos, order, "block length and trailing length differ")
            continue

        if block_type == epb_type:
            _, _, if_id, ts_high, ts_low, caplen, orig = epb(buf, pos)
            if epb_fixed + caplen + 4 > total:
                yield Problem("corrupt_block", pos, total, f"packet of {caplen} bytes overruns its block")
            elif if_id >= len(interfaces):
                yield Problem("unknown_interface", pos, total, f"packet on undeclared interface {if_id}")
            else:
                iface = interfaces[if_id]
                if iface.known:
                    ticks = (ts_high << 32) | ts_low
                    if iface.ts_mult:
                        ts = ticks * iface.ts_mult + iface.ts_offset_ns
                    else:
                        ts = ticks * 1_000_000_000 // iface.ts_units + iface.ts_offset_ns
                    if not min_ts <= ts <= max_ts:
                        yield Problem("corrupt_block", pos, total, f"packet time {ts} ns is out of range")
                    else:
                        last_ts = ts
                        yield last_ts, iface.link_type, pos + epb_fixed, caplen, orig
                else:
                    skipped[if_id] = skipped.get(if_id, 0) + 1
        elif block_type == spb_type:
            if not interfaces:
                yield Problem("unknown_interface", pos, total, "simple packet before any interface")
            elif interfaces[0].known:
                yield _simple_packet(buf, pos, total, order, interfaces[0], last_ts)
            else:
                skipped[0] = skipped.get(0, 0) + 1
        elif block_type == idb_type:
            iface = _interface(buf, pos, total, order)
            if isinstance(iface, Problem):
                yield iface
                # Keep interface numbering in step with the file's own.
                iface = _Interface(-1, False, 0, 1000, 1_000_000, 0, pos)
            interfaces.append(iface)
        elif block_type == shb_type:
            try:
                f.PCAPNG[order]["shb"].parse(bytes(buf[pos : pos + total]))
            except f.PARSE_ERRORS as err:
                yield Problem("corrupt_block", pos, total, f"section header: {err}")
        pos += total
    yield from _unknown_link_types(interfaces, skipped)


def _section_order(buf: Buffer, pos: int) -> str | None:
    if len(buf) - pos < 12:
        return None
    magic = f.PCAPNG_U32["<"].unpack_from(buf, pos + 8)[0]
    if magic == f.PCAPNG_BYTE_ORDER_MAGIC:
        return "<"
    if magic == f.PCAPNG_U32[">"].unpack(f.PCAPNG_U32["<"].pack(f.PCAPNG_BYTE_ORDER_MAGIC))[0]:
        return ">"
    return None


def _interface(buf: Buffer, pos: int, total: int, order: str) -> _Interface | Problem:
    try:
        idb = f.PCAPNG[order]["idb"].parse(bytes(buf[pos : pos + total]))
    except f.PARSE_ERRORS as err:
        return Problem("corrupt_block", pos, total, f"interface description: {err}")
    units, offset_ns = 1_000_000, 0
    for option in idb.options:
        if option.code == f.OPT_ENDOFOPT:
            break
        if option.code == f.OPT_IF_TSRESOL and option.length == 1:
            resol = option.value[0]
            units = 2 ** (resol & 0x7F) if resol & 0x80 else 10**resol
        elif option.code == f.OPT_IF_TSOFFSET and option.length == 8:
            offset_ns = int.from_bytes(option.value, "little" if order == "<" else "big", signed=True)
            offset_ns *= 1_000_000_000
    mult = 1_000_000_000 // units if 1_000_000_000 % units == 0 else 0
    return _Interface(idb.linktype, idb.linktype in f.LINK_TYPES, idb.snaplen, mult, units, offset_ns, pos)


def _simple_packet(buf: Buffer, pos: int, total: int, order: str, iface: _Interface, last_ts: int) -> Position:
    # A simple packet block belongs to interface 0 and has no timestamp of its own; it gets
    # the previous packet's, so time never runs backwards for the layers above.
    orig = f.PCAPNG_U32[order].unpack_from(buf, pos + 8)[0]
    caplen = min(orig, total - 16)
    if iface.snaplen:
        caplen = min(caplen, iface.snaplen)
    return last_ts, iface.link_type, pos + 12, caplen, orig


def _skip_corrupt(buf: Buffer, pos: int, order: str, why: str) -> Generator[Problem, None, int]:
    resume = _resync_pcapng(buf, pos + 4, order)
    end = len(buf) if resume is None else resume
    yield Problem("corrupt_block", pos, end - pos, f"{why}; bytes skipped")
    return end


def _resync_pcapng(buf: Buffer, start: int, order: str) -> int | None:
    """First 32-bit-aligned offset from `start` where a whole, self-consistent block starts."""
    n = len(buf)
    u32 = f.PCAPNG_U32[order].unpack_from
    for q in range(start, n - f.PCAPNG_MIN_BLOCK_SIZE + 1, 4):
        block_type, total = u32(buf, q)[0], u32(buf, q + 4)[0]
        if block_type not in f.PCAPNG_KNOWN_BLOCKS or total < f.PCAPNG_MIN_BLOCK_SIZE or total % 4:
            continue
        if q + total <= n and u32(buf, q + total - 4)[0] == total:
            return q
    return None


def _unknown_link_types(interfaces: list[_Interface], skipped: dict[int, int]) -> Iterator[Problem]:
    for if_id, count in sorted(skipped.items()):
        iface = interfaces[if_id]
        yield _unknown_link_type(iface.block_offset, if_id, iface.link_type, count)


def _unknown_link_type(offset: int, if_id: int, link_type: int, count: int) -> Problem:
    what = f"link type {link_type}" if link_type >= 0 else "an unreadable description"
    return Problem("unknown_link_type", offset, count, f"interface {if_id} has {what}: {count} packets skipped")


# ---------------------------------------------------------------------------------------------
# plain pcapng, many blocks at once


class Positions(NamedTuple):
    """Where a capture's packets lie, one column per field of `Position`."""

    timestamp_ns: npt.NDArray[np.int64]
    link_type: npt.NDArray[np.int64]
    at: npt.NDArray[np.int64]
    caplen: npt.NDArray[np.int64]
    orig_len: npt.NDArray[np.int64]


def plain_positions(buf: Buffer) -> Positions | None:
    """`read_positions` of a plain capture, its blocks read many at once: one little-endian
    pcapng section whose interfaces, of link types the decoder reads and with decimal time
    units, are declared before its first packet, and whose every packet is an enhanced packet
    block that fits its block, in range of time. Every block's length must match its trailing
    copy and the last block end the file. A capture that is not plain gives None, and the
    block-by-block walk, which reports what it finds wrong, reads it instead."""
    n = len(buf)
    if format_problem(buf) is not None or _section_order(buf, 0) != "<" \
            or f.PCAPNG_U32["<"].unpack_from(buf, 0)[0] != f.PCAPNG_SHB:
        return None
    length = f.PCAPNG_U32["<"].unpack_from
    min_block = f.PCAPNG_MIN_BLOCK_SIZE
    starts: list[int] = []
    add = starts.append
    pos = 0
    try:
        # Only the lengths, one block after another: the loop a packet costs, kept to that.
        while pos < n:
            add(pos)
            total = length(buf, pos + 4)[0]
            if total < min_block or total % 4:
                return None
            pos += total
    except struct.error:
        return None
    if pos != n:
        return None
    # Every block starts and ends at a multiple of 4 bytes: its fields are whole words.
    words = np.frombuffer(buf, "<u4")
    try:
        return _plain_columns(buf, words, np.array(starts, np.int64) // 4)
    finally:
        del words  # a mapped file cannot close while an array still looks into it


def _plain_columns(buf: Buffer, words: npt.NDArray[np.uint32], starts: npt.NDArray[np.int64]) -> Positions | None:
    """The columns of `plain_positions`, from the file's 32-bit words and each block's first."""
    types, totals = words[starts].astype(np.int64), words[starts + 1].astype(np.int64)
    if np.any(words[starts + totals // 4 - 1] != totals):
        return None
    if np.count_nonzero(types == f.PCAPNG_SHB) != 1 or np.any(types == f.PCAPNG_SPB):
        return None
    try:
        f.PCAPNG["<"]["shb"].parse(bytes(buf[0 : int(totals[0])]))
    except f.PARSE_ERRORS:
        return None
    packets = np.flatnonzero(types == f.PCAPNG_EPB)
    declared = np.flatnonzero(types == f.PCAPNG_IDB)
    if len(packets) and (not len(declared) or declared[-1] > packets[0]):
        return None
    interfaces = [_interface(buf, int(starts[i]) * 4, int(totals[i]), "<") for i in declared]
    if any(isinstance(i, Problem) or not i.known or not i.ts_mult for i in interfaces):
        return None
    at, sizes = starts[packets], totals[packets]
    if_id, caplen, orig_len = (words[at + k].astype(np.int64) for k in (2, 5, 6))
    if np.any(f.PCAPNG_EPB_FIXED_SIZE + caplen + 4 > sizes) or np.any(if_id >= len(interfaces)):
        return None
    ticks = (words[at + 3].astype(np.uint64) << np.uint64(32)) | words[at + 4].astype(np.uint64)
    ifaces = [i for i in interfaces if isinstance(i, _Interface)]
    mult = np.array([i.ts_mult for i in ifaces], np.int64)[if_id]
    offset = np.array([i.ts_offset_ns for i in ifaces], np.int64)[if_id]
    # Past these, a time would not fit in 64 bits: such a capture takes the careful walk.
    if len(ticks) and any(int(ticks[if_id == number].max(initial=0)) * i.ts_mult + abs(i.ts_offset_ns) > _MAX_TS_NS
                          for number, i in enumerate(ifaces)):
        return None
    timestamp_ns = ticks.astype(np.int64) * mult + offset
    link_type = np.array([i.link_type for i in ifaces], np.int64)[if_id]
    return Positions(timestamp_ns, link_type, at * 4 + f.PCAPNG_EPB_FIXED_SIZE, caplen, orig_len)
