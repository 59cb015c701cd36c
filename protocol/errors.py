"""Exceptions raised by the codecs.

There is exactly one error type for bad input bytes, so that the network layer, the log
recovery and the capture validator can each catch one thing and report where it happened.
"""

from __future__ import annotations


class DecodeError(Exception):
    """Bytes that are not a valid encoding of ``message_name`` at ``version``.

    ``offset`` is the byte position (within the buffer handed to the decoder) of the field
    that could not be read.
    """

    def __init__(self, message_name: str, version: int | None, offset: int, reason: str) -> None:
        self.message_name = message_name
        self.version = version
        self.offset = offset
        self.reason = reason
        super().__init__(self._text())

    def _text(self) -> str:
        ver = "" if self.version is None else f" v{self.version}"
        return f"cannot decode {self.message_name}{ver} at byte {self.offset}: {self.reason}"

    def within(self, message_name: str, version: int) -> "DecodeError":
        """Re-label an error raised by a nested struct with the enclosing message."""
        if self.message_name != message_name:
            self.reason = f"{self.message_name}: {self.reason}"
            self.message_name = message_name
        self.version = version
        self.args = (self._text(),)
        return self


class EncodeError(ValueError):
    """A value that cannot be written at the requested version (missing field, bad range)."""
