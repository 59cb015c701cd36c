"""Replaying a metadata log into a ``QuorumController``: snapshots, then batches in offset order.

One loader serves the controller's start-up, the metadata shell and the test broker, so all
three hold exactly the state the log describes. Snapshot records apply at the snapshot's last
offset and log records at their own; control batches carry no metadata, but the leader they
name and the quorum records (kraft.version, voters) are kept. A record that cannot be decoded
or replayed stops the load with one line naming where it is and what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from protocol.errors import DecodeError
from protocol.generated.metadata.leader_change_message import LeaderChangeMessage
from protocol.message import Message
from protocol.records import (
    ControlType, RecordBatch, control_message_class, decode_batch, parse_control_key, parse_control_value,
    describe_undecodable, parse_metadata_record, read_batch_header, record_values)
from server.controller.partition_values import partition_state
from server.controller.quorum_controller import QuorumController
from server.controller.result import VersionedRecord
from server.metalog.meta_properties import StorageError
from server.metalog.snapshot_file import SnapshotRecords

# ``snapshot_in_steps`` pauses after this many records (a snapshot file's batches hold 4096).
STEP_RECORDS = 1024

# Control records that are state: replayed like metadata records.
_QUORUM_CONTROLS = (ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS)


class LoadError(Exception):
    """The metadata could not be read or replayed; the message says where, in one line."""


@dataclass(frozen=True)
class Leader:
    leader_id: int
    epoch: int


class MetadataLoader:
    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller
        self.leader: Leader | None = None  # the last LeaderChange seen
        self.last_epoch = -1  # leader epoch of the last batch replayed
        # Epoch of the last batch or snapshot the state holds (Kafka's MetadataProvenance):
        # unlike last_epoch, a snapshot's epoch counts.
        self.contained_epoch = -1
        self.last_timestamp_ms = -1  # append time of the last batch replayed (its max timestamp)

    @property
    def next_offset(self) -> int:
        return self.controller.next_offset

    # --- snapshots ----------------------------------------------------------------------
    def snapshot(self, records: Iterable[VersionedRecord], end_offset: int, where: str = "snapshot",
                 epoch: int = -1) -> None:
        """Replay a snapshot's records, taken at ``epoch``; the log continues at ``end_offset``."""
        for _ in self.snapshot_in_steps(records, end_offset, where, epoch):
            pass

    def snapshot_in_steps(self, records: Iterable[VersionedRecord], end_offset: int, where: str = "snapshot",
                          epoch: int = -1) -> Iterator[None]:
        """``snapshot``, pausing every STEP_RECORDS records of a snapshot file: a running server
        loads a snapshot fetched from the leader a few steps at a time, answering its peers
        between them. The state is whole once the iterator is exhausted."""
        if isinstance(records, SnapshotRecords):
            yield from self._snapshot_file(records, end_offset - 1, where)
        else:
            for record, _ in records:
                self._replay(record, end_offset - 1, where)
        self.controller.offsets.skip_to(end_offset)
        self.contained_epoch = epoch

    def _snapshot_file(self, records: SnapshotRecords, offset: int, where: str) -> Iterator[None]:
        """A snapshot read from its bytes: partition records of the common shape go straight
        into partition state; every other record is decoded and replayed as usual. Pauses
        every STEP_RECORDS records."""
        for record, _ in records.quorum_records:
            self._replay(record, offset, where)
        replication = self.controller.replication
        shared = replication.shared
        add_partition = replication.add_partition
        self.controller.offsets.replaying(offset)
        try:
            for values in records.batches():
                for n, (_, value) in enumerate(values, 1):
                    if n % STEP_RECORDS == 0:
                        yield
                    state = None if value is None else partition_state(value, shared)
                    if state is None:
                        self._replay(self._decode(value, offset, where), offset, where)
                        continue
                    try:
                        add_partition(state)
                    except KeyError as exc:
                        raise LoadError(f"{where}: offset {offset}: cannot replay PartitionRecord: {exc}") from None
        except StorageError as exc:
            raise LoadError(str(exc)) from None

    # --- log batches ----------------------------------------------------------------------
    def batch(self, batch: RecordBatch, where: str = "the log") -> list[tuple[Message, int]]:
        """Replay a decoded batch; records below ``next_offset`` (in a snapshot already) are
        passed over. Returns the (record, offset) pairs replayed."""
        if batch.last_offset < self.next_offset:
            if batch.is_control:
                # Leadership is not snapshot state: the last LeaderChange anywhere holds.
                self._control(batch, where, replay=False)
            return []
        self._check_continues(batch.base_offset, where)
        replayed: list[tuple[Message, int]] = []
        if batch.is_control:
            replayed = self._control(batch, where, replay=True)
        else:
            for rec in batch.records:
                offset = batch.base_offset + rec.offset_delta
                if offset >= self.next_offset:
                    record = self._decode(rec.value, offset, where)
                    self._replay(record, offset, where)
                    replayed.append((record, offset))
        self._done(batch.last_offset, batch.partition_leader_epoch, batch.max_timestamp)
        return replayed

    def raw_batch(self, data: bytes, pos: int, where: str) -> None:
        """Replay the whole batch at ``data[pos:]``, checking its CRC; metadata batches take
        the fast path that skips building record objects."""
        try:
            if read_batch_header(data, pos).is_control:
                self.batch(decode_batch(data, pos)[0], where)
                return
            header, values = record_values(data, pos)
        except DecodeError as exc:
            raise LoadError(f"{where}: corrupt data at byte {pos}: {exc.reason}") from None
        if header.last_offset < self.next_offset:
            return
        self._check_continues(header.base_offset, where)
        for offset, value in values:
            if offset >= self.next_offset:
                self._replay(self._decode(value, offset, where), offset, where)
        self._done(header.last_offset, header.partition_leader_epoch, header.max_timestamp)

    def _check_continues(self, base_offset: int, where: str) -> None:
        if base_offset > self.next_offset:
            raise LoadError(f"{where}: offsets {self.next_offset} to {base_offset - 1} are missing: the log "
                            f"does not continue the snapshot or the batch before it")

    def _done(self, last_offset: int, epoch: int, timestamp_ms: int) -> None:
        self.controller.offsets.skip_to(last_offset + 1)
        self.last_epoch = self.contained_epoch = epoch
        self.last_timestamp_ms = timestamp_ms

    def _control(self, batch: RecordBatch, where: str, replay: bool) -> list[tuple[Message, int]]:
        replayed = []
        for rec in batch.records:
            offset = batch.base_offset + rec.offset_delta
            try:
                # A missing key is refused as a short one.
                control_type = parse_control_key(rec.key or b"")
                if control_type == ControlType.LEADER_CHANGE:
                    change = parse_control_value(rec.value, LeaderChangeMessage)
                    if isinstance(change, LeaderChangeMessage):
                        self.leader = Leader(change.leader_id, batch.partition_leader_epoch)
                elif control_type in _QUORUM_CONTROLS and replay and offset >= self.next_offset:
                    cls = control_message_class(control_type)
                    if cls is None:
                        raise DecodeError("ControlRecord", None, 0, f"no class for control type {control_type}")
                    message = parse_control_value(rec.value, cls)
                    self._replay(message, offset, where)
                    replayed.append((message, offset))
            except DecodeError as exc:
                raise LoadError(f"{where}: offset {offset}: cannot decode the control record: {exc}") from None
        return replayed

    # --- records --------------------------------------------------------------------------
    @staticmethod
    def _decode(value: bytes | None, offset: int, where: str) -> Message:
        try:
            if value is None:
                raise DecodeError("MetadataRecord", None, 0, "the record value is null")
            return parse_metadata_record(value)[0]
        except DecodeError as exc:
            raise LoadError(f"{where}: offset {offset}: {describe_undecodable(value, exc)}") from None

    def _replay(self, record: Message, offset: int, where: str) -> None:
        try:
            self.controller.replay(record, offset)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LoadError(f"{where}: offset {offset}: cannot replay {record.NAME}: {exc}") from None

