"""What a controller command produces: the records to append, and the response to send once
those records are committed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Concatenate, Iterator, ParamSpec, TypeVar

from protocol.message import Message

M = TypeVar("M", bound=Message)
R = TypeVar("R")
P = ParamSpec("P")

# A metadata record and the version it is written at.
VersionedRecord = tuple[Message, int]

# Kafka's controller writes no bigger batch; a command with more records spans several
# batches, inside a metadata transaction so that they still apply together.
MAX_RECORDS_PER_BATCH = 10_000

# The controller's own work that touches many partitions (fencing a broker, moving its
# leaderships) is written as non-atomic results of at most this many records, applied one
# slice per turn of the event loop, so that requests are answered in between.
SLICE_RECORDS = 1_000


@dataclass
class Later:
    """Records that follow a result's own, written afterwards in slices of at most
    SLICE_RECORDS as a non-atomic result: each is built only when its slice is, on the state
    the slices before it left, and requests are served in between. None stands for a
    partition looked at that needed no record: it counts towards its slice all the same."""

    records: Iterator[VersionedRecord | None]
    # The broker whose leaderships these records move away: nothing is placed on it or
    # elected to it until they are written.
    leaving: int | None = None


@dataclass
class ControllerResult:
    records: list[VersionedRecord] = field(default_factory=list)
    response: Message | None = None
    later: Later | None = None


def accepting(cls: type[M], fn: Callable[Concatenate[M, P], R]) -> Callable[Concatenate[Message, P], R]:
    """``fn`` behind a table of handlers keyed by message name or API key: the table only ever
    passes it a ``cls``, and anything else is a bug in the table."""
    def call(message: Message, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if not isinstance(message, cls):
            raise TypeError(f"{message.NAME} given to the handler of {cls.NAME}")
        return fn(message, *args, **kwargs)
    return call
