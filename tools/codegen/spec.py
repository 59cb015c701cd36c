"""The vocabulary of Kafka's schema format: type names, version ranges and the schema error,
shared by the reader, the checks and the emitter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

MAX_VERSION = 0x7FFF

PRIMITIVE_TYPES = frozenset({
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "string", "bytes", "records", "uuid",
})
# Fixed-width types map to a struct format character (uuid to 16 raw bytes).
FIXED_FORMATS = {
    "bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
    "int64": "q", "float64": "d", "uuid": "16s",
}
FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
               "int64": 8, "float64": 8, "uuid": 16}


class SchemaError(Exception):
    """A schema file that cannot be understood; the message names the file and the field."""


_RANGE = re.compile(r"(\d+)(\+|-(\d+))?\Z")


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``lo > hi`` means no versions."""

    lo: int
    hi: int

    NONE: ClassVar[Versions]

    @staticmethod
    def parse(text: object) -> Versions:
        """``none``, ``3``, ``1-4`` or ``2+``; each version a non-negative int16."""
        spelled = str(text).strip()
        if spelled == "none":
            return Versions.NONE
        match = _RANGE.match(spelled)
        if match is None or isinstance(text, bool):
            raise SchemaError(f"{text!r} is not a version range (none, 3, 1-4 or 2+)")
        lo = int(match.group(1))
        hi = MAX_VERSION if match.group(2) == "+" else int(match.group(3) or lo)
        if max(lo, hi) > MAX_VERSION:
            raise SchemaError(f"{text!r}: versions stop at {MAX_VERSION}")
        if lo > hi:
            raise SchemaError(f"{text!r} is an empty range; write none")
        return Versions(lo, hi)

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __str__(self) -> str:
        if self.empty():
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"

    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.lo, other.lo), min(self.hi, other.hi))

    def contains(self, other: Versions) -> bool:
        """Every version of ``other`` is one of ours (true when ``other`` is empty)."""
        return other.empty() or (self.lo <= other.lo and other.hi <= self.hi)


Versions.NONE = Versions(1, 0)


def parse_int_default(text: str) -> int:
    """An integer default as the schemas write it: decimal, or hexadecimal after ``0x``."""
    digits, base = (text[2:], 16) if text.startswith("0x") else (text, 10)
    if not re.fullmatch(r"[+-]?[0-9a-fA-F]+" if base == 16 else r"[+-]?[0-9]+", digits):
        raise ValueError(f"not an integer: {text!r}")
    return int(digits, base)


_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """``CurrentMetadataOffset`` -> ``current_metadata_offset``; ``ISR`` -> ``isr``."""
    return _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name)).lower()
