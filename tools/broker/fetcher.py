"""Fetching the metadata log as a KRaft observer and replaying it into the image.

A long-polling Fetch of ``__cluster_metadata`` partition 0 from the image's next offset; the
controller answers with committed batches only, or with the id of the snapshot to load first
(FetchSnapshot) when the offset is before its log start. One fetcher feeds every broker of
the process: they all report the offset it has replayed.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging

from protocol.error_codes import Error, describe
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from protocol.generated.messages.fetch_response import FetchResponse, PartitionData
from protocol.primitives import METADATA_TOPIC_ID
from protocol.records import iter_batches
from tools.broker.channel import ControllerChannel, ControllerUnavailable
from tools.snapshot_download import FETCH_SNAPSHOT_VERSION, METADATA_TOPIC, SnapshotRefused, download_snapshot, parse_snapshot
from server.image.image import MetadataImage
from server.image.loader import LoadError

log = logging.getLogger("kraftwire.broker.fetcher")

FETCH_VERSION = 17
MAX_WAIT_MS = 500
MAX_BYTES = 8 << 20
RETRY_S = 1.0
# Answers that mean this controller does not lead the metadata partition (any more).
LEADERSHIP_ERRORS = {Error.NOT_LEADER_OR_FOLLOWER, Error.FENCED_LEADER_EPOCH, Error.UNKNOWN_LEADER_EPOCH}


class MetadataFetcher:
    def __init__(self, channel: ControllerChannel, replica_id: int, image: MetadataImage,
                 cluster_id: str | None) -> None:
        self.channel = channel
        self.replica_id = replica_id
        self.image = image
        self.cluster_id = cluster_id
        self.high_watermark = -1
        self.fetches = 0
        self.snapshots_loaded = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    @property
    def offset(self) -> int:
        return self.image.offset

    def wait_for(self, offset: int) -> asyncio.Future[None]:
        """A future resolved once the image has replayed ``offset``."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.image.offset >= offset:
            fut.set_result(None)
        else:
            heapq.heappush(self._waiters, (offset, next(self._seq), fut))
        return fut

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.image.offset:
            _, _, fut = heapq.heappop(waiters)
            if not fut.done():
                fut.set_result(None)

    async def run(self) -> None:
        while True:
            try:
                await self._step()
            except ControllerUnavailable:
                continue  # the channel backs off and finds the controller
            except LoadError as exc:
                log.error("metadata replay failed, fetching the log again from the start: %s", exc)
                self.image.reset()
                await asyncio.sleep(RETRY_S)

    async def _step(self) -> None:
        part = await self._fetch()
        if part is None:
            return
        if part.diverging_epoch.epoch != -1:
            log.warning("the metadata log diverges from the image at epoch %d offset %d; rebuilding",
                        part.diverging_epoch.epoch, part.diverging_epoch.end_offset)
            self.image.reset()
            return
        if part.snapshot_id.end_offset >= 0:
            await self._load_snapshot(part.snapshot_id.end_offset, part.snapshot_id.epoch)
            return
        self.high_watermark = part.high_watermark
        for batch, _ in iter_batches(part.records or b""):
            self.image.replay_batch(batch)
        self._wake()

    async def _fetch(self) -> PartitionData | None:
        request = FetchRequest(
            cluster_id=self.cluster_id, replica_state=ReplicaState(replica_id=self.replica_id),
            max_wait_ms=MAX_WAIT_MS, min_bytes=1,
            max_bytes=MAX_BYTES,
            topics=[FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[FetchPartition(
                partition=0, fetch_offset=self.image.next_offset, last_fetched_epoch=self.image.last_epoch,
                partition_max_bytes=MAX_BYTES)])])
        timeout = MAX_WAIT_MS / 1000 + self.channel.request_timeout_s
        response = await self.channel.call(request, FETCH_VERSION, timeout)
        assert isinstance(response, FetchResponse)
        self.fetches += 1
        parts = [p for t in response.responses for p in t.partitions]
        code = response.error_code or (parts[0].error_code if len(parts) == 1 else Error.UNKNOWN_SERVER_ERROR)
        if code == Error.NONE:
            return parts[0]
        if code in LEADERSHIP_ERRORS:
            self.channel.rotate(describe(code))
        elif code == Error.OFFSET_OUT_OF_RANGE:
            log.warning("offset %d is outside the controller's metadata log; fetching from the start",
                        self.image.next_offset)
            self.image.reset()
        else:
            log.error("metadata Fetch at offset %d failed: %s", self.image.next_offset, describe(code))
            await asyncio.sleep(RETRY_S)
        return None

    async def _load_snapshot(self, end_offset: int, epoch: int) -> None:
        snapshot = f"snapshot {end_offset}-{epoch}"
        try:
            data = await download_snapshot(
                lambda request: self.channel.call(request, FETCH_SNAPSHOT_VERSION), snapshot,
                self.replica_id, end_offset, epoch, MAX_BYTES, self.cluster_id)
        except SnapshotRefused as exc:
            # The snapshot may have been replaced by a newer one: the next Fetch says which.
            log.warning("FetchSnapshot %d-%d at byte %d failed: %s", end_offset, epoch, exc.position,
                        describe(exc.code))
            await asyncio.sleep(RETRY_S)
            return
        self.image.load_snapshot(parse_snapshot(data, end_offset, epoch, snapshot), end_offset)
        self.snapshots_loaded += 1
        log.info("loaded metadata snapshot %d-%d (%d bytes)", end_offset, epoch, len(data))
        self._wake()
