"""The broker's metadata image: the committed log replayed with the controller's own replay.

Records the controller keeps no state for (ACLs, quotas, producer ids, ...) are counted and
passed over, as a broker that does not use them would. Listeners hear every log record after
it is replayed; a snapshot replaces the image whole.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

from protocol.message import Message
from protocol.records import RecordBatch
from server.controller.clock import ManualClock
from server.controller.cluster import BrokerRegistration, ClusterControl
from server.controller.quorum_controller import QuorumController
from server.controller.replication import ReplicationControl
from server.controller.result import VersionedRecord
from tools.metadata_shell.replayer import LoadError, decode_value, replay_record

RecordListener = Callable[[Message, int], None]


# The fetched log cannot be replayed; the message says where.
ImageError = LoadError


class MetadataImage:
    def __init__(self) -> None:
        self.controller = self._fresh()
        self.last_epoch = -1  # leader epoch of the last batch replayed, for Fetch's LastFetchedEpoch
        self.skipped: Counter[str] = Counter()
        self.listeners: list[RecordListener] = []

    @staticmethod
    def _fresh() -> QuorumController:
        # Cluster id, node id and clock play no part in replay.
        return QuorumController("", -1, ManualClock())

    @property
    def next_offset(self) -> int:
        return self.controller.next_offset

    @property
    def offset(self) -> int:
        """The last offset replayed: what a heartbeat reports as CurrentMetadataOffset."""
        return self.controller.last_applied_offset

    @property
    def cluster(self) -> ClusterControl:
        return self.controller.cluster

    @property
    def replication(self) -> ReplicationControl:
        return self.controller.replication

    def registration(self, broker_id: int) -> BrokerRegistration | None:
        return self.controller.cluster.brokers.get(broker_id)

    def is_usable(self, broker_id: int) -> bool:
        return self.controller.cluster.is_usable(broker_id)

    def reset(self) -> None:
        self.controller = self._fresh()
        self.last_epoch = -1

    def load_snapshot(self, records: Iterable[VersionedRecord], end_offset: int) -> None:
        """Replace the image with a snapshot's records, as of ``end_offset``.

        The next Fetch names no last epoch: the log may no longer hold a batch of the
        snapshot's epoch to check it against."""
        self.reset()
        for record, _ in records:
            replay_record(self.controller, record, end_offset - 1, self.skipped)
        self.controller.offsets.skip_to(end_offset)

    def replay_batch(self, batch: RecordBatch) -> None:
        """Replay the records of a log batch this image has not seen yet."""
        if batch.last_offset < self.next_offset:
            return
        if batch.base_offset > self.next_offset:
            raise ImageError(f"offsets {self.next_offset} to {batch.base_offset - 1} are missing from the fetched log")
        if not batch.is_control:
            for rec in batch.records:
                offset = batch.base_offset + rec.offset_delta
                if offset < self.next_offset:
                    continue
                record = decode_value(rec.value, offset)
                replay_record(self.controller, record, offset, self.skipped)
                for listener in self.listeners:
                    listener(record, offset)
        self.controller.offsets.skip_to(batch.next_offset)
        self.last_epoch = batch.partition_leader_epoch
