"""The controller process: loads the metadata, then serves it over the network.

This is the shell around the I/O-free controller: it owns the log, the commit path, the
listener and the lease timer. Every voter, a single one included, goes through the same Raft
core (``server.quorum``): a single voter is a quorum of one that elects itself as soon as it
listens. A voter is a hot standby until the core elects it: it replays every committed record
as the quorum commits it, so winning an election only means activating the state it has, and
the one ``Leadership`` says whether it is active. A write that cannot reach the log makes the
leader resign, as in a quorum. Nothing is written before the listener is bound.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from protocol.generated.messages import ApiKey
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.generated.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.generated.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.generated.messages.vote_request import VoteRequest
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.generated.messages.update_raft_voter_request import UpdateRaftVoterRequest
from protocol.message import Message
from protocol.primitives import ZERO_UUID, uuid_from_str
from server.apis import NO_WAIT, Router, anyone
from server.config import ControllerConfig
from server.security.settings import SECURITY_PROTOCOL_IDS
from server.controller.lifecycle import ControllerLifecycle
from server.controller.replica import ControllerReplica
from server.controller_registration import ControllerRegistrar
from server.controller.clock import Clock, SystemClock
from server.controller.cluster import Endpoint
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.result import accepting
from server.image.loader import LoadError, MetadataLoader
from server.metalog.bootstrap import read_bootstrap
from server.leadership import Leadership
from server.metalog.meta_properties import check_log_dirs, read_meta_properties
from server.metalog.meta_properties import StorageError
from server.metalog.quorum_state import read_quorum_state
from server.metalog.raft_log import DiskRaftLog
from server.metalog.snapshot_file import SnapshotRecords
from server.metalog.snapshots import SnapshotId, load_latest_snapshot, set_aside_newer
from server.metalog.segments import MetadataLog
from server.metrics.controller_metrics import ControllerMetrics
from server.network import Listener
from server.sliced_work import SlicedWork
from server.snapshot_scheduler import SnapshotScheduler
from server.quorum import QuorumReplication
from server.quorum_driver import QuorumEvents
from server.raft.voters import VoterSet, read_history
from server.raft.quorum_config import QuorumConfig

if TYPE_CHECKING:
    from server.capture import ServerCapture

log = logging.getLogger("kraftwire.server")



# A snapshot fetched from the leader is loaded this long at a time, the loop answering the
# other voters, brokers and clients in between: a million partitions take seconds to load.
INSTALL_SLICE_S = 0.02


@contextmanager
def collector_paused() -> Iterator[None]:
    """Loading builds millions of long-lived objects; the cyclic collector would rescan them
    over and over while they are created, and once at a time later on the event loop. So it
    is paused while they are built, and what was built is moved out of its sight."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.freeze()


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


def open_capture(path: Path | None) -> ServerCapture | None:
    """The server's own traffic as pcapng, for tools.replay: one connection per client."""
    if path is None:
        return None
    from server.capture import ServerCapture  # the capture formats load only when used

    return ServerCapture(path)


