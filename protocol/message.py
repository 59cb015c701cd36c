"""The base class of every generated message, header and record.

Generated classes only declare their slots, defaults and per-version encoder/decoder tables;
the entry points and the generic helpers (equality, repr, dict form) live here once.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Self

from protocol.errors import DecodeError, EncodeError
from protocol.primitives import uuid_to_str


class _Missing:
    """Marks a constructor argument left out, so mutable defaults are made fresh per object."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Message:
    __slots__: tuple[str, ...] = ()

    NAME: str = ""
    API_KEY: int | None = None
    VALID_VERSIONS: tuple[int, int] = (0, -1)
    FLEXIBLE_VERSIONS: tuple[int, int] | None = None
    # (attribute, Kafka type) in wire order; struct types name the nested class.
    FIELDS: tuple[tuple[str, str], ...] = ()
    # Per version (None below the lowest): decode(buf, pos) -> (message, end) and
    # encode(message, out).
    _DECODERS: Sequence[Callable[[bytes, int], tuple[Any, int]] | None] = ()
    _ENCODERS: Sequence[Callable[[Any, bytearray], None] | None] = ()
    # Every generated class has this slot; declared here so the helpers below can read it.
    unknown_tagged_fields: dict[int, bytes] | None

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> tuple[Self, int]:
        """Decode one message at ``buf[pos:]``; returns the message and the end offset."""
        # Asking forgiveness for a version past the table costs less per call than a length
        # check, and this wrapper is a fair share of decoding a small message.
        try:
            decoder = cls._DECODERS[version]
        except IndexError:
            decoder = None
        if decoder is None or version < 0:
            raise DecodeError(cls.NAME, version, pos, "unsupported version")
        try:
            return decoder(buf if type(buf) is bytes else bytes(buf), pos)
        except DecodeError as exc:
            raise exc.within(cls.NAME, version) from None

    def encode_into(self, out: bytearray, version: int) -> None:
        encoders = self._ENCODERS
        encoder = encoders[version] if 0 <= version < len(encoders) else None
        if encoder is None:
            raise EncodeError(f"{self.NAME} has no version {version}")
        try:
            encoder(self, out)
        except (struct.error, TypeError, OverflowError, UnicodeEncodeError) as exc:
            raise EncodeError(f"{self.NAME} v{version}: {exc}") from None

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        flex = cls.FLEXIBLE_VERSIONS
        return flex is not None and flex[0] <= version <= flex[1]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable value objects

    def __repr__(self) -> str:
        inner = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__
                          if s != "unknown_tagged_fields" or getattr(self, s))
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view: UUIDs in Kafka's base64 form, bytes as hex."""
        result: dict[str, Any] = {}
        for name, ftype in self.FIELDS:
            result[name] = _plain(getattr(self, name), ftype)
        if self.unknown_tagged_fields:
            result["unknown_tagged_fields"] = {
                str(tag): bytes(raw).hex() for tag, raw in self.unknown_tagged_fields.items()}
        return result


def install_codecs(cls: type[Message], decoders: Sequence[Callable[[bytes, int], tuple[Any, int]] | None],
                   encoders: Sequence[Callable[[Any, bytearray], None] | None]) -> None:
    """Give a generated class its per-version codecs, and a ``decode`` of its own.

    The inherited ``decode`` is a classmethod, and binding one on every call costs a sixth of
    decoding a small message such as a heartbeat; a plain function that already holds the
    class's table and name does the same checks without it. It is set as a plain attribute,
    not a staticmethod, whose descriptor costs a lookup per call too: ``decode`` is only ever
    called on the class."""
    cls._DECODERS = decoders
    cls._ENCODERS = encoders
    name = cls.NAME
    # Read from the closure rather than the builtins, and compared with ``__class__`` rather
    # than through a call of ``type``: a tenth of decoding a heartbeat.
    exact = bytes

    def decode(buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> tuple[Any, int]:
        try:
            decoder = decoders[version]
        except IndexError:
            decoder = None
        if decoder is None or version < 0:
            raise DecodeError(name, version, pos, "unsupported version")
        try:
            return decoder(buf if buf.__class__ is exact else exact(buf), pos)
        except DecodeError as exc:
            raise exc.within(name, version) from None

    setattr(cls, "decode", decode)


def api_key_of(message: Message | type[Message]) -> int:
    """The API key of a request, response or metadata record (the kinds that have one)."""
    if message.API_KEY is None:
        raise TypeError(f"{message.NAME} has no API key")
    return message.API_KEY


def _plain(value: Any, ftype: str) -> Any:
    if value is None:
        return None
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v, ftype[2:]) for v in value]
    if ftype == "uuid":
        return uuid_to_str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value
