"""Producer id blocks (KIP-730): the controller hands brokers blocks of ids for idempotent and
transactional producers, and the log records where the next block starts.

Replayed state: the first id of the next block, and the broker id and epoch the last block
went to. Allocation checks the broker's epoch as Kafka does: an unknown broker or another
epoch is STALE_BROKER_EPOCH; a fenced broker with its current epoch still gets a block.
"""

from __future__ import annotations

from typing import Iterator

from protocol.error_codes import Error
from protocol.generated.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.generated.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from protocol.generated.metadata.producer_ids_record import ProducerIdsRecord
from server.controller.cluster import ClusterControl
from server.controller.offsets import OffsetControl, restore_attrs
from server.controller.result import ControllerResult, VersionedRecord

BLOCK_SIZE = 1000
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdControl:
    def __init__(self, cluster: ClusterControl, offsets: OffsetControl) -> None:
        self.cluster = cluster
        self.offsets = offsets
        self.next_producer_id = 0
        self.broker_id = -1
        self.broker_epoch = -1
        self.replayed = False  # whether any ProducerIdsRecord exists: only then is it snapshotted

    def replay(self, record: ProducerIdsRecord) -> None:
        if self.replayed and record.next_producer_id <= self.next_producer_id:
            raise ValueError(f"next producer id {record.next_producer_id} is not above the current "
                             f"{self.next_producer_id}")
        if self.offsets.recording:
            self.offsets.on_undo(restore_attrs(self, ("next_producer_id", "broker_id", "broker_epoch", "replayed")))
        self.next_producer_id = record.next_producer_id
        self.broker_id = record.broker_id
        self.broker_epoch = record.broker_epoch
        self.replayed = True

    def allocate(self, request: AllocateProducerIdsRequest) -> ControllerResult:
        registration = self.cluster.brokers.get(request.broker_id)
        if registration is None or registration.epoch != request.broker_epoch:
            return ControllerResult([], AllocateProducerIdsResponse(error_code=Error.STALE_BROKER_EPOCH))
        start = self.next_producer_id
        if start > MAX_PRODUCER_ID - BLOCK_SIZE:
            # Kafka answers an exhausted id space with an unknown server error as well.
            return ControllerResult([], AllocateProducerIdsResponse(error_code=Error.UNKNOWN_SERVER_ERROR))
        record = ProducerIdsRecord(broker_id=request.broker_id, broker_epoch=request.broker_epoch,
                                   next_producer_id=start + BLOCK_SIZE)
        return ControllerResult([(record, 0)], AllocateProducerIdsResponse(
            producer_id_start=start, producer_id_len=BLOCK_SIZE))

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        if self.replayed:
            yield ProducerIdsRecord(broker_id=self.broker_id, broker_epoch=self.broker_epoch,
                                    next_producer_id=self.next_producer_id), 0
