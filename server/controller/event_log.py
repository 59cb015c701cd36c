"""The controller's lines about what it decides, at the level and in the words of Kafka's controller:
registrations, fencing and unfencing with their reason, controlled shutdowns, topic creations
and deletions, every CreateTopics and AlterPartitionReassignments result (refusals included),
each configuration set or removed (secrets hidden), each AlterPartition refused and each
reassignment an ISR change completes, each ACL, SCRAM credential, client quota,
delegation token and feature level written (never a salt, key or HMAC), and leader elections
(a large batch summarised).

Lines are written when the records are generated, as Kafka logs them, by the active controller
only; a standby or a restart replaying the log says nothing.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from protocol.constants import (
    NO_LEADER, NO_LEADER_CHANGE, AclOperation, AclPermissionType, AclResourceType, ConfigResourceType,
    PatternType, name_of)
from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest
from protocol.generated.messages.alter_partition_reassignments_response import AlterPartitionReassignmentsResponse
from protocol.generated.messages.create_topics_response import CreateTopicsResponse
from protocol.generated.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.generated.metadata.client_quota_record import ClientQuotaRecord
from protocol.generated.metadata.config_record import ConfigRecord
from protocol.generated.metadata.delegation_token_record import DelegationTokenRecord
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.generated.metadata.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from protocol.generated.metadata.remove_delegation_token_record import RemoveDelegationTokenRecord
from protocol.generated.metadata.remove_topic_record import RemoveTopicRecord
from protocol.generated.metadata.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.generated.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.generated.metadata.user_scram_credential_record import UserScramCredentialRecord
from protocol.message import Message
from protocol.primitives import uuid_to_str
from server.controller.config_defs import DEFINITIONS, sensitive
from server.metalog.bootstrap import METADATA_VERSION, RELEASE_VERSIONS
from server.security.scram import MECHANISM_NAMES

log = logging.getLogger("kraftwire.controller")

# Partitions named one by one in an election line; the rest are counted.
LISTED_PARTITIONS = 10
# What Kafka's Password prints for a value it hides.
HIDDEN = "[hidden]"
# metadata.version levels by the release name Kafka's MetadataVersion prints.
_RELEASES = {level: name for name, level in RELEASE_VERSIONS.items()}


def registered(req: BrokerRegistrationRequest, previous_incarnation: bytes | None, previous_epoch: int,
               cleanup_records: int, epoch: int) -> None:
    """ClusterControlManager.registerBroker's three cases."""
    incarnation = uuid_to_str(req.incarnation_id)
    if previous_incarnation is None:
        log.info("No previous registration found for broker %d. New incarnation ID is %s.  Generated %d "
                 "record(s) to clean up previous incarnations. New broker epoch is %d.",
                 req.broker_id, incarnation, cleanup_records, epoch)
    elif previous_incarnation != req.incarnation_id:
        log.info("Registering a new incarnation of broker %d. Previous incarnation ID was %s; new incarnation "
                 "ID is %s. Generated %d record(s) to clean up previous incarnations. Broker epoch will "
                 "become %d.", req.broker_id, uuid_to_str(previous_incarnation), incarnation, cleanup_records, epoch)
    else:
        log.info("Amending registration of broker %d, incarnation ID %s. Broker epoch remains %d.",
                 req.broker_id, incarnation, previous_epoch)


def session_expired(broker_id: int) -> None:
    log.info("Fencing broker %d because its session has timed out.", broker_id)


def heartbeat(broker_id: int, was_fenced: bool, was_shutting_down: bool, epoch: int,
              records: Iterable[Message], response: BrokerHeartbeatResponse) -> None:
    """BrokerHeartbeatManager's state transitions, each with why it was granted."""
    written = list(records)
    if any(isinstance(r, UnfenceBrokerRecord) for r in written):
        log.info("The request from broker %d to unfence has been granted because it has caught up with "
                 "the offset of its register broker record %d.", broker_id, epoch)
    elif any(isinstance(r, BrokerRegistrationChangeRecord) and r.in_controlled_shutdown for r in written):
        log.info("Unfenced broker %d has requested and been granted a controlled shutdown.", broker_id)
    elif response.should_shut_down:
        if was_shutting_down:
            log.info("The request from broker %d to shut down has been granted: it leads no partition and "
                     "every active broker has replicated its controlled shutdown.", broker_id)
        elif was_fenced:
            log.info("Fenced broker %d has requested and been granted an immediate shutdown.", broker_id)
        else:
            log.info("Unfenced broker %d has requested and been granted an immediate shutdown.", broker_id)
    elif response.is_fenced and not was_fenced:
        log.info("Unfenced broker %d has requested and been granted fencing", broker_id)


