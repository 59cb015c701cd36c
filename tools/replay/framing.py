"""Kafka framing of one direction of a connection: a 4-byte big-endian size, then the frame.

While the framer knows where frames start it trusts the size prefixes. After a gap that hides
a frame start, a size prefix that cannot be one, or on a stream joined mid-way, it resumes only
at a boundary it can prove: a size prefix followed by a plausible header, whose frame is itself
followed by another plausible header with a correlation id a little higher (clients number
their requests upwards and the broker answers in order), or by the end of the data, or whose
frame the layer above reads whole. Skipped bytes are reported.

The framer knows nothing of message bodies: reading a frame whole is the `proves` check the
layer above may hand it.
"""
from __future__ import annotations

import enum
import heapq
import re
import struct
from typing import Callable, Final, NamedTuple

from tools.replay.problems import Problem

REQUEST = "request"
RESPONSE = "response"
# Kafka's default socket.request.max.bytes.
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

# How far apart the correlation ids of consecutive frames of one connection may be. Clients
# count per connection (librdkafka, kafka-python) or per client (the Java client), so steps are
# 1 or small; random bytes pass this test once in 32768 tries.
_MAX_CORRELATION_STEP = 1 << 16
# How far past a proven frame start an earlier candidate's frame may end and still be waited
# for (see Framer._earliest).
_MAX_WAIT_FOR_EARLIER = 1 << 20
_MAX_API_KEY = 100
_MAX_API_VERSION = 20
# ControlledShutdown v0 is the one request whose header (v0) has no client id.
_HEADER_V0_REQUEST = (7, 0)

_INT32 = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">ihhih")  # size, api key, version, correlation id, client id length
_RESPONSE_HEADER = struct.Struct(">ii")  # size, correlation id


class Frame(NamedTuple):
    timestamp_ns: int  # when the frame's last byte was seen
    data: bytes  # the frame without its size prefix


