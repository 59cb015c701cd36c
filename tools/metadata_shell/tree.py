"""The metadata state as a tree of nodes, the way kafka-metadata-shell.sh lays it out.

A directory is a dict of child names to nodes; a file is the text ``cat`` prints. The tree is
built once from the replayed state: the shell shows one consistent moment of the log.
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any, Union

from protocol.constants import (
    AclOperation, AclPermissionType, AclResourceType, ConfigResourceType, LeaderRecoveryState, PatternType,
    name_of)
from protocol.generated.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.generated.metadata.config_record import ConfigRecord
from protocol.primitives import uuid_to_str
from server.controller.cluster import BrokerRegistration, ControllerRegistration, Endpoint
from server.controller.partitions import PartitionState
from server.controller.replication import TopicState
from server.controller.quorum_records import MIGRATION_STATES
from server.controller.quotas import Entity
from server.controller.scram import MECHANISMS
from server.image.image import MetadataImage
from server.metalog.bootstrap import METADATA_VERSION, RELEASE_VERSIONS

Node = Union["Dir", str]
Dir = dict[str, Node]

def build_tree(image: MetadataImage) -> Dir:
    """The tree of Kafka 3.5+'s metadata shell: ``/image``, the metadata image under Kafka's
    node names, and ``/local``, this tool. The names of the ACL, quota, SCRAM, delegation
    token and producer id nodes are Kafka's too."""
    by_name: Dir = {t.name: _topic(t) for t in image.replication.topics.values()}
    return {
        "image": {
            "provenance": _provenance(image),
            "features": _features_node(image),
            "cluster": {
                "brokers": {str(b.broker_id): _broker(b) for b in image.cluster.brokers.values()},
                "controllers": {str(r.controller_id): _controller(r) for r in image.cluster.controllers.values()},
            },
            "topics": {
                "byName": by_name,
                "byId": {uuid_to_str(t.topic_id): by_name[t.name] for t in image.replication.topics.values()},
            },
            "configs": _configs(image),
            "clientQuotas": {_entity_name(entity): {k: repr(v) for k, v in quotas.items()}
                             for entity, quotas in image.quotas.by_entity().items()},
            "producerIds": {"nextProducerId": str(image.producer_ids.next_producer_id)},
            "acls": _acls(image),
            "scram": _scram(image),
            "delegationToken": {r.token_id: _json(r.to_dict()) for _, r in image.delegation_tokens.tokens.items()},
        },
        "local": {"version": _version(), "commitId": "unknown"},
    }


def _version() -> str:
    try:
        return metadata.version("kraftwire")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _provenance(image: MetadataImage) -> str:
    """Where the image was read up to, as Kafka's ``offset N, epoch E`` (the time of that
    batch is not kept here, so it is left out)."""
    return f"offset {image.offset}, epoch {image.contained_epoch}"


def _features_node(image: MetadataImage) -> Dir:
    finalized = image.features.finalized
    level = finalized.get(METADATA_VERSION)
    releases = {lvl: name for name, lvl in RELEASE_VERSIONS.items()}
    state = image.quorum.zk_migration_state
    node: Dir = {
        "metadataVersion": "" if level is None else releases.get(level, str(level)),
        "zkMigrationState": "NONE" if state is None else MIGRATION_STATES.get(state, str(state)),
    }
    node.update({f"finalized_{name}": str(lvl) for name, lvl in finalized.items() if name != METADATA_VERSION})
    return node


def _acls(image: MetadataImage) -> Dir:
    return {uuid_to_str(r.id): _acl(r) for _, r in image.acls.acls.items()}


def _acl(r: AccessControlEntryRecord) -> str:
    """Kafka's StandardAcl: its fields in its order, each code by its enum's name."""
    return _json({
        "resourceType": name_of(AclResourceType, r.resource_type), "resourceName": r.resource_name,
        "patternType": name_of(PatternType, r.pattern_type), "principal": r.principal, "host": r.host,
        "operation": name_of(AclOperation, r.operation),
        "permissionType": name_of(AclPermissionType, r.permission_type),
    })


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


def _broker(b: BrokerRegistration) -> str:
    return _json({
        "id": b.broker_id, "epoch": b.epoch, "incarnationId": uuid_to_str(b.incarnation_id),
        "listeners": _endpoints(b.endpoints), "supportedFeatures": _features(b.features),
        "rack": b.rack, "fenced": b.fenced, "inControlledShutdown": b.in_controlled_shutdown,
        "logDirs": [uuid_to_str(d) for d in b.log_dirs],
    })


def _controller(r: ControllerRegistration) -> str:
    return _json({"id": r.controller_id, "incarnationId": uuid_to_str(r.incarnation_id),
                  "listeners": _endpoints(r.endpoints), "supportedFeatures": _features(r.features)})


def _topic(t: TopicState) -> Dir:
    node: Dir = {"name": t.name, "id": uuid_to_str(t.topic_id)}
    for p in t.partitions:
        node[str(p.partition_id)] = _partition(p)
    return node


def _partition(p: PartitionState) -> str:
    """A partition's registration, its fields in the order Kafka's shell prints them."""
    return _json({
        "replicas": p.replicas, "directories": [uuid_to_str(d) for d in p.directories], "isr": p.isr,
        "removingReplicas": p.removing, "addingReplicas": p.adding, "elr": p.elr,
        "lastKnownElr": p.last_known_elr, "leader": p.leader,
        "leaderRecoveryState": name_of(LeaderRecoveryState, p.recovery),
        "leaderEpoch": p.leader_epoch, "partitionEpoch": p.partition_epoch,
    })


def _configs(image: MetadataImage) -> Dir:
    """Kafka's node names: ``TOPIC:<name>``, ``BROKER:<id>``, and ``BROKER`` alone for the
    cluster-wide defaults."""
    configs: Dir = {}
    for record, _ in image.configs.snapshot_records():
        # Deletions (a None value) are replayed away: a snapshot holds only values that are set.
        assert isinstance(record, ConfigRecord) and record.value is not None
        kind = name_of(ConfigResourceType, record.resource_type)
        resource = _subdir(configs, f"{kind}:{record.resource_name}" if record.resource_name else kind)
        resource[record.name] = record.value
    return configs
