"""What a controller command produces: the records to append, and the response to send once
those records are committed."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.message import Message

# A metadata record and the version it is written at.
VersionedRecord = tuple[Message, int]

# Kafka's controller writes no bigger batch; a command with more records spans several
# batches, inside a metadata transaction so that they still apply together.
MAX_RECORDS_PER_BATCH = 10_000


@dataclass
class ControllerResult:
    records: list[VersionedRecord] = field(default_factory=list)
    response: Message | None = None