class Framer:
    """Splits one direction's byte stream into frames; feed it the stream's data and gaps."""

    def __init__(
        self,
        kind: str,
        synced: bool = True,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        proves: Callable[[bytes], bool] | None = None,
    ) -> None:
        # kind: REQUEST for the client's direction, RESPONSE for the server's.
        # synced: whether offset 0 is a frame start (the stream was seen from its SYN).
        # proves: whether a candidate frame (without its size prefix) reads whole as a message,
        # which proves its start without waiting for the next header: that one may be garbage.
        if kind == REQUEST:
            self._header, self._need, self._min_size = self._request_header, _REQUEST_HEADER.size, 8
        elif kind == RESPONSE:
            self._header, self._need, self._min_size = self._response_header, _RESPONSE_HEADER.size, 4
        else:
            raise ValueError(f"kind must be {REQUEST!r} or {RESPONSE!r}, not {kind!r}")
        self.kind = kind
        self.max_frame_size = max_frame_size
        self._pattern = _candidate_pattern(kind, max_frame_size)
        self._proves = proves
        # While synced, _buf starts at a frame start; while not, at the first byte that may.
        self._buf = bytearray()
        self._base = 0  # stream offset of _buf[0]
        self._skip = 0  # bytes still to drop of a frame a gap damaged, while synced
        self._synced = synced
        self._last_ts = 0
        # While unsynced: where sync was lost, data bytes dropped since, the stream offset up
        # to which candidates have been looked for, and the undecided candidates.
        self._lost_at = 0
        self._skipped = 0
        self._scan = 0
        self._waiting: list[tuple[int, int]] = []  # (stream offset that decides it, start)
        self._proven: list[int] = []  # proven starts, taken once no earlier one may still win
        self._starts: list[int] = []  # the waiting and proven starts, to find the earliest
        self._rejected: set[int] = set()  # starts that left _waiting but not yet _starts

    def feed(self, timestamp_ns: int, data: bytes) -> list[Frame | Problem]:
        """Frames completed by the next `data` of the stream, and any framing problems."""
        out: list[Frame | Problem] = []
        self._last_ts = timestamp_ns
        if self._skip:
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            self._base += dropped
            data = data[dropped:]
        elif self._synced and not self._buf:
            # Most segments start at a frame start and hold whole frames: those are cut from
            # the segment's own bytes, and only a frame it leaves unfinished is buffered.
            data = self._whole_frames(timestamp_ns, data, out)
        if data:
            self._buf += data
            self._advance(timestamp_ns, False, out)
        return out

    def gap(self, timestamp_ns: int, size: int) -> list[Frame | Problem]:
        """`size` bytes of the stream are missing at this point."""
        out: list[Frame | Problem] = []
        self._last_ts = timestamp_ns
        if not self._synced:
            # Data before a gap ends there: candidates are judged against that end.
            self._advance(timestamp_ns, True, out)
            if not self._synced:
                self._base += size
                self._scan = self._base
                return out
        if self._skip >= size:
            self._skip -= size
            self._base += size
            return out
        if self._skip:
            # The damaged frame ends inside this gap, and so does the next frame's start.
            self._base += size
            self._skip = 0
            self._lose_sync(0)
            return out
        buffered = len(self._buf)
        if buffered >= 4:
            frame_size = 4 + _INT32.unpack_from(self._buf, 0)[0]
            remaining = frame_size - buffered
            out.append(
                Problem(
                    "damaged_frame",
                    self._base,
                    frame_size,
                    f"{min(size, remaining)} of its {frame_size} bytes are in a gap; frame dropped",
                )
            )
        frame_start = self._base
        self._buf.clear()
        self._base += buffered + size
        if buffered >= 4 and size <= remaining:
            # The size prefix says where the next frame starts, gap or not.
            self._skip = remaining - size
        elif buffered >= 4:
            self._lose_sync(0)
        else:
            # A size prefix cut by the gap is lost with it; skipping starts at its bytes.
            self._lose_sync(buffered)
            if buffered:
                self._lost_at = frame_start
        return out

    def finish(self) -> list[Frame | Problem]:
        """The stream ended: settle what is still buffered."""
        out: list[Frame | Problem] = []
        if not self._synced:
            self._advance(self._last_ts, True, out)
            if not self._synced:
                if self._skipped:
                    detail = "stream ended before framing could resume"
                    out.append(Problem("unsynchronised", self._lost_at, self._skipped, detail))
                return out
        if self._buf:
            out.append(Problem("incomplete_frame", self._base, len(self._buf), "stream ended inside a frame"))
        return out

    # -----------------------------------------------------------------------------------------

    def _advance(self, ts: int, at_end: bool, out: list[Frame | Problem]) -> None:
        """Cut frames while synced, look for a proven boundary while not, until neither moves."""
        while self._frames(ts, out) if self._synced else self._resync(ts, at_end, out):
            pass

    def _frames(self, ts: int, out: list[Frame | Problem]) -> bool:
        """Cut the complete frames buffered; True if a bad size prefix lost the sync."""
        buf = self._buf
        n = len(buf)
        pos = 0
        while n - pos >= 4:
            size = _INT32.unpack_from(buf, pos)[0]
            if size < self._min_size or size > self.max_frame_size:
                out.append(Problem("bad_size", self._base + pos, 4, f"size prefix {size} is implausible"))
                del buf[:pos]
                self._base += pos
                self._lose_sync(0)
                # The offending prefix itself is no frame start.
                self._scan = self._base + 1
                return True
            end = pos + 4 + size
            if end > n:
                break
            out.append(Frame(ts, bytes(buf[pos + 4 : end])))
            pos = end
        if pos:
            # Deleting from the front of a bytearray is cheap: CPython only moves its start.
            del buf[:pos]
            self._base += pos
        return False

    def _whole_frames(self, ts: int, data: bytes, out: list[Frame | Problem]) -> bytes:
        """Cut the whole frames at the front of `data`, a frame start; what follows them."""
        n = len(data)
        pos = 0
        unpack = _INT32.unpack_from
        while n - pos >= 4:
            size = unpack(data, pos)[0]
            end = pos + 4 + size
            if end > n or size < self._min_size or size > self.max_frame_size:
                break  # the buffered path cuts it, or says why it cannot
            out.append(Frame(ts, data[pos + 4 : end]))
            pos = end
        self._base += pos
        return data[pos:] if pos else data

    def _lose_sync(self, skipped: int) -> None:
        """Give up the frame position; `skipped` data bytes were dropped on the way."""
        self._synced = False
        self._lost_at = self._base
        self._skipped = skipped
        self._scan = self._base
        self._waiting.clear()
        self._proven.clear()
        self._starts.clear()
        self._rejected.clear()

    def _resync(self, ts: int, at_end: bool, out: list[Frame | Problem]) -> bool:
        """Look for a proven frame start; True once synced on one."""
        buf, base = self._buf, self._base
        n = len(buf)
        while self._waiting and (at_end or self._waiting[0][0] <= base + n):
            _, start = heapq.heappop(self._waiting)
            verdict = self._judge(start, at_end)
            if verdict is _PROVEN:
                heapq.heappush(self._proven, start)
            elif verdict is _REJECTED:
                self._rejected.add(start)
            else:
                heapq.heappush(self._waiting, (verdict, start))
        scan_to = n - self._need + 1
        if scan_to > self._scan - base:
            # Listed first: the buffer cannot be resized while a regex scan holds it.
            found = [match.start() for match in self._pattern.finditer(buf, self._scan - base, n)]
            for i in found:
                start = base + i
                verdict = self._judge(start, at_end)
                if verdict is _REJECTED:
                    continue
                heapq.heappush(self._starts, start)
                if verdict is _PROVEN:
                    heapq.heappush(self._proven, start)
                else:
                    heapq.heappush(self._waiting, (verdict, start))
            self._scan = base + scan_to
        while self._starts and self._starts[0] in self._rejected:
            self._rejected.discard(heapq.heappop(self._starts))
        if self._proven and self._earliest(self._proven[0]):
            self._synced_at(self._proven[0], out)
            return True
        # Bytes before every candidate still in play can never start a frame.
        keep_from = base + n if at_end else min(self._scan, self._starts[0] if self._starts else self._scan)
        if keep_from > base:
            del buf[: keep_from - base]
            self._skipped += keep_from - base
            self._base = keep_from
        return False

    def _earliest(self, proven: int) -> bool:
        """Whether no earlier candidate can still turn out to be the boundary.

        A header-shaped run inside a frame proves itself as soon as its own chain is in the
        buffer, often before the real frame start before it is decided; so an earlier start
        still waiting wins if it is proven too. One that claims a frame ending far beyond is
        not waited for: nearly every such claim is noise, and waiting would hold its bytes.
        """
        if self._starts[0] == proven:
            return True
        limit = proven + _MAX_WAIT_FOR_EARLIER
        return not any(start < proven and decided_at <= limit for decided_at, start in self._waiting)

    def _judge(self, start: int, at_end: bool) -> _Verdict | int:
        """_PROVEN, _REJECTED, or the stream offset whose arrival will decide `start`."""
        buf = self._buf
        i = start - self._base
        correlation_id = self._header(buf, i)
        if correlation_id is None:
            return _REJECTED
        end = i + 4 + _INT32.unpack_from(buf, i)[0]
        if self._proves is not None and end <= len(buf) and self._proves(bytes(buf[i + 4 : end])):
            return _PROVEN
        if end + self._need <= len(buf):
            following = self._header(buf, end)
            if following is not None and 0 < following - correlation_id <= _MAX_CORRELATION_STEP:
                return _PROVEN
            return _REJECTED
        if at_end:
            return _PROVEN if end <= len(buf) else _REJECTED
        return self._base + end + self._need

    def _synced_at(self, start: int, out: list[Frame | Problem]) -> None:
        skipped = self._skipped + start - self._base
        detail = f"framing resumed after skipping {skipped} bytes since offset {self._lost_at}"
        out.append(Problem("resync", start, skipped, detail))
        del self._buf[: start - self._base]
        self._base = start
        self._synced = True
        self._waiting.clear()
        self._proven.clear()
        self._starts.clear()
        self._rejected.clear()

    def _request_header(self, buf: bytearray, i: int) -> int | None:
        """The correlation id of a plausible request header at `i`, else None."""
        size, api_key, version, correlation_id, client_id_length = _REQUEST_HEADER.unpack_from(buf, i)
        if not (self._min_size <= size <= self.max_frame_size and correlation_id >= 0):
            return None
        if not (0 <= api_key <= _MAX_API_KEY and 0 <= version <= _MAX_API_VERSION):
            return None
        if (api_key, version) != _HEADER_V0_REQUEST and not -1 <= client_id_length <= size - 10:
            return None
        return correlation_id

    def _response_header(self, buf: bytearray, i: int) -> int | None:
        """The correlation id of a plausible response header at `i`, else None."""
        size, correlation_id = _RESPONSE_HEADER.unpack_from(buf, i)
        if self._min_size <= size <= self.max_frame_size and correlation_id >= 0:
            return correlation_id
        return None


class _Verdict(enum.Enum):
    PROVEN = enum.auto()
    REJECTED = enum.auto()


_PROVEN: Final = _Verdict.PROVEN
_REJECTED: Final = _Verdict.REJECTED


def _candidate_pattern(kind: str, max_frame_size: int) -> re.Pattern[bytes]:
    """Matches where a plausible header may start, so the scan for them runs in C.

    It looks at the first byte of the size, of the correlation id and, for requests, at the
    api key and version, and spans the whole header so a match always has its bytes.
    """
    size = rb"[\x00-%s]..." % re.escape(bytes([min(max_frame_size >> 24, 0x7F)]))
    if kind == REQUEST:
        api_key = rb"\x00[\x00-%s]" % re.escape(bytes([_MAX_API_KEY]))
        version = rb"\x00[\x00-%s]" % re.escape(bytes([_MAX_API_VERSION]))
        header = size + api_key + version + rb"[\x00-\x7f]....."  # correlation id, client id length
    else:
        header = size + rb"[\x00-\x7f]..."  # correlation id
    return re.compile(b"(?=" + header + b")", re.DOTALL)
