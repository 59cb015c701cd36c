"""What a controller command produces: the records to append, and the response to send once
those records are committed."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.message import Message

# A metadata record and the version it is written at.
VersionedRecord = tuple[Message, int]


@dataclass
class ControllerResult:
    records: list[VersionedRecord] = field(default_factory=list)
    response: Message | None = None