def changes(records: Iterable[Message], topic_name: Callable[[bytes], str | None],
            current: Callable[[Message], Message | None]) -> None:
    """Topic creations and deletions, and every leader the records change, in one line each.
    ``current`` gives the record in force that a record replaces or removes (None if none):
    the lines are written before the records are replayed."""
    created: dict[bytes, tuple[str, int]] = {}
    elected: list[str] = []  # the first LISTED_PARTITIONS of them
    changed = 0
    for record in records:
        # Partition changes first: fencing a fleet writes a million of them.
        if isinstance(record, PartitionChangeRecord):
            if record.leader != NO_LEADER_CHANGE:
                changed += 1
                if len(elected) < LISTED_PARTITIONS:
                    leader = "none" if record.leader == NO_LEADER else str(record.leader)
                    elected.append(f"{topic_name(record.topic_id)}-{record.partition_id} -> {leader}")
        elif isinstance(record, TopicRecord):
            created[record.topic_id] = (record.name, 0)
        elif isinstance(record, PartitionRecord) and record.topic_id in created:
            name, count = created[record.topic_id]
            created[record.topic_id] = (name, count + 1)
        elif isinstance(record, RemoveTopicRecord):
            log.info("Deleting topic %s with ID %s.", topic_name(record.topic_id), uuid_to_str(record.topic_id))
        elif isinstance(record, ConfigRecord):
            _config(record)
        elif isinstance(record, (AccessControlEntryRecord, RemoveAccessControlEntryRecord)):
            _acl(record, current(record))
        elif isinstance(record, (UserScramCredentialRecord, RemoveUserScramCredentialRecord)):
            _scram(record, current(record))
        elif isinstance(record, ClientQuotaRecord):
            _quota(record)
        elif isinstance(record, (DelegationTokenRecord, RemoveDelegationTokenRecord)):
            _token(record, current(record))
        elif isinstance(record, FeatureLevelRecord):
            _feature(record)
    for topic_id, (name, count) in created.items():
        log.info("Created topic %s with topic ID %s and %d partition(s).", name, uuid_to_str(topic_id), count)
    if elected:
        more = changed - LISTED_PARTITIONS
        log.info("Changed the leader of %d partition(s): %s%s", changed, ", ".join(elected),
                 f" (and {more} more)" if more > 0 else "")


def _config(record: ConfigRecord) -> None:
    """ConfigurationControlManager's line for each configuration an AlterConfigs,
    IncrementalAlterConfigs or CreateTopics writes, naming the resource as ConfigResource does."""
    resource = f"ConfigResource(type={name_of(ConfigResourceType, record.resource_type)}, " \
               f"name='{record.resource_name}')"
    if record.value is None:
        log.info("Removed configuration %s of %s.", record.name, resource)
    else:
        value = HIDDEN if sensitive(DEFINITIONS.get(record.name)) else record.value
        log.info("Set configuration %s of %s to %s.", record.name, resource, value)


def _acl(record: AccessControlEntryRecord | RemoveAccessControlEntryRecord, old: Message | None) -> None:
    """AclControlManager's line for each ACL created or deleted, the ACL as StandardAcl prints it."""
    acl = record if isinstance(record, AccessControlEntryRecord) else old
    if not isinstance(acl, AccessControlEntryRecord):
        return  # the replay refuses an unknown ACL; there is nothing to name
    text = (f"StandardAcl(resourceType={name_of(AclResourceType, acl.resource_type)}, "
            f"resourceName={acl.resource_name}, patternType={name_of(PatternType, acl.pattern_type)}, "
            f"principal={acl.principal}, host={acl.host}, operation={name_of(AclOperation, acl.operation)}, "
            f"permissionType={name_of(AclPermissionType, acl.permission_type)})")
    verb = "Created" if record is acl else "Deleted"
    log.info("%s ACL %s: %s.", verb, uuid_to_str(record.id), text)


