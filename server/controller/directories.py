"""Log directory assignment (KIP-858): which of a broker's log directories holds each replica.

A broker reports with AssignReplicasToDirs where it placed its replicas; the controller keeps
the answer in the partition's Directories, one entry per replica, through PartitionChangeRecord
(so replay is the partition replay already there). A replica the broker cannot serve leaves
the ISR and leadership: one placed in a directory the broker does not list as online, and every
replica in a directory its heartbeat reports failed (which also leaves its registration).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.constants import DIRECTORY_LOST, DIRECTORY_MIGRATING, DIRECTORY_UNASSIGNED
from protocol.error_codes import Error
from protocol.generated.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from protocol.generated.messages.assign_replicas_to_dirs_response import (
    AssignReplicasToDirsResponse, DirectoryData, PartitionData, TopicData)
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.metadata.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from server.controller.cluster import ClusterControl
from server.controller.features import MV_3_7_IV2, FeatureControl
from server.controller.partitions import PartitionState
from server.controller.replication import ReplicationControl
from server.controller.result import ControllerResult, VersionedRecord

# BrokerRegistrationChangeRecord carries LogDirs from this version on.
_REGISTRATION_CHANGE_WITH_DIRS = 2


def is_online(directory: bytes, online: list[bytes]) -> bool:
    """Whether a broker with these online log directories can serve a replica in ``directory``.

    A registration with no directories comes from before directories were tracked (or lost
    them in a metadata.version upgrade); the broker is trusted until it registers them again.
    """
    if directory in (DIRECTORY_MIGRATING, DIRECTORY_UNASSIGNED):
        return True
    if directory == DIRECTORY_LOST:
        return False
    return not online or directory in online


@dataclass
class Assignment:
    """What AssignReplicasToDirs produced: the directory records and the answer, and the
    partitions placed in directories that are not online, to be taken from the broker next."""

    result: ControllerResult
    offline: list[PartitionState] = field(default_factory=list)


def assign_replicas_to_dirs(req: AssignReplicasToDirsRequest, cluster: ClusterControl,
                            replication: ReplicationControl, features: FeatureControl) -> Assignment:
    if features.metadata_version < MV_3_7_IV2:
        return _refused(Error.UNSUPPORTED_VERSION)
    broker = cluster.brokers.get(req.broker_id)
    # Kafka checks the epoch before looking the broker up, so an unknown broker is a stale one.
    if broker is None or broker.epoch != req.broker_epoch:
        return _refused(Error.STALE_BROKER_EPOCH)
    version = features.partition_record_version()
    response = AssignReplicasToDirsResponse()
    assignment = Assignment(ControllerResult([], response))
    for d in req.directories:
        online = is_online(d.id, broker.log_dirs)
        out_dir = DirectoryData(id=d.id)
        response.directories.append(out_dir)
        for t in d.topics:
            topic = replication.topics.get(t.topic_id)
            out_topic = TopicData(topic_id=t.topic_id)
            out_dir.topics.append(out_topic)
            for part in t.partitions:
                code: int = Error.UNKNOWN_TOPIC_ID
                if topic is not None:
                    code, p = _placement(topic.partitions, part.partition_index, req.broker_id)
                    if p is not None:
                        record = _directory_change(p, req.broker_id, d.id)
                        if record is not None:
                            assignment.result.records.append((record, version))
                        if not online:
                            assignment.offline.append(p)
                out_topic.partitions.append(PartitionData(partition_index=part.partition_index, error_code=code))
    return assignment


def _refused(code: int) -> Assignment:
    return Assignment(ControllerResult([], AssignReplicasToDirsResponse(error_code=code)))


def _placement(partitions: list[PartitionState], index: int, broker_id: int) -> tuple[int, PartitionState | None]:
    if not 0 <= index < len(partitions):
        return Error.UNKNOWN_TOPIC_OR_PARTITION, None
    p = partitions[index]
    if broker_id not in p.replicas:
        return Error.NOT_LEADER_OR_FOLLOWER, None
    return Error.NONE, p


def _directory_change(p: PartitionState, broker_id: int, directory: bytes) -> PartitionChangeRecord | None:
    """The record placing ``broker_id``'s replica of ``p`` in ``directory``; None when it is
    there already, so a broker repeating its report writes nothing."""
    directories = list(p.directories)
    directories[p.replicas.index(broker_id)] = directory
    if directories == p.directories:
        return None
    return PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, directories=directories)


def fail_directories(req: BrokerHeartbeatRequest, cluster: ClusterControl,
                     replication: ReplicationControl, features: FeatureControl) -> list[VersionedRecord]:
    """The records for directories a heartbeat reports offline that the registration still
    lists: the broker's replicas in them leave ISRs and leadership, and the registration keeps
    only the directories left online. Failures are rare, so the partitions are found by a
    scan rather than an index every replay would have to keep."""
    broker = cluster.brokers.get(req.broker_id)
    if features.metadata_version < MV_3_7_IV2 or broker is None or broker.epoch != req.broker_epoch:
        return []
    failed = [d for d in broker.log_dirs if d in req.offline_log_dirs]
    if not failed:
        return []
    placed = [p for topic in replication.topics.values() for p in topic.partitions
              if req.broker_id in p.replicas and p.directories[p.replicas.index(req.broker_id)] in failed]
    records = replication.move_leadership_away(req.broker_id, only=placed)
    online = [d for d in broker.log_dirs if d not in failed]
    records.append((BrokerRegistrationChangeRecord(broker_id=req.broker_id, broker_epoch=broker.epoch,
                                                   log_dirs=online), _REGISTRATION_CHANGE_WITH_DIRS))
    return records
