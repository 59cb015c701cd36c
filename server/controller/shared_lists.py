"""One list object for all equal replica lists, ISRs and directory lists of the partition state.

A million partitions over a few dozen brokers hold only a few thousand distinct replica
lists. Sharing them takes the state from about a kilobyte per partition to a few hundred
bytes. Sharing is safe because partition state never changes a list in place: a change
assigns a new list.
"""

from __future__ import annotations

from typing import Any, Sequence, TypeVar

T = TypeVar("T")

# Past this many distinct lists new ones are no longer remembered (those shared so far stay
# shared): a long-lived controller reassigning partitions must not grow the table forever.
MAX_REMEMBERED = 100_000


class SharedLists:
    __slots__ = ("_by_items", "_by_encoding", "empty", "encoded")

    def __init__(self) -> None:
        self._by_items: dict[tuple[object, ...], list[object]] = {}
        # Keyed by the wire encoding of the items, so that a decoder finds the shared list
        # without building one first.
        self._by_encoding: dict[bytes, list[Any]] = {}
        self.empty: list[Any] = self.of(())
        # encoded(raw): the shared list whose compact-array encoding (count byte, then the
        # items) is ``raw``, or None. Arrays of int32s and of UUIDs never share an encoding:
        # their lengths differ for every count but zero. A bound method of the table itself,
        # since a decoder asks for every array of every record.
        self.encoded = self._by_encoding.get

    def of(self, items: Sequence[T]) -> list[T]:
        key = tuple(items)
        shared = self._by_items.get(key)
        if shared is None:
            shared = list(key)
            if len(self._by_items) < MAX_REMEMBERED:
                self._by_items[key] = shared
        return shared  # type: ignore[return-value]

    def remember_encoded(self, raw: bytes, items: Sequence[T]) -> list[T]:
        shared = self.of(items)
        if len(self._by_encoding) < MAX_REMEMBERED:
            self._by_encoding[raw] = shared
        return shared
