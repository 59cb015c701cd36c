"""Downloading a metadata snapshot with FetchSnapshot, as an observer does: the test broker's
fetcher and the metadata shell both fetch the snapshot a Fetch named, chunk by chunk, and
read the whole file through the snapshot reader, which checks it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Awaitable, Callable

from protocol.error_codes import Error
from protocol.generated.messages.fetch_snapshot_request import (
    FetchSnapshotRequest, PartitionSnapshot, SnapshotId, TopicSnapshot)
from protocol.generated.messages.fetch_snapshot_response import FetchSnapshotResponse
from protocol.message import Message
from server.controller.result import VersionedRecord
from server.image.loader import LoadError
from server.metalog.meta_properties import StorageError
from server.metalog.snapshot_file import read_snapshot_file

METADATA_TOPIC = "__cluster_metadata"
FETCH_SNAPSHOT_VERSION = 1


class SnapshotRefused(LoadError):
    """The controller answered a FetchSnapshot with an error (``code``) at byte ``position``."""

    def __init__(self, code: int, position: int) -> None:
        super().__init__(f"error {code} at byte {position}")
        self.code = code
        self.position = position


async def download_snapshot(call: Callable[[FetchSnapshotRequest], Awaitable[Message]], what: str,
                            replica_id: int, end_offset: int, epoch: int, max_bytes: int,
                            cluster_id: str | None = None) -> bytes:
    """The bytes of snapshot (end_offset, epoch), asked for chunk by chunk with ``call``.
    Raises SnapshotRefused on an error answer, LoadError (``what`` names the snapshot) when
    the controller stops sending before the end."""
    chunks: list[bytes] = []
    position = 0
    while True:
        request = FetchSnapshotRequest(
            cluster_id=cluster_id, replica_id=replica_id, max_bytes=max_bytes,
            topics=[TopicSnapshot(name=METADATA_TOPIC, partitions=[PartitionSnapshot(
                partition=0, current_leader_epoch=-1, position=position,
                snapshot_id=SnapshotId(end_offset=end_offset, epoch=epoch))])])
        response = await call(request)
        assert isinstance(response, FetchSnapshotResponse)
        parts = [p for t in response.topics for p in t.partitions]
        code = response.error_code or (parts[0].error_code if len(parts) == 1 else Error.UNKNOWN_SERVER_ERROR)
        if code != Error.NONE:
            raise SnapshotRefused(code, position)
        chunk = parts[0].unaligned_records or b""
        chunks.append(chunk)
        position += len(chunk)
        if position >= parts[0].size:
            return b"".join(chunks)
        if not chunk:
            raise LoadError(f"{what} stopped at byte {position} of {parts[0].size}")


def parse_snapshot(data: bytes, end_offset: int, epoch: int, what: str) -> list[VersionedRecord]:
    """The records of a downloaded snapshot; LoadError, prefixed with ``what``, when the file
    is not a sound snapshot."""
    # The snapshot file reader checks CRCs, header and footer; it reads files.
    with tempfile.TemporaryDirectory(prefix="kraftwire-snapshot-") as tmp:
        path = Path(tmp) / f"{end_offset:020d}-{epoch:010d}.checkpoint"
        path.write_bytes(data)
        try:
            return read_snapshot_file(path)
        except StorageError as exc:
            raise LoadError(f"{what}: {str(exc).removeprefix(f'{path}: ')}") from None
