"""Kafka's size-prefixed framing: a 4-byte big-endian length, then that many bytes."""

from __future__ import annotations

from protocol.primitives import INT32


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}")
        self.size = size
        self.limit = limit


class FrameReader:
    """Accumulates stream bytes and yields whole frames.

    The size check happens as soon as the 4-byte prefix arrives, before any buffering of the
    body, so a hostile prefix costs nothing.
    """

    __slots__ = ("_buf", "limit")

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self.limit = limit  # may change between frames (a SASL listener raises it after login)

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        n = len(buf)
        with memoryview(buf) as view:
            while n - pos >= 4:
                (size,) = INT32.unpack_from(buf, pos)
                if size < 0 or size > self.limit:
                    raise FrameTooLarge(size, self.limit)
                end = pos + 4 + size
                if end > n:
                    break
                # One copy out of the buffer (slicing the bytearray first would make two).
                frames.append(bytes(view[pos + 4:end]))
                pos = end
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf)


def begin_frame() -> bytearray:
    """A buffer with room for the size prefix; finish it with ``end_frame``."""
    return bytearray(4)


def end_frame(out: bytearray) -> bytes:
    INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
