"""The controller process: loads the metadata, then serves it over the network.

This is the shell around the I/O-free controller: it owns the log, the committer, the
listener and the lease timer, and rebuilds the controller from the log if a write fails.
"""

from __future__ import annotations

import asyncio
import logging
import time

from protocol.generated.metadata.leader_change_message import LeaderChangeMessage, Voter
from protocol.records import CONTROL_FLAG, ControlType, Record, RecordBatch, control_key, control_value, encode_batch
from protocol.records import parse_metadata_record
from server.apis import Router
from server.config import ControllerConfig
from server.controller.clock import Clock, SystemClock
from server.controller.cluster import Endpoint
from server.controller.quorum_controller import QuorumController
from server.controller.result import ControllerResult
from server.metalog.bootstrap import read_bootstrap
from server.metalog.committer import Committer, encode_records
from server.metalog.meta_properties import check_log_dirs
from server.metalog.quorum_state import QuorumState, read_quorum_state, write_quorum_state
from server.metalog.segments import MetadataLog
from server.network import Listener

log = logging.getLogger("kraftwire.server")

PLAINTEXT = 0


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ControllerServer:
    def __init__(self, config: ControllerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.cluster_id = check_log_dirs(config)
        self.log = MetadataLog.open(config.metadata_log_dir, config.metadata_log_segment_bytes)
        self.epoch = self._new_epoch()
        self.controller = self._load()
        self.committer = Committer(self.log, self.epoch, self._on_commit_failure, wall_clock_ms)
        self.router = Router(self.controller, self.committer)
        self.listener = Listener(self.router.dispatch, config.socket_request_max_bytes)
        self.address: tuple[str, int] | None = None
        self._timer: asyncio.TimerHandle | None = None

    # --- loading ------------------------------------------------------------------------------
    def _new_epoch(self) -> int:
        """A single voter elects itself at start-up: a new epoch, recorded before it is used."""
        state = read_quorum_state(self.config.metadata_log_dir)
        epoch = max(state.leader_epoch, self.log.last_epoch) + 1
        write_quorum_state(self.config.metadata_log_dir, QuorumState(
            leader_id=self.config.node_id, leader_epoch=epoch, voted_id=self.config.node_id,
            voters=tuple(sorted(self.config.voters)) or (self.config.node_id,)))
        return epoch

    def _new_controller(self) -> QuorumController:
        listener = self.config.controller_listener
        return QuorumController(
            self.cluster_id, self.config.node_id, self.clock,
            session_timeout_ms=self.config.broker_session_timeout_ms,
            controller_endpoints=[Endpoint(listener.name, listener.host or "127.0.0.1", listener.port, PLAINTEXT)])

    def _load(self) -> QuorumController:
        controller = self._new_controller()
        if self.log.end_offset == 0:
            records = read_bootstrap(self.config.metadata_log_dir)
            applied = controller.apply(ControllerResult(records))
            self.log.append([encode_records(applied.records, 0, self.epoch, wall_clock_ms())])
            log.info("bootstrapped the metadata log with %d records", len(records))
        else:
            self._replay_log(controller)
        self._append_leader_change(controller)
        controller.activate()
        return controller

    def _replay_log(self, controller: QuorumController) -> None:
        count = 0
        for batch in self.log.batches(0):
            if not batch.is_control:
                for rec in batch.records:
                    record, _ = parse_metadata_record(rec.value)
                    controller.replay(record, batch.base_offset + rec.offset_delta)
                    count += 1
            controller.next_offset = batch.next_offset
        log.info("replayed %d metadata records up to offset %d", count, controller.last_applied_offset)

    def _append_leader_change(self, controller: QuorumController) -> None:
        """Mark the start of this epoch in the log, as a KRaft leader does."""
        voters = [Voter(voter_id=v) for v in sorted(self.config.voters) or [self.config.node_id]]
        message = LeaderChangeMessage(version=0, leader_id=self.config.node_id, voters=voters,
                                      granting_voters=voters)
        now = wall_clock_ms()
        batch = RecordBatch(base_offset=self.log.end_offset, partition_leader_epoch=self.epoch,
                            attributes=CONTROL_FLAG, base_timestamp=now, max_timestamp=now,
                            records=[Record(control_value(message, 0), control_key(ControlType.LEADER_CHANGE))])
        self.log.append([encode_batch(batch)])
        controller.next_offset = self.log.end_offset

    def _on_commit_failure(self, exc: Exception) -> None:
        log.error("rebuilding the controller from the durable log after a failed write: %s", exc)
        self.controller = self._new_controller()
        self._replay_log(self.controller)
        self.controller.activate()
        self.router.controller = self.controller

    # --- serving ------------------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        listener = self.config.controller_listener
        self.address = await self.listener.start(listener.host, listener.port)
        self._schedule_lease_check()
        return self.address

    def _schedule_lease_check(self) -> None:
        interval = max(0.05, self.config.broker_session_timeout_ms / 8000)
        self._timer = asyncio.get_running_loop().call_later(interval, self._check_leases)

    def _check_leases(self) -> None:
        applied = self.controller.fence_expired_brokers()
        if applied.records:
            fenced = [r.id for r, _ in applied.records if r.NAME == "FenceBrokerRecord"]
            log.info("fencing brokers %s: their sessions expired", fenced)
            self.committer.submit(applied.records, applied.base_offset)
        self._schedule_lease_check()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        await self.listener.stop()
        await self.committer.drain()
        self.committer.close()
        self.log.close()