def _scram(record: UserScramCredentialRecord | RemoveUserScramCredentialRecord, old: Message | None) -> None:
    """ScramControlManager's lines: the user and the mechanism only, never the salt or the keys."""
    mechanism = MECHANISM_NAMES.get(record.mechanism, str(record.mechanism))
    if isinstance(record, RemoveUserScramCredentialRecord):
        what = "Removed the"
    else:
        what = "Created a" if old is None else "Modified the"
    log.info("%s SCRAM credential for %s with mechanism %s.", what, record.name, mechanism)


def _quota(record: ClientQuotaRecord) -> None:
    """ClientQuotaControlManager's line, the entity as ClientQuotaEntity prints it."""
    entries = ", ".join(f"{e.entity_type}={'null' if e.entity_name is None else e.entity_name}"
                        for e in record.entity)
    entity = f"ClientQuotaEntity(entries={{{entries}}})"
    if record.remove:
        log.info("Removed client quota %s of %s.", record.key, entity)
    else:
        log.info("Set client quota %s of %s to %s.", record.key, entity, record.value)


def _token(record: DelegationTokenRecord | RemoveDelegationTokenRecord, old: Message | None) -> None:
    """DelegationTokenControlManager's lines: the token's id and owner (never its HMAC)."""
    if isinstance(record, RemoveDelegationTokenRecord):
        owner = old.owner if isinstance(old, DelegationTokenRecord) else "unknown"
        log.info("Delegation token expired for token: %s for owner: %s", record.token_id, owner)
    elif old is None:
        log.info("Created delegation token %s for owner %s, expiring at %d.", record.token_id, record.owner,
                 record.expiration_timestamp)
    else:
        log.info("Set the expiry of delegation token %s for owner %s to %d.", record.token_id, record.owner,
                 record.expiration_timestamp)


def _feature(record: FeatureLevelRecord) -> None:
    """FeatureControlManager's lines, metadata.version by its release name."""
    if record.name == METADATA_VERSION:
        log.info("Set metadata.version to %s.", _RELEASES.get(record.feature_level, str(record.feature_level)))
    elif record.feature_level == 0:
        log.info("Removed feature %s.", record.name)
    else:
        log.info("Set feature %s to %d.", record.name, record.feature_level)


def _error(code: int, message: str | None) -> str:
    """A refusal as the logs give it: the error's name and why."""
    return f"{Error(code).name} ({message})"


def create_topics(response: CreateTopicsResponse, validate_only: bool) -> None:
    """ReplicationControlManager.createTopics: each topic's outcome, a refusal with its reason,
    so that a refused request leaves a line too."""
    outcomes = [f"{topic.name}: " + ("SUCCESS" if topic.error_code == Error.NONE
                                     else _error(topic.error_code, topic.error_message))
                for topic in response.topics]
    log.info("%sCreateTopics result(s): %s", "Validate-only " if validate_only else "", ", ".join(outcomes))


def alter_partition_unknown(what: str) -> None:
    log.info("Rejecting AlterPartition request for unknown %s.", what)


def alter_partition_refused(broker_id: int, topic: str, partition: int, level: int, reason: str) -> None:
    """ReplicationControlManager's AlterPartition checks: each refusal with its reason."""
    log.log(level, "Rejecting AlterPartition request from node %d for %s-%d because %s.", broker_id, topic,
            partition, reason)


def reassignment_completed(broker_id: int, topic: str, partition: int, returning: int | None) -> None:
    """An ISR change that ends a reassignment; ``returning`` is the error the sender gets when
    it is no longer the leader."""
    if returning is None:
        log.info("AlterPartition request from node %d for %s-%d completed the ongoing partition reassignment.",
                 broker_id, topic, partition)
    else:
        log.info("AlterPartition request from node %d for %s-%d completed the ongoing partition reassignment "
                 "and triggered a leadership change. Returning %s.", broker_id, topic, partition,
                 Error(returning).name)


def alter_reassignments(response: AlterPartitionReassignmentsResponse) -> None:
    """ReplicationControlManager.alterPartitionReassignments: a line for each partition refused,
    then how many of the request's reassignments were made (or cancelled)."""
    done = total = 0
    for topic in response.responses:
        for p in topic.partitions:
            total += 1
            if p.error_code == Error.NONE:
                done += 1
            else:
                log.info("Unable to alter partition reassignment for %s:%d because of %s", topic.name,
                         p.partition_index, _error(p.error_code, p.error_message))
    log.info("Successfully altered %d out of %d partition reassignment(s).", done, total)