class ControllerServer:
    def __init__(self, config: ControllerConfig, clock: Clock | None = None,
                 capture_file: Path | None = None, take_over_quorum: bool = False) -> None:
        self.config = config
        self.take_over_quorum = take_over_quorum
        self.clock = clock or SystemClock()
        self.cluster_id = check_log_dirs(config)
        self.log = MetadataLog.open(config.metadata_log_dir, config.metadata_log_segment_bytes)
        self.dynamic = not config.voters
        self.voters = self._starting_voters()
        self.lone_voter = self.voters == (config.node_id,)
        if not self.dynamic:
            self._check_voters(read_quorum_state(config.metadata_log_dir).voters, "quorum-state")
        controller, latest_snapshot = self._load_without_collector()
        # After the load, which may have set an unusable snapshot aside.
        self.raft_log = DiskRaftLog(self.log)
        # The one holder of the controller: an installed snapshot replaces it there.
        self.replica = ControllerReplica(controller, self.raft_log, str(self.log.directory))
        self.replication = QuorumReplication(
            config.node_id, self._quorum_config(), config.metadata_log_dir, self.raft_log,
            QuorumEvents(self._quorum_committed, self._became_leader, self._lost_leadership,
                         self._leader_changed, self._snapshot_installed, self._control_appended), wall_clock_ms,
            config.controller_client)
        advertised = config.advertised_controller_listener
        self.registrar = ControllerRegistrar(
            config.node_id, Endpoint(advertised.name, advertised.host, advertised.port,
                                     SECURITY_PROTOCOL_IDS[config.security.protocol]),
            config.controller_client, config.quorum_request_timeout_ms / 1000)
        # No leader is named before the quorum has one (Kafka's -1), not this node.
        controller.set_active_controller(self.replication.leader_id)
        # Not active until the quorum (of one, or more) elects it.
        self.leadership = Leadership(self.replica, self.replication.confirm_leadership)
        self.router = Router(lambda: self.replica.controller, self.replication, config.security, self.leadership)
        self.sliced_work = SlicedWork(self)
        self.snapshots = SnapshotScheduler(
            self, self.log, self.raft_log, latest_snapshot, config.metadata_log_max_record_bytes_between_snapshots,
            config.snapshot_writer_delay_ms / 1000)
        self.replication.commits.listeners.append(self.snapshots.committed)
        self._serve_quorum_apis()
        # The quorum's events move the replica between its stages; replay and snapshot loads
        # run a slice per turn of the event loop.
        self.lifecycle = ControllerLifecycle(
            self.replica, lambda work: asyncio.get_running_loop().call_soon(work),
            lambda: read_bootstrap(self.config.metadata_log_dir), self._activated)
        self._active: asyncio.Future[None] | None = None  # start() of a single voter waits for it
        self._install_handle: asyncio.Handle | None = None
        self.capture = open_capture(capture_file)
        self.listener = Listener(self.router.dispatch, config.socket_request_max_bytes,
                                 self.capture.connection if self.capture is not None else None,
                                 config.security, self.router.sasl_session)
        self.address: tuple[str, int] | None = None
        # Without an endpoint nothing reads the metrics: the request path does not feed them.
        self.metrics = ControllerMetrics(self) if config.metrics_port is not None else None
        if self.metrics is not None:
            self.router.observers.append(self.metrics.observe_request)
        self.metrics_port: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._no_op_timer: asyncio.TimerHandle | None = None

    def _serve_quorum_apis(self) -> None:
        """The metadata log's own APIs, Fetch, FetchSnapshot and DescribeQuorum from anyone,
        and the quorum's RPCs: all the Raft layer's, as Kafka's controller hands them to its
        Raft client."""
        quorum = self.replication
        for key, cls in ((ApiKey.FETCH, FetchRequest), (ApiKey.DESCRIBE_QUORUM, DescribeQuorumRequest),
                         (ApiKey.VOTE, VoteRequest), (ApiKey.BEGIN_QUORUM_EPOCH, BeginQuorumEpochRequest),
                         (ApiKey.END_QUORUM_EPOCH, EndQuorumEpochRequest),
                         (ApiKey.FETCH_SNAPSHOT, FetchSnapshotRequest), (ApiKey.ADD_RAFT_VOTER, AddRaftVoterRequest),
                         (ApiKey.REMOVE_RAFT_VOTER, RemoveRaftVoterRequest),
                         (ApiKey.UPDATE_RAFT_VOTER, UpdateRaftVoterRequest)):
            self.router.register(key, anyone(accepting(cls, lambda r, v: (quorum.serve(r, v), NO_WAIT))))

    @property
    def controller(self) -> QuorumController:
        return self.replica.controller

    @property
    def snapshot(self) -> SnapshotId | None:
        """The newest snapshot on disk."""
        return self.snapshots.latest

    @property
    def active(self) -> bool:
        """Whether this node is the active controller."""
        return self.leadership.active

    # --- loading ------------------------------------------------------------------------------
    def _starting_voters(self) -> tuple[int, ...]:
        """A static quorum's voters are configured; a dynamic one's are in the log (an observer
        formatted with --no-initial-controllers finds none: it joins later)."""
        if not self.dynamic:
            return tuple(sorted(self.config.voters))
        return tuple(sorted(read_history(DiskRaftLog(self.log), VoterSet(())).latest.ids))

    def _check_voters(self, found: tuple[int, ...] | list[int], source: str) -> None:
        """A directory whose quorum had other voters than configured (a node of a
        three-controller Kafka cluster started alone; the voter set in quorum-state, or in the
        log's VotersRecord) is refused before anything is written, unless
        ``take_over_quorum`` says to continue with the configured voters: electing a leader
        among them while the others may still run would give the cluster two leaders."""
        if not found or tuple(sorted(found)) == self.voters:
            return
        if not self.take_over_quorum:
            raise StorageError(
                f"{self.log.directory}: the quorum's voters are {sorted(found)} ({source}) but "
                f"controller.quorum.voters names {list(self.voters)}; stop the other voters and start with "
                f"--take-over-quorum to continue with the configured voters")
        log.warning("taking over the quorum of voters %s with the voters %s", sorted(found), list(self.voters))

    def _quorum_config(self) -> QuorumConfig:
        directory_id = read_meta_properties(self.config.metadata_log_dir).directory_id
        return QuorumConfig.from_controller(self.config, () if self.dynamic else self.voters, self.cluster_id,
                                            uuid_from_str(directory_id) if directory_id else ZERO_UUID)

    def _new_controller(self) -> QuorumController:
        advertised = self.config.advertised_controller_listener
        c = self.config
        protocol = SECURITY_PROTOCOL_IDS[c.security.protocol]
        return QuorumController(
            self.cluster_id, c.node_id, self.clock,
            session_timeout_ms=c.broker_session_timeout_ms,
            controller_endpoints=[Endpoint(advertised.name, advertised.host, advertised.port, protocol)],
            static_configs=static_configs(c),
            metadata_lists_brokers=c.metadata_nodes == "brokers",
            voter_ids=c.voters or {c.node_id},
            voter_endpoints=self._voter_endpoints,
            kraft_upgrade=lambda level: self.replication.kraft_upgrade(level))

    def _voter_endpoints(self) -> dict[int, Endpoint]:
        """Where each voter listens, as the Raft layer knows it now: the static voters, or a
        dynamic quorum's VotersRecord. Every voter listens as this one does: the same listener
        name and security protocol."""
        advertised = self.config.advertised_controller_listener
        protocol = SECURITY_PROTOCOL_IDS[self.config.security.protocol]
        found = {}
        for node in self.replication.voter_set.nodes:
            address = self.replication.address_of(node.key.id)
            if address is not None:
                found[node.key.id] = Endpoint(advertised.name, address[0], address[1], protocol)
        return found

    def _load_without_collector(self) -> tuple[QuorumController, SnapshotId | None]:
        with collector_paused():
            return self._load()

    def _load(self) -> tuple[QuorumController, SnapshotId | None]:
        """The durable state, read only. A voter of a quorum loads the snapshot alone: which
        records of its log are committed it learns from the quorum, and replays them then. A
        single voter's whole log is committed (it commits what it flushed, and at its next
        election everything its log holds): it replays it now."""
        controller = self._new_controller()
        snapshot = self._restore(controller, replay_log=self.lone_voter)
        if not self.dynamic:
            self._check_voters(controller.quorum.voter_ids, "VotersRecord")
        return controller, snapshot

    # --- the quorum's events ----------------------------------------------------------------------
    def _quorum_committed(self, last_offset: int) -> None:
        self.lifecycle.committed(last_offset)

    def _became_leader(self, epoch: int, epoch_start_offset: int) -> None:
        self.lifecycle.became_leader()

    def _activated(self, writes: list[Applied]) -> None:
        """Active now: the first leader of a new log writes the bootstrap records after its
        LeaderChange, as Kafka's active controller does on activation, and the controller
        registers itself."""
        registration = self.registrar.register_active(self.controller)
        for applied in [*writes, *([registration] if registration is not None else [])]:
            self.replication.submit(applied.records, applied.base_offset)
        log.info("active controller of epoch %d (state at offset %d)", self.replication.epoch,
                 self.controller.last_applied_offset)
        if self._active is not None and not self._active.done():
            self._active.set_result(None)

    def _lost_leadership(self, epoch: int) -> None:
        self.lifecycle.lost_leadership(self.replication.commits.committed_offset)
        if not self.lone_voter:
            self.controller.forget_active_controller()

    def _control_appended(self, base_offset: int, messages: tuple[Message, ...]) -> None:
        self.lifecycle.control_appended(base_offset, messages)

    def _leader_changed(self, epoch: int, leader_id: int) -> None:
        self.controller.set_active_controller(leader_id)
        self.registrar.leader_changed(leader_id, self.replication.address_of(leader_id) if leader_id >= 0 else None,
                                      lambda: self.controller)

    def _snapshot_installed(self, end_offset: int, epoch: int) -> None:
        """The leader's snapshot replaced this voter's log: its state is loaded into a new
        controller a slice at a time (``_load_installed``), the old one standing until it is
        whole. What commits meanwhile is replayed once it is."""
        loaded = self._latest_snapshot()
        controller = self._new_controller()
        if loaded is None:
            self._installed(controller)
            return
        snapshot, records = loaded
        self.snapshots.latest = snapshot
        where = str(self.log.directory / snapshot.file_name)
        steps = MetadataLoader(controller).snapshot_in_steps(records, snapshot.end_offset, where)
        self.lifecycle.install(steps)
        self._load_installed(steps, controller, snapshot, records)

    def _load_installed(self, steps: Iterator[None], controller: QuorumController, snapshot: SnapshotId,
                        records: SnapshotRecords) -> None:
        if steps is not self.lifecycle.installing:
            return  # superseded, or the server stopped
        deadline = time.monotonic() + INSTALL_SLICE_S
        try:
            with collector_paused():
                for _ in steps:
                    if time.monotonic() >= deadline:
                        self._install_handle = asyncio.get_running_loop().call_soon(
                            self._load_installed, steps, controller, snapshot, records)
                        return
        except LoadError as exc:
            # The leader's snapshot passed its checks and still cannot be replayed: going on
            # with the state of a log that is gone would serve wrong metadata.
            log.critical("cannot load the snapshot %s fetched from the leader; stopping: %s", snapshot.file_name, exc)
            os._exit(3)
        log.info("loaded snapshot %s (%d records)", snapshot.file_name, len(records))
        self._installed(controller)

    def _installed(self, controller: QuorumController) -> None:
        controller.set_active_controller(self.replication.leader_id)
        self.lifecycle.installed(controller)

    def _latest_snapshot(self) -> tuple[SnapshotId, SnapshotRecords] | None:
        """The latest usable snapshot, the unusable newer ones set aside; a log that ends below
        it continues after it."""
        loaded = load_latest_snapshot(self.log.directory, self.log.start_offset)
        for path in set_aside_newer(self.log.directory, loaded[0] if loaded is not None else None):
            log.warning("set the unusable snapshot aside as %s", path.name)
        if loaded is not None and self.log.end_offset < loaded[0].end_offset:
            # The snapshot holds more than the log (Kafka keeps no segments below it).
            log.info("the log ends at offset %d, below the snapshot: it continues at offset %d",
                     self.log.end_offset, loaded[0].end_offset)
            self.log.restart_at(loaded[0].end_offset)
        return loaded

    def _restore(self, controller: QuorumController, replay_log: bool = True) -> SnapshotId | None:
        """The latest usable snapshot, then (``replay_log``) the log after it: the durable
        state."""
        loader = MetadataLoader(controller)
        loaded = self._latest_snapshot()
        if loaded is not None:
            snapshot, records = loaded
            loader.snapshot(records, snapshot.end_offset, str(self.log.directory / snapshot.file_name))
            log.info("loaded snapshot %s (%d records)", snapshot.file_name, len(records))
        if replay_log:
            start = controller.next_offset
            for data, entry in self.log.raw_batches(controller.next_offset):
                loader.raw_batch(data, entry.position, str(self.log.segments[entry.segment]))
            log.info("replayed the log from offset %d to %d", start, controller.last_applied_offset)
        return loaded[0] if loaded is not None else None

    # --- serving ------------------------------------------------------------------------------
    async def start(self, sock: socket.socket | None = None) -> tuple[str, int]:
        """Join the quorum, then serve (on ``sock`` when the caller bound the port first). A
        single voter has nothing to wait for: it elects itself, commits its LeaderChange and is
        active before it accepts a connection, so no client hears NOT_CONTROLLER from it; one
        that connected meanwhile waits in the listen backlog."""
        listener = self.config.controller_listener
        self._active = asyncio.get_running_loop().create_future()
        self.replication.start()
        if self.lone_voter:
            # Its own fsync commits its LeaderChange: a moment. A slow or failing disk is said
            # in the log, not hidden behind a listener that refuses writes.
            done, _ = await asyncio.wait([self._active], timeout=self.config.quorum_request_timeout_ms / 1000)
            if not done:
                log.warning("not active yet %d ms after start-up (a slow disk?); listening once it is",
                            self.config.quorum_request_timeout_ms)
                await self._active
        self.address = await self.listener.start(listener.host, listener.port, sock)
        if self.metrics is not None and self.config.metrics_port is not None:
            self.metrics_port = self.metrics.start(listener.host, self.config.metrics_port)
        self._schedule_lease_check()
        self._schedule_no_op()
        return self.address

    def _schedule_lease_check(self) -> None:
        interval = max(0.05, self.config.broker_session_timeout_ms / 8000)
        self._timer = asyncio.get_running_loop().call_later(interval, self._check_leases)

    def _check_leases(self) -> None:
        self.sliced_work.tick()
        self._schedule_lease_check()

    def _schedule_no_op(self) -> None:
        # As Kafka's active controller: on a fixed period, whatever else is written meanwhile.
        interval_ms = self.config.metadata_max_idle_interval_ms
        if interval_ms > 0:
            self._no_op_timer = asyncio.get_running_loop().call_later(interval_ms / 1000, self._write_no_op)

    def _write_no_op(self) -> None:
        if self.leadership.active:
            applied = self.controller.write_no_op()
            self.replication.submit(applied.records, applied.base_offset)
        self._schedule_no_op()

    async def stop(self) -> None:
        self.registrar.stop()
        for timer in (self._timer, self._no_op_timer):
            if timer is not None:
                timer.cancel()
        self.sliced_work.stop()
        self.lifecycle.stop()
        if self._install_handle is not None:
            self._install_handle.cancel()
        # What the active controller has written commits first; then it hands leadership
        # over (EndQuorumEpoch) while still answering the other voters.
        await self.replication.drain()
        await self.replication.stop(grace_s=self.config.quorum_election_timeout_ms / 1000)
        await self.listener.stop()
        if self.metrics is not None:
            self.metrics.stop()
        if self.capture is not None:
            self.capture.close()
        self.replication.close()
        self.log.close()
