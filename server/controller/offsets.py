"""Where the controller is in the metadata log, and how it goes back.

``OffsetControl`` is the one owner of the next offset to replay or write. It also keeps the
undo log ("timeline") of every change replay made that is not yet known to be permanent, so
the controller can return to an earlier offset:

- a command whose records fail part-way through replay is undone whole, never half applied;
- an aborted metadata transaction (KIP-868), or one still open when the log ends, is undone;
- records applied but never committed can be dropped (a leader that loses its epoch).

Kafka's controller does the same with its snapshot registry; here each replay function that
changes state registers the closure that reverses it, and only while something could need
reverting: loading committed records costs nothing extra.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import attrgetter
from typing import Any, Callable

# What an undo returns is ignored, so that ``dict.pop`` and the like serve as undos as they are.
Undo = Callable[[], object]
# An entry of the undo log: the offset of the record whose replay it reverses, then a function
# and the arguments to call it with. One tuple rather than a closure and a pair: a fenced
# fleet registers, and then drops, a million of them.
UndoEntry = tuple[Any, ...]


class OffsetControl:
    def __init__(self) -> None:
        self.next_offset = 0
        # Offset of the BeginTransactionRecord of the open metadata transaction, or -1.
        self.transaction_start = -1
        self._active = False  # an active controller keeps undo entries until they commit
        self._undo: list[UndoEntry] = []
        self._offset = -1  # the offset whose replay is registering undo entries

    @property
    def last_applied_offset(self) -> int:
        return self.next_offset - 1

    @property
    def recording(self) -> bool:
        """Whether replay must register how to undo what it changes."""
        return self._active or self.transaction_start >= 0

    def activate(self) -> None:
        """From now on every applied change can be reverted until it is committed."""
        self._active = True

    # --- replay bookkeeping --------------------------------------------------------------
    def replaying(self, offset: int) -> None:
        """A record at ``offset`` is about to be replayed."""
        self._offset = offset

    def replayed(self, offset: int) -> None:
        self.next_offset = offset + 1

    def skip_to(self, next_offset: int) -> None:
        """Records up to ``next_offset`` hold no state to replay (control batches, a
        snapshot's end): the next record to replay or write is at ``next_offset``."""
        self.next_offset = next_offset

    def on_undo(self, undo: Undo) -> None:
        """Register how to reverse a change the current record's replay just made."""
        self._undo.append((self._offset, undo))

    def add_undos(self, entries: list[UndoEntry]) -> None:
        """Register how to reverse the changes of several records replayed in one go, in
        offset order after every entry registered so far."""
        self._undo += entries

    # --- going back ----------------------------------------------------------------------
    def revert_to(self, offset: int) -> None:
        """Undo every change made by records at ``offset`` or later; the next record goes
        at ``offset``."""
        undo = self._undo
        while undo and undo[-1][0] >= offset:
            entry = undo.pop()
            entry[1](*entry[2:])
        if self.transaction_start >= offset:
            self.transaction_start = -1
        self.next_offset = offset

    def committed(self, offset: int) -> None:
        """Records up to ``offset`` are durable: their changes are permanent, unless they
        belong to a metadata transaction that is still open."""
        keep_from = offset + 1
        if self.transaction_start >= 0:
            keep_from = min(keep_from, self.transaction_start)
        undo = self._undo
        if undo and undo[0][0] < keep_from:
            # Entries are in offset order; (keep_from,) sorts before every entry at keep_from,
            # so the search never compares two undos. A fenced fleet commits a million of them.
            del undo[:bisect_left(undo, (keep_from,))]

    @property
    def pending_undo(self) -> int:
        """How many changes could still be reverted (for tests and diagnostics)."""
        return len(self._undo)

    # --- metadata transactions (KIP-868) -------------------------------------------------
    def begin_transaction(self, offset: int) -> None:
        if self.transaction_start >= 0:
            raise ValueError(f"BeginTransactionRecord at offset {offset} inside the transaction "
                             f"begun at offset {self.transaction_start}")
        self.transaction_start = offset

    def end_transaction(self, offset: int) -> None:
        if self.transaction_start < 0:
            raise ValueError(f"EndTransactionRecord at offset {offset} outside a transaction")
        self.transaction_start = -1
        if not self._active:
            self._undo.clear()

    def abort_transaction(self, offset: int) -> None:
        """Undo everything since the transaction began; the log goes on after ``offset``."""
        if self.transaction_start < 0:
            raise ValueError(f"AbortTransactionRecord at offset {offset} outside a transaction")
        start = self.transaction_start
        undo = self._undo
        while undo and undo[-1][0] >= start:
            entry = undo.pop()
            entry[1](*entry[2:])
        self.transaction_start = -1


# --- undo builders for the common shapes of state ---------------------------------------------

def restore_key(mapping: dict, key: object) -> Undo:
    """Undo for any change to ``mapping[key]``: put back the old value, or remove the key."""
    if key in mapping:
        old = mapping[key]
        return lambda: mapping.__setitem__(key, old)
    return lambda: mapping.pop(key, None)


def restore_attrs(obj: object, names: tuple[str, ...]) -> Undo:
    """Undo for changes to some attributes of ``obj``: they get their current values back.
    Lists in state are replaced on change, never edited in place, so a shallow copy is enough."""
    # One C call for every attribute: replaying a million partition changes snapshots each.
    old = attrgetter(*names)(obj) if len(names) > 1 else tuple(getattr(obj, n) for n in names)

    def undo() -> None:
        for name, value in zip(names, old):
            setattr(obj, name, value)
    return undo
