"""Broker lifecycle (KIP-631): registration, heartbeats, leases, fencing, controlled shutdown.

Replayed state: the registrations. Soft state that only the active controller keeps and never
logs: when each broker was last heard from (its lease). A controller that becomes active gives
every registered broker a fresh lease, as Kafka does, so nobody is fenced for the failover.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Protocol

from protocol.constants import DIRECTORY_MIGRATING, DIRECTORY_UNASSIGNED, ControlledShutdownChange, FencingChange
from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.generated.messages.controller_registration_request import ControllerRegistrationRequest
from protocol.generated.messages.controller_registration_response import ControllerRegistrationResponse
from protocol.generated.messages.unregister_broker_response import UnregisterBrokerResponse
from protocol.generated.metadata.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol.generated.metadata.fence_broker_record import FenceBrokerRecord
from protocol.generated.metadata.register_broker_record import (
    BrokerEndpoint, BrokerFeature, RegisterBrokerRecord)
from protocol.generated.metadata.register_controller_record import (
    ControllerEndpoint, ControllerFeature, RegisterControllerRecord)
from protocol.generated.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.generated.metadata.unregister_broker_record import UnregisterBrokerRecord
from server.controller.features import METADATA_VERSION, MV_3_7_IV2, FeatureControl
from server.controller.offsets import OffsetControl, restore_attrs, restore_key
from server.controller.result import ControllerResult, Later, VersionedRecord


@dataclass
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: bytes
    endpoints: list[Endpoint]
    features: dict[str, tuple[int, int]]
    rack: str | None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: list[bytes] = field(default_factory=list)
    # Offset of the record that put the broker into controlled shutdown: it may stop once it
    # has replayed that far and leads nothing.
    controlled_shutdown_offset: int = -1


log = logging.getLogger("kraftwire.cluster")

NO_ACTIVE_BROKER = 2**63 - 1
_MINIMUM_KRAFT_VERSION = 1  # metadata.version 3.0-IV1
_RESERVED_DIR_IDS = 100  # directory ids 0..99 are reserved (unassigned, lost, migrating, ...)


def _reserved_dir(directory: bytes) -> bool:
    return directory[:8] == bytes(8) and int.from_bytes(directory[8:], "big") < _RESERVED_DIR_IDS


# What replay changes in a registration that stays in place.
_LIFECYCLE = ("fenced", "in_controlled_shutdown", "controlled_shutdown_offset", "log_dirs")


@dataclass
class ControllerRegistration:
    controller_id: int
    incarnation_id: bytes
    endpoints: list[Endpoint]
    features: dict[str, tuple[int, int]]


class Leadership(Protocol):
    """What the broker lifecycle needs from replication control."""

    def leads_any(self, broker_id: int) -> bool: ...

    def many_moves(self, broker_id: int) -> bool: ...

    def move_leadership_away(self, broker_id: int) -> list[VersionedRecord]: ...

    def leadership_moves(self, broker_id: int) -> Iterator[VersionedRecord]: ...

    def many_elections(self) -> bool: ...

    def elections_after_unfence(self, broker_id: int) -> Iterator[VersionedRecord | None]: ...

    def forget_unclean_broker(self, broker_id: int) -> list[VersionedRecord]: ...

    def elect_after_unfence(self, broker_id: int) -> list[VersionedRecord]: ...


class ClusterControl:
    def __init__(self, cluster_id: str, session_timeout_ms: int, features: FeatureControl,
                 offsets: OffsetControl | None = None, voter_ids: frozenset[int] = frozenset()) -> None:
        self.cluster_id = cluster_id
        self.voter_ids = voter_ids
        self.offsets = offsets or OffsetControl()
        self.session_timeout_ms = session_timeout_ms
        self.features = features
        self.brokers: dict[int, BrokerRegistration] = {}
        self.controllers: dict[int, ControllerRegistration] = {}
        self._last_contact: dict[int, int] = {}  # soft state: broker id -> ms
        # Soft state: the metadata offset each broker last reported; -1 until it heartbeats
        # to this controller. A broker in controlled shutdown may stop only once every active
        # broker has caught up with the records that moved its leaderships (Kafka's lowest
        # active offset).
        self._metadata_offset: dict[int, int] = {}
        # Soft state: brokers whose leaderships are being moved away in slices (fencing,
        # controlled shutdown, unregistration); nothing new is placed on them or elected to
        # them meanwhile. Replaced, never changed in place: who it is says whether it changed.
        self.leaving: frozenset[int] = frozenset()

    # --- leases (soft state) -------------------------------------------------------------
    def has_live_session(self, broker_id: int, now_ms: int) -> bool:
        """A fenced broker holds no session, as in Kafka: a new incarnation may take its id
        at once, even before the old lease would have run out."""
        broker = self.brokers.get(broker_id)
        if broker is None or broker.fenced:
            return False
        last = self._last_contact.get(broker_id)
        return last is not None and now_ms - last < self.session_timeout_ms

    def touch(self, broker_id: int, now_ms: int) -> None:
        self._last_contact[broker_id] = now_ms

    def activate(self, now_ms: int) -> None:
        """Becoming active: every unfenced broker starts with a full lease. A fenced broker
        holds no session (its lease ran out, or it shut down cleanly), so a new incarnation
        may take its id at once, as before the failover."""
        self._last_contact = {b.broker_id: now_ms for b in self.brokers.values() if not b.fenced}
        self._metadata_offset = {}
        self.leaving = frozenset()

    def lowest_active_offset(self) -> int:
        """The lowest metadata offset reported by an active broker (unfenced, not shutting
        down); a broker that has not heartbeated since this controller became active counts
        as -1. Without active brokers nothing needs to catch up."""
        active = [self._metadata_offset.get(b.broker_id, -1) for b in self.brokers.values()
                  if not b.fenced and not b.in_controlled_shutdown]
        return min(active, default=NO_ACTIVE_BROKER)

    def default_dir(self, broker_id: int) -> bytes:
        """The directory a new replica on ``broker_id`` is placed in, as Kafka chooses it:
        the broker's only directory, MIGRATING while it has reported none, and UNASSIGNED
        (the broker picks and tells AssignReplicasToDirs) when it has several or is unknown."""
        broker = self.brokers.get(broker_id)
        if broker is None:
            return DIRECTORY_UNASSIGNED
        if not broker.log_dirs:
            return DIRECTORY_MIGRATING
        return broker.log_dirs[0] if len(broker.log_dirs) == 1 else DIRECTORY_UNASSIGNED

    def is_usable(self, broker_id: int) -> bool:
        """May lead or join an ISR: registered, unfenced, not shutting down, and not having its
        leaderships moved away."""
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown \
            and broker_id not in self.leaving

    # --- BrokerRegistration ----------------------------------------------------------------
    def refuse_registration(self, req: BrokerRegistrationRequest, now_ms: int) -> ControllerResult | None:
        """The answer when no new registration is written: an error, or a retry's epoch.
        The checks come in Kafka's order: cluster id, a live session held by another
        incarnation, a ZooKeeper broker, log directories, then features; a voter's node id is refused after the
        cluster id."""
        def fail(code: int) -> ControllerResult:
            return ControllerResult([], BrokerRegistrationResponse(error_code=code))

        if req.cluster_id != self.cluster_id:
            return fail(Error.INCONSISTENT_CLUSTER_ID)
        if req.broker_id in self.voter_ids:
            # Kafka runs a broker under a voter's id only in combined mode, which a kraftwire
            # controller never is; a broker-only Kafka node refuses such a node.id itself.
            log.info("refusing the registration of broker %d: node id %d is a controller voter in "
                     "controller.quorum.voters; give the broker an id no controller uses",
                     req.broker_id, req.broker_id)
            return fail(Error.INVALID_REGISTRATION)
        existing = self.brokers.get(req.broker_id)
        if existing is not None and existing.incarnation_id != req.incarnation_id \
                and self.has_live_session(req.broker_id, now_ms):
            return fail(Error.DUPLICATE_BROKER_REGISTRATION)
        if req.is_migrating_zk_broker:
            log.info("refusing the registration of broker %d: a KRaft controller does not "
                     "register ZooKeeper brokers", req.broker_id)
            return fail(Error.BROKER_ID_NOT_REGISTERED)
        problem = self.log_dirs_problem(req)
        if problem is not None:
            log.info("refusing the registration of broker %d: %s", req.broker_id, problem)
            return fail(Error.INVALID_REGISTRATION)
        problem = self.unsupported_feature(req)
        if problem is not None:
            # The response has no message field: the operator learns why from this log.
            log.info("refusing the registration of broker %d: %s", req.broker_id, problem)
            return fail(Error.UNSUPPORTED_VERSION)
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            # A retry of a registration that already succeeded: same answer, no new record.
            self.touch(req.broker_id, now_ms)
            return ControllerResult([], BrokerRegistrationResponse(broker_epoch=existing.epoch))
        return None

    def log_dirs_problem(self, req: BrokerRegistrationRequest) -> str | None:
        """KIP-858: why the directories a broker registers with are not acceptable, or None."""
        if self.features.metadata_version < MV_3_7_IV2:
            return None
        if not req.log_dirs:
            return "no directories in the request"
        if any(_reserved_dir(d) for d in req.log_dirs):
            return "reserved directory id in the request"
        if len(set(req.log_dirs)) != len(req.log_dirs):
            return "duplicate directory id in the request"
        for other in self.brokers.values():
            if other.broker_id != req.broker_id and not set(other.log_dirs).isdisjoint(req.log_dirs):
                return f"broker {other.broker_id} is already registered with one of these directories"
        return None

    def unsupported_feature(self, req: BrokerRegistrationRequest) -> str | None:
        """Which finalized feature level the broker cannot run, or None. A feature the
        controller has not finalized counts as level 0, so a broker that cannot run without
        it is refused too; a broker that sends no metadata.version range is taken to support
        only the first KRaft version, as Kafka assumes."""
        supported = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
        supported.setdefault(METADATA_VERSION, (_MINIMUM_KRAFT_VERSION, _MINIMUM_KRAFT_VERSION))
        finalized = dict(self.features.finalized)
        finalized[METADATA_VERSION] = self.features.metadata_version
        for name in supported.keys() | finalized.keys():
            lo, hi = supported.get(name, (0, 0))
            level = finalized.get(name, 0)
            if not lo <= level <= hi:
                return (f"the broker does not support finalized version {level} of {name}: "
                        f"it supports {lo} to {hi}")
        return None

    def register_broker(self, req: BrokerRegistrationRequest, next_offset: int, now_ms: int) -> ControllerResult:
        """The new registration itself; its epoch is the offset its record will have."""
        version = self.features.register_broker_record_version()
        record = RegisterBrokerRecord(
            broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=next_offset,
            end_points=[BrokerEndpoint(name=l.name, host=l.host, port=l.port,
                                       security_protocol=l.security_protocol) for l in req.listeners],
            features=[BrokerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                    max_supported_version=f.max_supported_version) for f in req.features],
            rack=req.rack, fenced=True, in_controlled_shutdown=False,
            log_dirs=list(req.log_dirs) if version >= 3 else [])
        self.touch(req.broker_id, now_ms)
        return ControllerResult([(record, version)], BrokerRegistrationResponse(broker_epoch=next_offset))

    # --- BrokerHeartbeat -------------------------------------------------------------------
    def heartbeat(self, req: BrokerHeartbeatRequest, now_ms: int,
                  leadership: Leadership) -> ControllerResult:
        """Kafka's broker states: FENCED, UNFENCED, CONTROLLED_SHUTDOWN, and SHUTDOWN_NOW,
        each next state decided by the current one and the request."""
        broker = self.brokers.get(req.broker_id)
        if broker is None or req.broker_epoch != broker.epoch:
            # Kafka answers a heartbeat from an id it has no registration for (never
            # registered, or unregistered since) as one from an old incarnation.
            return ControllerResult([], BrokerHeartbeatResponse(error_code=Error.STALE_BROKER_EPOCH))
        broker_id = broker.broker_id
        self.touch(broker_id, now_ms)
        self._metadata_offset[broker_id] = req.current_metadata_offset
        caught_up = req.current_metadata_offset >= broker.epoch
        records: list[VersionedRecord] = []
        later: Later | None = None
        fenced = broker.fenced
        shut_down = False
        if broker.fenced:
            if req.want_shut_down:
                shut_down = True  # it leads nothing and holds no ISR slot: it may go at once
            elif not req.want_fence and caught_up:
                records.append((UnfenceBrokerRecord(id=broker_id, epoch=broker.epoch), 0))
                later = self._elections(broker, leadership, records)
                fenced = False
        elif broker.in_controlled_shutdown:
            # Kafka decides here without looking at the request's wishes: the broker goes as
            # soon as it leads nothing and every active broker has seen its leaderships move.
            # Moves cut short (this controller became active meanwhile) are taken up again.
            if leadership.leads_any(broker_id):
                if broker_id not in self.leaving:
                    later = self._moves(broker_id, leadership, records)
            elif broker.controlled_shutdown_offset <= self.lowest_active_offset():
                shut_down = fenced = True
        elif req.want_fence:
            fenced = True
            shut_down = req.want_shut_down
        elif req.want_shut_down:
            if leadership.leads_any(broker_id):
                # The broker leaves first when its moves are many: it is then no candidate
                # for any election while they are written in slices.
                if leadership.many_moves(broker_id):
                    records.append(self._enter_controlled_shutdown(broker))
                    later = self._moves(broker_id, leadership, records)
                else:
                    later = self._moves(broker_id, leadership, records)
                    records.append(self._enter_controlled_shutdown(broker))
            else:
                shut_down = fenced = True
        if fenced and not broker.fenced:
            if leadership.many_moves(broker_id):
                records.append((FenceBrokerRecord(id=broker_id, epoch=broker.epoch), 0))
                later = self._moves(broker_id, leadership, records)
            else:
                later = self._moves(broker_id, leadership, records)
                records.append((FenceBrokerRecord(id=broker_id, epoch=broker.epoch), 0))
        if shut_down:
            self._last_contact.pop(broker_id, None)  # a clean exit frees the id
        return ControllerResult(records, BrokerHeartbeatResponse(
            is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut_down), later)

    def _elections(self, broker: BrokerRegistration, leadership: Leadership,
                   records: list[VersionedRecord]) -> Later | None:
        """Elect the broker where partitions had no leader without it: added to ``records``
        when they are few, else written later in slices while it stays in service."""
        if not leadership.many_elections():
            records += leadership.elect_after_unfence(broker.broker_id)
            return None
        return Later(self._while_in_service(
            broker.broker_id, broker.epoch, leadership.elections_after_unfence(broker.broker_id)))

    def _moves(self, broker_id: int, leadership: Leadership, records: list[VersionedRecord]) -> Later | None:
        """Move the broker's leaderships away: added to ``records`` when they are few, else
        written later in slices, for as long as the broker stays out of service."""
        if not leadership.many_moves(broker_id):
            records += leadership.move_leadership_away(broker_id)
            return None
        return self.moves_later(broker_id, leadership)

    def moves_later(self, broker_id: int, leadership: Leadership) -> Later:
        """The broker's leaderships moved away in slices, for as long as it stays out of
        service (fenced, shutting down or unregistered)."""
        return Later(self._while_out_of_service(broker_id, leadership.leadership_moves(broker_id)), broker_id)

    def _while_out_of_service(self, broker_id: int, records: Iterator[VersionedRecord]) -> Iterator[VersionedRecord | None]:
        for record in records:
            b = self.brokers.get(broker_id)
            if b is not None and not b.fenced and not b.in_controlled_shutdown:
                return  # back in service: it may keep what it still leads
            yield record

    def _while_in_service(self, broker_id: int, epoch: int,
                          records: Iterator[VersionedRecord | None]) -> Iterator[VersionedRecord | None]:
        for record in records:
            b = self.brokers.get(broker_id)
            if b is None or b.epoch != epoch or b.fenced:
                return  # gone again: it must not be elected
            yield record

    def _enter_controlled_shutdown(self, broker: BrokerRegistration) -> VersionedRecord:
        # Version 1, as Kafka writes it at every metadata.version: the change has no log dirs.
        return BrokerRegistrationChangeRecord(broker_id=broker.broker_id, broker_epoch=broker.epoch,
                                              in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN), 1

    def expired_brokers(self, now_ms: int) -> list[int]:
        """Unfenced brokers whose lease has run out."""
        return [b.broker_id for b in self.brokers.values()
                if not b.fenced and not self.has_live_session(b.broker_id, now_ms)]

    def fence_record(self, broker_id: int) -> VersionedRecord:
        broker = self.brokers[broker_id]
        return FenceBrokerRecord(id=broker_id, epoch=broker.epoch), 0

    # --- UnregisterBroker ------------------------------------------------------------------
    def unregister_broker(self, broker_id: int) -> ControllerResult:
        broker = self.brokers.get(broker_id)
        if broker is None:
            return ControllerResult([], UnregisterBrokerResponse(
                error_code=Error.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker {broker_id} is not registered."))
        self._last_contact.pop(broker_id, None)
        self._metadata_offset.pop(broker_id, None)
        return ControllerResult([(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch), 0)],
                                UnregisterBrokerResponse())

    # --- ControllerRegistration ------------------------------------------------------------
    def register_controller(self, req: ControllerRegistrationRequest) -> ControllerResult:
        record = RegisterControllerRecord(
            controller_id=req.controller_id, incarnation_id=req.incarnation_id,
            zk_migration_ready=req.zk_migration_ready,
            end_points=[ControllerEndpoint(name=l.name, host=l.host, port=l.port,
                                           security_protocol=l.security_protocol) for l in req.listeners],
            features=[ControllerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                        max_supported_version=f.max_supported_version)
                      for f in req.features])
        existing = self.controllers.get(req.controller_id)
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            return ControllerResult([], ControllerRegistrationResponse())
        return ControllerResult([(record, 0)], ControllerRegistrationResponse())

    # --- replay ----------------------------------------------------------------------------
    def replay_register_broker(self, rec: RegisterBrokerRecord, offset: int) -> None:
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self.brokers, rec.broker_id))
        self.brokers[rec.broker_id] = BrokerRegistration(
            broker_id=rec.broker_id, epoch=rec.broker_epoch, incarnation_id=rec.incarnation_id,
            endpoints=_endpoints(rec.end_points),
            features={f.name: (f.min_supported_version, f.max_supported_version) for f in rec.features},
            rack=rec.rack, fenced=rec.fenced, in_controlled_shutdown=rec.in_controlled_shutdown,
            log_dirs=list(rec.log_dirs),
            # Only a snapshot registers a broker already in controlled shutdown; the record that
            # started it is at or before the snapshot's offset, so the broker may go once it has
            # caught up that far (and no sooner).
            controlled_shutdown_offset=offset if rec.in_controlled_shutdown else -1)

    def replay_unregister_broker(self, rec: UnregisterBrokerRecord) -> None:
        broker = self.brokers.get(rec.broker_id)
        if broker is not None and broker.epoch == rec.broker_epoch:
            if self.offsets.recording:
                self.offsets.on_undo(restore_key(self.brokers, rec.broker_id))
            del self.brokers[rec.broker_id]

    def replay_fence(self, broker_id: int, epoch: int, fenced: bool) -> None:
        broker = self.brokers.get(broker_id)
        if broker is not None and broker.epoch == epoch:
            if self.offsets.recording:
                self.offsets.on_undo(restore_attrs(broker, _LIFECYCLE))
            broker.fenced = fenced
            if not fenced:
                broker.in_controlled_shutdown = False

    def replay_registration_change(self, rec: BrokerRegistrationChangeRecord, offset: int) -> None:
        broker = self.brokers.get(rec.broker_id)
        if broker is None or broker.epoch != rec.broker_epoch:
            return
        if self.offsets.recording:
            self.offsets.on_undo(restore_attrs(broker, _LIFECYCLE))
        if rec.fenced is not None and rec.fenced != FencingChange.NONE:
            broker.fenced = rec.fenced > FencingChange.NONE
        if rec.in_controlled_shutdown is not None and rec.in_controlled_shutdown != ControlledShutdownChange.NONE:
            broker.in_controlled_shutdown = rec.in_controlled_shutdown > ControlledShutdownChange.NONE
            if broker.in_controlled_shutdown:
                broker.controlled_shutdown_offset = offset
        if rec.log_dirs:
            broker.log_dirs = list(rec.log_dirs)

    def replay_register_controller(self, rec: RegisterControllerRecord) -> None:
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self.controllers, rec.controller_id))
        self.controllers[rec.controller_id] = ControllerRegistration(
            controller_id=rec.controller_id, incarnation_id=rec.incarnation_id,
            endpoints=_endpoints(rec.end_points),
            features={f.name: (f.min_supported_version, f.max_supported_version) for f in rec.features})

    # --- snapshot --------------------------------------------------------------------------
    def snapshot_records(self) -> Iterable[VersionedRecord]:
        """The fewest records that rebuild the registrations."""
        version = self.features.register_broker_record_version()
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            yield RegisterBrokerRecord(
                broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
                end_points=[BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                           security_protocol=e.security_protocol) for e in b.endpoints],
                features=[BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                          for n, (lo, hi) in b.features.items()],
                rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
                log_dirs=b.log_dirs if version >= 3 else []), version
        for c in sorted(self.controllers.values(), key=lambda c: c.controller_id):
            yield RegisterControllerRecord(
                controller_id=c.controller_id, incarnation_id=c.incarnation_id,
                end_points=[ControllerEndpoint(name=e.name, host=e.host, port=e.port,
                                               security_protocol=e.security_protocol) for e in c.endpoints],
                features=[ControllerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                          for n, (lo, hi) in c.features.items()]), 0


def _endpoints(items: list) -> list[Endpoint]:
    return [Endpoint(e.name, e.host, e.port, e.security_protocol) for e in items]
