"""The controller process: loads the metadata, then serves it over the network.

This is the shell around the I/O-free controller: it owns the log, the committer, the
listener and the lease timer, and rebuilds the controller from the log if a write fails.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from pathlib import Path

from protocol.generated.messages import ApiKey
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.generated.metadata.abort_transaction_record import AbortTransactionRecord
from protocol.generated.metadata.fence_broker_record import FenceBrokerRecord
from server.apis import NO_WAIT, Router
from server.config import ControllerConfig
from server.controller.clock import Clock, SystemClock
from server.controller.cluster import Endpoint
from server.controller.quorum_controller import QuorumController
from server.controller.result import ControllerResult, accepting
from server.image.loader import MetadataLoader
from server.metalog.bootstrap import read_bootstrap
from server.metalog.committer import Committer, encode_batches
from server.metalog.meta_properties import check_log_dirs
from server.metalog.meta_properties import StorageError
from server.metalog.quorum_state import QuorumState, read_quorum_state, write_quorum_state
from server.metalog.snapshots import (
    SnapshotId, list_snapshots, load_latest_snapshot, oldest_kept, set_aside_newer, write_snapshot)
from server.metalog.segments import MetadataLog
from server.metrics.controller_metrics import ControllerMetrics
from server.network import Listener
from server.raft.fetch import MetadataFetchServer
from server.raft.replication import leader_change_batch

log = logging.getLogger("kraftwire.server")

PLAINTEXT = 0


def static_configs(c: ControllerConfig) -> dict[str, str]:
    """The server.properties settings that dynamic configs fall back to."""
    return {
        "min.insync.replicas": str(c.min_insync_replicas),
        "unclean.leader.election.enable": str(c.unclean_leader_election_enable).lower(),
        "eligible.leader.replicas.enabled": str(c.eligible_leader_replicas_enabled).lower(),
        "max.request.partition.size.limit": str(c.max_request_partition_size_limit),
        "num.partitions": str(c.num_partitions),
        "default.replication.factor": str(c.default_replication_factor),
    }


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ControllerServer:
    def __init__(self, config: ControllerConfig, clock: Clock | None = None,
                 capture_file: Path | None = None, take_over_quorum: bool = False) -> None:
        self.config = config
        self.take_over_quorum = take_over_quorum
        self.clock = clock or SystemClock()
        self.cluster_id = check_log_dirs(config)
        self.log = MetadataLog.open(config.metadata_log_dir, config.metadata_log_segment_bytes)
        self.voters = tuple(sorted(config.voters)) or (config.node_id,)
        self._check_voters(read_quorum_state(config.metadata_log_dir).voters, "quorum-state")
        self.epoch = -1  # chosen once the log is loaded: above every epoch in it
        self.controller = self._load_without_collector()
        self.committer = Committer(self.log, self.epoch, self._on_commit_failure, wall_clock_ms)
        self.router = Router(self.controller, self.committer)
        advertised = config.advertised_controller_listener
        self.fetch_server = MetadataFetchServer(
            self.log, self.committer, self.cluster_id, config.node_id, self.epoch,
            sorted(config.voters) or [config.node_id], (advertised.host, advertised.port))
        self.router.register(ApiKey.FETCH, accepting(
            FetchRequest, lambda r, v: (self.fetch_server.fetch(r, v), NO_WAIT)))
        self.router.register(ApiKey.DESCRIBE_QUORUM, accepting(
            DescribeQuorumRequest, lambda r, v: (self.fetch_server.describe_quorum(r, v), NO_WAIT)))
        self.router.register(ApiKey.FETCH_SNAPSHOT, accepting(
            FetchSnapshotRequest, lambda r, v: (self.fetch_server.fetch_snapshot(r, v), NO_WAIT)))
        self.fetch_server.snapshot = self.snapshot
        self._snapshot_wanted = False
        self._snapshotting = False
        # Bytes already in the log past the snapshot count towards the next one.
        self._snapshot_mark = -self.log.bytes_after(self.snapshot.end_offset if self.snapshot else 0)
        self.committer.listeners.append(lambda offset: self.controller.committed(offset))
        self.committer.listeners.append(self._maybe_snapshot)
        # The server's own traffic as pcapng, for tools.replay: one connection per client.
        self.capture = None
        if capture_file is not None:
            from server.capture import ServerCapture  # the capture formats load only when used

            self.capture = ServerCapture(capture_file)
        self.listener = Listener(self.router.dispatch, config.socket_request_max_bytes,
                                 self.capture.connection if self.capture is not None else None)
        self.address: tuple[str, int] | None = None
        self.metrics = ControllerMetrics(self)
        self.router.observers.append(self.metrics.observe_request)
        self.metrics_port: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._no_op_timer: asyncio.TimerHandle | None = None

    # --- loading ------------------------------------------------------------------------------
    def _check_voters(self, found: tuple[int, ...] | list[int], source: str) -> None:
        """kraftwire runs a one-voter quorum. A directory whose quorum had other voters (a
        node of a three-controller Kafka cluster; the voter set in quorum-state, or in the
        log's VotersRecord) is refused before anything is written, unless ``take_over_quorum``
        says to continue as its only voter: electing itself alone while the others may still
        run would give the cluster two leaders."""
        if not found or tuple(sorted(found)) == self.voters:
            return
        if not self.take_over_quorum:
            raise StorageError(
                f"{self.log.directory}: the quorum's voters are {sorted(found)} ({source}) but kraftwire runs "
                f"a single-voter quorum of {list(self.voters)}; stop the other voters and start with "
                f"--take-over-quorum to continue as the only voter")
        log.warning("taking over the quorum of voters %s as its only voter %s", sorted(found), list(self.voters))

    def _new_epoch(self) -> int:
        """A single voter elects itself at start-up: a new epoch above any in the log, its
        snapshots and quorum-state, recorded before it is used."""
        state = read_quorum_state(self.config.metadata_log_dir)
        snapshots = list_snapshots(self.log.directory)
        epoch = max(state.leader_epoch, self.log.last_epoch, snapshots[-1].epoch if snapshots else 0) + 1
        write_quorum_state(self.config.metadata_log_dir, QuorumState(
            leader_id=self.config.node_id, leader_epoch=epoch, voted_id=self.config.node_id, voters=self.voters))
        return epoch

    def _new_controller(self) -> QuorumController:
        advertised = self.config.advertised_controller_listener
        c = self.config
        return QuorumController(
            self.cluster_id, c.node_id, self.clock,
            session_timeout_ms=c.broker_session_timeout_ms,
            controller_endpoints=[Endpoint(advertised.name, advertised.host, advertised.port, PLAINTEXT)],
            static_configs=static_configs(c),
            metadata_lists_brokers=c.metadata_nodes == "brokers",
            voter_ids=c.voters or {c.node_id})

    def _load_without_collector(self) -> QuorumController:
        """Loading builds millions of long-lived objects; the cyclic collector would rescan
        them over and over while they are created, and once at a time later on the event loop.
        So it is paused for the load, and what the load built is moved out of its sight."""
        gc.disable()
        try:
            return self._load()
        finally:
            gc.enable()
            gc.freeze()

    def _load(self) -> QuorumController:
        controller = self._new_controller()
        self.snapshot = self._restore(controller)
        self._check_voters(controller.quorum.voter_ids, "VotersRecord")
        self.epoch = self._new_epoch()
        if self.log.end_offset == 0 and self.snapshot is None:
            records = read_bootstrap(self.config.metadata_log_dir)
            applied = controller.apply(ControllerResult(records))
            self.log.append(encode_batches(applied.records, 0, self.epoch, wall_clock_ms()))
            log.info("bootstrapped the metadata log with %d records", len(records))
        self._append_leader_change(controller)
        self._abort_open_transaction(controller)
        controller.activate()
        return controller

    def _abort_open_transaction(self, controller: QuorumController) -> None:
        """A metadata transaction the log ends inside was never finished: its records were
        not applied, and, as Kafka's controller does on activation, the log says so."""
        start = controller.offsets.transaction_start
        if start < 0:
            return
        log.warning("aborting the metadata transaction begun at offset %d: the log ends inside it", start)
        applied = controller.apply(ControllerResult([(AbortTransactionRecord(reason="Controller failover"), 0)]))
        self.log.append(encode_batches(applied.records, applied.base_offset, self.epoch, wall_clock_ms()))

    def _restore(self, controller: QuorumController) -> SnapshotId | None:
        """The latest usable snapshot, then the log after it: the durable state."""
        loader = MetadataLoader(controller)
        loaded = load_latest_snapshot(self.log.directory, self.log.start_offset)
        for path in set_aside_newer(self.log.directory, loaded[0] if loaded is not None else None):
            log.warning("set the unusable snapshot aside as %s", path.name)
        if loaded is not None:
            snapshot, records = loaded
            loader.snapshot(records, snapshot.end_offset, str(self.log.directory / snapshot.file_name))
            log.info("loaded snapshot %s (%d records)", snapshot.file_name, len(records))
            if self.log.end_offset < snapshot.end_offset:
                # The snapshot holds more than the log (Kafka keeps no segments below it).
                log.info("the log ends at offset %d, below the snapshot: it continues at offset %d",
                         self.log.end_offset, snapshot.end_offset)
                self.log.restart_at(snapshot.end_offset)
        start = controller.next_offset
        for data, entry in self.log.raw_batches(controller.next_offset):
            loader.raw_batch(data, entry.position, str(self.log.segments[entry.segment]))
        log.info("replayed the log from offset %d to %d", start, controller.last_applied_offset)
        return loaded[0] if loaded is not None else None

    def _append_leader_change(self, controller: QuorumController) -> None:
        """Mark the start of this epoch in the log, as a KRaft leader does."""
        voters = frozenset(self.voters)
        self.log.append([leader_change_batch(self.log.end_offset, self.epoch, self.config.node_id,
                                             voters, voters, wall_clock_ms())])
        controller.offsets.skip_to(self.log.end_offset)

    def _on_commit_failure(self, exc: BaseException) -> None:
        log.error("rebuilding the controller from the durable log after a failed write: %s", exc)
        try:
            self._reload()
        except Exception:
            # The state in memory holds records that never became durable; serving it would
            # show uncommitted changes. The log on disk is intact, so stop and let a restart
            # recover from it.
            log.critical("cannot rebuild the controller from the log; exiting", exc_info=True)
            os._exit(3)

    def _reload(self) -> None:
        controller = self._new_controller()
        self._restore(controller)
        controller.activate()
        self.controller = self.router.controller = controller

    # --- snapshots ----------------------------------------------------------------------------
    def request_snapshot(self) -> None:
        """Take a snapshot at the next moment the applied state is all committed."""
        self._snapshot_wanted = True
        self._maybe_snapshot(self.committer.committed_offset)

    def _maybe_snapshot(self, committed: int) -> None:
        if self._snapshotting or committed != self.controller.last_applied_offset:
            return
        since = self.log.appended_bytes - self._snapshot_mark
        if not self._snapshot_wanted and since < self.config.metadata_log_max_record_bytes_between_snapshots:
            return
        self._snapshot_wanted = False
        self._snapshotting = True
        snapshot = SnapshotId(committed + 1, self.epoch)
        # The records are built now, on the loop, so they are exactly the committed state;
        # only the file writing runs on the writer thread.
        records = list(self.controller.snapshot_records())
        loop = asyncio.get_running_loop()
        task = loop.run_in_executor(None, write_snapshot, self.log.directory, snapshot, records)
        task.add_done_callback(lambda f: self._snapshot_written(f, snapshot, len(records)))

    def _snapshot_written(self, task: asyncio.Future, snapshot: SnapshotId, count: int) -> None:
        self._snapshotting = False
        if task.exception() is not None:
            log.error("snapshot %s failed: %s", snapshot.file_name, task.exception())
            return
        self.snapshot = snapshot
        self._snapshot_mark = self.log.appended_bytes
        self.fetch_server.snapshot = snapshot
        # The log below the older kept snapshot goes: the newest can fall back to that one.
        kept = oldest_kept(self.log.directory)
        removed = self.log.delete_segments_before(kept.end_offset if kept else snapshot.end_offset)
        log.info("wrote snapshot %s (%d records, %d bytes); removed %d old segments",
                 snapshot.file_name, count, task.result(), len(removed))

    # --- serving ------------------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        listener = self.config.controller_listener
        self.address = await self.listener.start(listener.host, listener.port)
        if self.config.metrics_port is not None:
            self.metrics_port = self.metrics.start(listener.host, self.config.metrics_port)
        self._schedule_lease_check()
        self._schedule_no_op()
        return self.address

    def _schedule_lease_check(self) -> None:
        interval = max(0.05, self.config.broker_session_timeout_ms / 8000)
        self._timer = asyncio.get_running_loop().call_later(interval, self._check_leases)

    def _check_leases(self) -> None:
        applied = self.controller.fence_expired_brokers()
        if applied.records:
            fenced = [r.id for r, _ in applied.records if isinstance(r, FenceBrokerRecord)]
            shown = ", ".join(map(str, fenced[:10])) + (f" and {len(fenced) - 10} more" if len(fenced) > 10 else "")
            log.info("fencing brokers [%s]: their sessions expired", shown)
            self.committer.submit(applied.records, applied.base_offset)
        self._schedule_lease_check()

    def _schedule_no_op(self) -> None:
        # As Kafka's active controller: on a fixed period, whatever else is written meanwhile.
        interval_ms = self.config.metadata_max_idle_interval_ms
        if interval_ms > 0:
            self._no_op_timer = asyncio.get_running_loop().call_later(interval_ms / 1000, self._write_no_op)

    def _write_no_op(self) -> None:
        applied = self.controller.write_no_op()
        self.committer.submit(applied.records, applied.base_offset)
        self._schedule_no_op()

    async def stop(self) -> None:
        for timer in (self._timer, self._no_op_timer):
            if timer is not None:
                timer.cancel()
        await self.listener.stop()
        self.metrics.stop()
        if self.capture is not None:
            self.capture.close()
        await self.committer.drain()
        self.committer.close()
        self.log.close()
