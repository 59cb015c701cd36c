"""The metadata state as a tree of nodes, the way kafka-metadata-shell.sh lays it out.

A directory is a dict of child names to nodes; a file is the text ``cat`` prints. The tree is
built once from the replayed state: the shell shows one consistent moment of the log.
"""

from __future__ import annotations

import json
from typing import Any, Union

from protocol.constants import DIRECTORY_MIGRATING, ConfigResourceType, LeaderRecoveryState
from protocol.generated.metadata.config_record import ConfigRecord
from protocol.primitives import uuid_to_str
from server.controller.cluster import BrokerRegistration, ControllerRegistration, Endpoint
from server.controller.partitions import PartitionState
from server.controller.quorum_records import MIGRATION_STATES
from server.controller.quotas import Entity
from server.controller.scram import MECHANISMS
from server.image.image import MetadataImage

Node = Union["Dir", str]
Dir = dict[str, Node]

# Keyed by int: a record's field may hold a number these do not name.
_RESOURCE_TYPES: dict[int, str] = {
    ConfigResourceType.TOPIC: "topic", ConfigResourceType.BROKER: "broker",
    ConfigResourceType.BROKER_LOGGER: "broker_logger", ConfigResourceType.CLIENT_METRICS: "client_metrics",
    ConfigResourceType.GROUP: "group",
}
CLUSTER_DEFAULT = "<default>"  # the broker resource named "", which holds cluster-wide defaults
_RECOVERY_STATES: dict[int, str] = {
    LeaderRecoveryState.RECOVERED: "RECOVERED", LeaderRecoveryState.RECOVERING: "RECOVERING"}


def build_tree(image: MetadataImage) -> Dir:
    """The tree; the names of the ACL, quota, SCRAM, delegation token and producer id nodes
    are those of Kafka's metadata shell."""
    return {
        "brokers": {str(b.broker_id): _broker(b) for b in image.cluster.brokers.values()},
        "controllers": {str(r.controller_id): _controller(r) for r in image.cluster.controllers.values()},
        "topics": _topics(image),
        "topicIds": {uuid_to_str(t.topic_id): t.name for t in image.replication.topics.values()},
        "features": {name: str(level) for name, level in image.features.finalized.items()},
        "configs": _configs(image),
        "acls": _acls(image),
        "clientQuotas": {_entity_name(entity): {k: repr(v) for k, v in quotas.items()}
                         for entity, quotas in image.quotas.by_entity().items()},
        "scram": _scram(image),
        "delegationToken": {r.token_id: _json(r.to_dict()) for _, r in image.delegation_tokens.tokens.items()},
        "producerIds": {"nextProducerId": str(image.producer_ids.next_producer_id)},
        "metadataQuorum": _quorum(image),
    }


def _quorum(image: MetadataImage) -> Dir:
    quorum: Dir = {"offset": str(image.offset)}
    if image.leader is not None:
        quorum["leader"] = _json({"leaderId": image.leader.leader_id, "epoch": image.leader.epoch})
    q = image.quorum
    if q.kraft_version is not None:
        quorum["kraftVersion"] = str(q.kraft_version)
    if q.voters is not None:
        quorum["voters"] = _json(q.voters.to_dict()["voters"])
    if q.zk_migration_state is not None:
        quorum["zkMigrationState"] = MIGRATION_STATES.get(q.zk_migration_state, str(q.zk_migration_state))
    return quorum


def _acls(image: MetadataImage) -> Dir:
    return {uuid_to_str(r.id): _json({k: v for k, v in r.to_dict().items() if k != "id"})
            for _, r in image.acls.acls.items()}


def _entity_name(entity: Entity) -> str:
    """Kafka's shell names: clientId(...)_ip(...)_user(...), with \\ ( ) escaped."""
    parts = dict(entity)
    names = []
    for kind, label in (("client-id", "clientId"), ("ip", "ip"), ("user", "user")):
        if kind in parts:
            value = parts[kind]
            text = "<default>" if value is None else value.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            names.append(f"{label}({text})")
    return "_".join(names)


