"""Loading the metadata from a live controller, as a KRaft observer would.

The active controller is found among the addresses given, as Kafka's admin client finds it
(a standby's DescribeQuorum answer names the leader and where it listens). Fetch the committed
log from it from offset 0 (replica id -1: an observer, not a voter); if the records are gone,
the response names the snapshot to fetch first with FetchSnapshot. Stop at the high
watermark: everything up to it is committed. A leader that moved meanwhile is looked for again.
"""

from __future__ import annotations

import asyncio
import time

from protocol.client import parse_addresses
from protocol.error_codes import Error, describe
from protocol.errors import DecodeError
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from protocol.generated.messages.fetch_response import FetchResponse, PartitionData
from protocol.primitives import METADATA_TOPIC_ID
from protocol.records import iter_batches
from server.client_connection import PLAINTEXT, ConnectionLost, KafkaConnection
from server.controller.result import VersionedRecord
from server.image.image import MetadataImage
from server.image.loader import LoadError
from server.security.client import ClientSecurity
from tools.active_controller import NoActiveController, connect_active, reason
from tools.snapshot_download import FETCH_SNAPSHOT_VERSION, METADATA_TOPIC, SnapshotRefused, download_snapshot, parse_snapshot

OBSERVER = -1
FETCH_VERSION = 16
MAX_BYTES = 8 << 20
CLIENT_ID = "kraftwire-metadata-shell"


class LeaderMoved(LoadError):
    """The controller asked is no longer the leader: the active one is looked for again."""


def load_controllers(spec: str, security: ClientSecurity = PLAINTEXT, timeout: float = 10.0) -> MetadataImage:
    """Read the whole committed log from the active controller, found among those of ``spec``
    within ``timeout`` seconds."""
    try:
        addresses = parse_addresses(spec)
    except ValueError as exc:
        raise LoadError(f"--controllers: {exc}") from None
    try:
        return asyncio.run(_load(addresses, security, timeout))
    except (NoActiveController, ConnectionLost) as exc:  # refused credentials among them
        raise LoadError(f"could not read the metadata log: {exc}") from None


async def _load(addresses: list[tuple[str, int]], security: ClientSecurity, timeout: float) -> MetadataImage:
    deadline = time.monotonic() + timeout
    while True:
        active = await connect_active(addresses, security, max(0.1, deadline - time.monotonic()), CLIENT_ID)
        try:
            return await _read_log(active.connection, timeout)
        except LeaderMoved:
            if time.monotonic() >= deadline:
                raise
        except (OSError, ConnectionLost, asyncio.TimeoutError, DecodeError) as exc:
            raise LoadError(f"could not read the metadata log: {active.host}:{active.port}: {reason(exc)}") from None
        finally:
            active.connection.close()


async def _read_log(conn: KafkaConnection, timeout: float) -> MetadataImage:
    image = MetadataImage()
    while True:
        part = await _fetch(conn, image.next_offset, timeout)
        if part.snapshot_id.end_offset >= 0:
            end, epoch = part.snapshot_id.end_offset, part.snapshot_id.epoch
            image.load_snapshot(await _fetch_snapshot(conn, end, epoch, timeout), end, f"snapshot {end}-{epoch}",
                                epoch)
            continue
        before = image.next_offset
        for batch, _ in iter_batches(part.records or b""):
            image.replay_batch(batch)
        if part.current_leader.leader_id >= 0:
            image.set_leader(part.current_leader.leader_id, part.current_leader.leader_epoch)
        if image.next_offset >= part.high_watermark:
            return image
        if image.next_offset == before:
            raise LoadError(f"Fetch at offset {before} returned nothing below the high watermark "
                            f"{part.high_watermark}")


async def _fetch(conn: KafkaConnection, offset: int, timeout: float) -> PartitionData:
    request = FetchRequest(
        replica_id=OBSERVER, replica_state=ReplicaState(replica_id=OBSERVER), max_wait_ms=0,
        min_bytes=0, max_bytes=MAX_BYTES,
        topics=[FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[
            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=MAX_BYTES)])])
    response = await conn.request(request, FETCH_VERSION, timeout)
    assert isinstance(response, FetchResponse)
    if response.error_code != Error.NONE:
        raise LoadError(f"Fetch failed: {describe(response.error_code)}")
    parts = [p for t in response.responses for p in t.partitions]
    if len(parts) != 1:
        raise LoadError(f"Fetch answered for {len(parts)} partitions, expected 1")
    code = parts[0].error_code
    if code == Error.NOT_LEADER_OR_FOLLOWER:
        raise LeaderMoved(f"Fetch at offset {offset} failed: {describe(code)}")
    if code != Error.NONE:
        raise LoadError(f"Fetch at offset {offset} failed: {describe(code)}")
    return parts[0]


async def _fetch_snapshot(conn: KafkaConnection, end_offset: int, epoch: int, timeout: float) -> list[VersionedRecord]:
    """The records of snapshot (end_offset, epoch), fetched in chunks and checked whole."""
    what = f"FetchSnapshot of {end_offset}-{epoch}"
    try:
        data = await download_snapshot(lambda request: conn.request(request, FETCH_SNAPSHOT_VERSION, timeout),
                                       what, OBSERVER, end_offset, epoch, MAX_BYTES)
    except SnapshotRefused as exc:
        raise LoadError(f"{what} at byte {exc.position} failed: {describe(exc.code)}") from None
    return parse_snapshot(data, end_offset, epoch, f"snapshot {end_offset}-{epoch} fetched from the controller")
