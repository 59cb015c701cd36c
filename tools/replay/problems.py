"""The one event type every replay layer uses to report what it could not read."""
from __future__ import annotations

from typing import NamedTuple


class Problem(NamedTuple):
    """Something a layer skipped or could not trust, reported instead of raised.

    `offset` is a file offset for capture problems, the packet's ordinal for packet decoding
    problems met through `streams.stream_events`, and a stream offset for framing problems;
    `size` is the number of bytes affected (skipped, missing), or a packet count where
    `detail` says so.
    """

    kind: str
    offset: int
    size: int
    detail: str