def _scram(image: MetadataImage) -> Dir:
    node: Dir = {name: {} for name in MECHANISMS.values()}
    for _, r in image.scram.credentials.items():
        _subdir(node, MECHANISMS.get(r.mechanism, str(r.mechanism)))[r.name] = _json(
            {"salt": r.salt.hex(), "storedKey": r.stored_key.hex(), "serverKey": r.server_key.hex(),
             "iterations": r.iterations})
    return node


def _subdir(parent: Dir, name: str) -> Dir:
    """The directory ``name`` of ``parent``, made empty if there is none yet."""
    child = parent.setdefault(name, {})
    assert isinstance(child, dict), f"{name} is a file, not a directory"
    return child


def _json(value: Any) -> str:
    return json.dumps(value)


def _endpoints(endpoints: list[Endpoint]) -> list[dict[str, Any]]:
    return [{"name": e.name, "host": e.host, "port": e.port, "securityProtocol": e.security_protocol}
            for e in endpoints]


def _features(features: dict[str, tuple[int, int]]) -> dict[str, dict[str, int]]:
    return {name: {"min": lo, "max": hi} for name, (lo, hi) in sorted(features.items())}


def _broker(b: BrokerRegistration) -> Dir:
    registration = {
        "id": b.broker_id, "epoch": b.epoch, "incarnationId": uuid_to_str(b.incarnation_id),
        "listeners": _endpoints(b.endpoints), "supportedFeatures": _features(b.features),
        "rack": b.rack, "fenced": b.fenced, "inControlledShutdown": b.in_controlled_shutdown,
        "logDirs": [uuid_to_str(d) for d in b.log_dirs],
    }
    return {
        "registration": _json(registration),
        "isFenced": _json(b.fenced),
        "inControlledShutdown": _json(b.in_controlled_shutdown),
        "epoch": str(b.epoch),
        "incarnationId": uuid_to_str(b.incarnation_id),
        "rack": "" if b.rack is None else b.rack,
    }


def _controller(r: ControllerRegistration) -> str:
    return _json({"id": r.controller_id, "incarnationId": uuid_to_str(r.incarnation_id),
                  "listeners": _endpoints(r.endpoints), "supportedFeatures": _features(r.features)})


def _topics(image: MetadataImage) -> Dir:
    topics: Dir = {}
    for t in image.replication.topics.values():
        node: Dir = {"id": uuid_to_str(t.topic_id), "name": t.name}
        for p in t.partitions:
            node[str(p.partition_id)] = _partition(p)
        topics[t.name] = node
    return topics


def _partition(p: PartitionState) -> Dir:
    node: Dir = {
        "leader": str(p.leader),
        "isr": _json(p.isr),
        "replicas": _json(p.replicas),
        "leaderEpoch": str(p.leader_epoch),
        "partitionEpoch": str(p.partition_epoch),
        "elr": _json(p.elr),
        "lastKnownElr": _json(p.last_known_elr),
        "addingReplicas": _json(p.adding),
        "removingReplicas": _json(p.removing),
        "leaderRecoveryState": _RECOVERY_STATES.get(p.recovery, str(p.recovery)),
    }
    if any(d != DIRECTORY_MIGRATING for d in p.directories):  # none reported yet says nothing
        node["directories"] = _json([uuid_to_str(d) for d in p.directories])
    return node


def _configs(image: MetadataImage) -> Dir:
    configs: Dir = {"topic": {}, "broker": {}}
    for record, _ in image.configs.snapshot_records():
        # Deletions (a None value) are replayed away: a snapshot holds only values that are set.
        assert isinstance(record, ConfigRecord) and record.value is not None
        kind = _subdir(configs, _RESOURCE_TYPES.get(record.resource_type, str(record.resource_type)))
        resource = _subdir(kind, record.resource_name or CLUSTER_DEFAULT)
        resource[record.name] = record.value
    return configs
