"""Java .properties syntax: the text of a server.properties file -> its keys and values."""

from __future__ import annotations

import re

from server.settings import ConfigError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text; a key given twice keeps its last value, as in Java."""
    lines = _LINE_BREAK.split(text)
    result: dict[str, str] = {}
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].lstrip(_BLANK)
        i += 1
        # Comment lines never continue, even when they end in a backslash.
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_BLANK)
                i += 1
        key, value = _split_entry(line, lineno)
        result[key] = value
    return result


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_entry(line: str, lineno: int) -> tuple[str, str]:
    end = 0
    while end < len(line) and line[end] not in "=: \t\f":
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    pos = end
    while pos < len(line) and line[pos] in _BLANK:
        pos += 1
    if pos < len(line) and line[pos] in "=:":
        pos += 1
        while pos < len(line) and line[pos] in _BLANK:
            pos += 1
    return _unescape(line[:end], lineno), _unescape(line[pos:], lineno)


def _unescape(raw: str, lineno: int) -> str:
    if "\\" not in raw:
        return raw
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 == len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2:i + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise ConfigError(f"line {lineno}", f"malformed \\u escape {raw[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)
