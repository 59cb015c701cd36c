"""Building the metadata state the way the controller does: through ``QuorumController.replay``.

Snapshot records are replayed at the snapshot's last offset, log records at their own, exactly
as the controller loads itself at start-up, so the shell shows what the controller would hold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from protocol.errors import DecodeError
from protocol.generated.metadata.leader_change_message import LeaderChangeMessage
from protocol.message import Message
from protocol.records import ControlType, RecordBatch, parse_control_key, parse_control_value, parse_metadata_record
from server.controller.clock import ManualClock
from server.controller.quorum_controller import QuorumController
from server.controller.result import VersionedRecord


class LoadError(Exception):
    """The metadata could not be read or replayed; the message says where."""


@dataclass(frozen=True)
class Leader:
    leader_id: int
    epoch: int


class Replayer:
    def __init__(self) -> None:
        # The cluster id and node id play no part in replay; the shell is nobody's node.
        self.controller = QuorumController("", -1, ManualClock())
        self.leader: Leader | None = None
        self.skipped: Counter[str] = Counter()  # record types this controller does not keep

    @property
    def next_offset(self) -> int:
        return self.controller.next_offset

    @property
    def last_offset(self) -> int:
        return self.controller.last_applied_offset

    def snapshot(self, records: Iterable[VersionedRecord], end_offset: int) -> None:
        for record, _ in records:
            self._replay(record, end_offset - 1)
        self.controller.offsets.skip_to(end_offset)

    def batch(self, batch: RecordBatch) -> None:
        """Replay a log batch; records before ``next_offset`` (already in a snapshot) are skipped."""
        if batch.is_control:
            # Leadership is not snapshot state: the last LeaderChange anywhere in the log holds.
            self._control(batch)
        if batch.last_offset < self.next_offset:
            return
        if batch.base_offset > self.next_offset:
            raise LoadError(f"offsets {self.next_offset} to {batch.base_offset - 1} are missing: "
                            f"the log does not continue the snapshot or the previous batch")
        if not batch.is_control:
            for rec in batch.records:
                offset = batch.base_offset + rec.offset_delta
                if offset >= self.next_offset:
                    self._replay(decode_value(rec.value, offset), offset)
        self.controller.offsets.skip_to(batch.next_offset)

    def _control(self, batch: RecordBatch) -> None:
        for rec in batch.records:
            try:
                if parse_control_key(rec.key) != ControlType.LEADER_CHANGE or rec.value is None:
                    continue
                message = parse_control_value(rec.value, LeaderChangeMessage)
            except DecodeError as exc:
                raise LoadError(f"cannot decode the control record at offset "
                                f"{batch.base_offset + rec.offset_delta}: {exc}") from None
            self.leader = Leader(message.leader_id, batch.partition_leader_epoch)

    def _replay(self, record: Message, offset: int) -> None:
        replay_record(self.controller, record, offset, self.skipped)


def replay_record(controller: QuorumController, record: Message, offset: int, skipped: Counter[str]) -> None:
    """Replay one record; the types the controller keeps no state for are counted in
    ``skipped`` instead (ACLs, quotas, producer ids, ...): a view of the metadata shows what
    the controller keeps and says how much else it saw."""
    try:
        controller.replay(record, offset)
    except ValueError as exc:
        if not str(exc).startswith("cannot replay"):
            raise LoadError(f"cannot replay {record.NAME} at offset {offset}: {exc}") from None
        skipped[record.NAME] += 1
        controller.offsets.skip_to(offset + 1)
    except (KeyError, IndexError, TypeError) as exc:
        raise LoadError(f"cannot replay {record.NAME} at offset {offset}: "
                        f"{type(exc).__name__} {exc}") from None


def decode_value(value: bytes | None, offset: int) -> Message:
    try:
        if value is None:
            raise DecodeError("MetadataRecord", None, 0, "the record value is null")
        return parse_metadata_record(value)[0]
    except DecodeError as exc:
        raise LoadError(f"cannot decode the record at offset {offset}: {exc}") from None
