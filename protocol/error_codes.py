"""Kafka's error codes: number, name, whether a client may retry, and a short explanation.

``Error`` members are ints, so they go straight into generated messages; decoded codes are
plain ints and ``Error(code)`` or ``describe(code)`` turns them back into names.
"""

from __future__ import annotations

from enum import IntEnum

# (code, name, retriable, explanation)
_TABLE = [
    (-1, "UNKNOWN_SERVER_ERROR", False, "The server hit an unexpected error."),
    (0, "NONE", False, ""),
    (1, "OFFSET_OUT_OF_RANGE", False, "The requested offset is outside the log's range."),
    (2, "CORRUPT_MESSAGE", True, "A record failed its CRC, size or other validity check."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, "No such topic or partition on this server."),
    (4, "INVALID_FETCH_SIZE", False, "The fetch size is invalid."),
    (5, "LEADER_NOT_AVAILABLE", True, "The partition has no leader right now (an election is under way)."),
    (6, "NOT_LEADER_OR_FOLLOWER", True, "This server is neither leader nor follower of the partition."),
    (7, "REQUEST_TIMED_OUT", True, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", False, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", True, "The replica is not available for the partition."),
    (10, "MESSAGE_TOO_LARGE", False, "The request is larger than the server accepts."),
    (11, "STALE_CONTROLLER_EPOCH", False, "The controller epoch is older than the current one."),
    (12, "OFFSET_METADATA_TOO_LARGE", False, "The committed offset metadata is too large."),
    (13, "NETWORK_EXCEPTION", True, "The server disconnected before a response arrived."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, "The coordinator is still loading."),
    (15, "COORDINATOR_NOT_AVAILABLE", True, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", True, "This server is not the coordinator."),
    (17, "INVALID_TOPIC_EXCEPTION", False, "The topic name is not valid."),
    (18, "RECORD_LIST_TOO_LARGE", False, "The record batch is larger than the segment allows."),
    (19, "NOT_ENOUGH_REPLICAS", True, "Fewer in-sync replicas than required."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, "Written, but to fewer in-sync replicas than required."),
    (21, "INVALID_REQUIRED_ACKS", False, "The acks setting is invalid."),
    (22, "ILLEGAL_GENERATION", False, "The group generation is not current."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False, "The member's protocol does not match the group's."),
    (24, "INVALID_GROUP_ID", False, "The group id is not valid."),
    (25, "UNKNOWN_MEMBER_ID", False, "The coordinator does not know this member."),
    (26, "INVALID_SESSION_TIMEOUT", False, "The session timeout is outside the allowed range."),
    (27, "REBALANCE_IN_PROGRESS", False, "The group is rebalancing."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, "The committing offset data size is not valid."),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, "Not authorized to access the topic."),
    (30, "GROUP_AUTHORIZATION_FAILED", False, "Not authorized to access the group."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, "Not authorized for this cluster operation."),
    (32, "INVALID_TIMESTAMP", False, "The timestamp is outside the accepted range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, "The SASL mechanism is not enabled."),
    (34, "ILLEGAL_SASL_STATE", False, "The request is not valid in the SASL state of the connection."),
    (35, "UNSUPPORTED_VERSION", False, "The version of this API is not supported."),
    (36, "TOPIC_ALREADY_EXISTS", False, "A topic with this name already exists."),
    (37, "INVALID_PARTITIONS", False, "The number of partitions is not valid."),
    (38, "INVALID_REPLICATION_FACTOR", False, "The replication factor is not valid."),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, "The replica assignment is not valid."),
    (40, "INVALID_CONFIG", False, "The configuration is not valid."),
    (41, "NOT_CONTROLLER", True, "This node is not the active controller."),
    (42, "INVALID_REQUEST", False, "The request is malformed or not valid here."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, "The message format does not support this request."),
    (44, "POLICY_VIOLATION", False, "The request violates a configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, "The producer sequence number is out of order."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, "The producer sequence number is a duplicate."),
    (47, "INVALID_PRODUCER_EPOCH", False, "The producer epoch is not current."),
    (48, "INVALID_TXN_STATE", False, "The operation is not valid in the transaction's state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, "The producer id does not match the transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, "The transaction timeout is out of range."),
    (51, "CONCURRENT_TRANSACTIONS", True, "Another transaction operation is in progress."),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, "A newer transaction coordinator has taken over."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, "Not authorized for the transactional id."),
    (54, "SECURITY_DISABLED", False, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", False, "Not attempted because another part of the batch failed."),
    (56, "KAFKA_STORAGE_ERROR", True, "A disk error occurred on the server."),
    (57, "LOG_DIR_NOT_FOUND", False, "The log directory does not exist."),
    (58, "SASL_AUTHENTICATION_FAILED", False, "SASL authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", False, "The producer id is not known."),
    (60, "REASSIGNMENT_IN_PROGRESS", False, "A reassignment of this partition is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, "Delegation token authentication is disabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, "The delegation token does not exist."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, "The principal does not own the delegation token."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False, "Delegation token requests are not allowed on this channel."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, "Not authorized for the delegation token."),
    (66, "DELEGATION_TOKEN_EXPIRED", False, "The delegation token has expired."),
    (67, "INVALID_PRINCIPAL_TYPE", False, "The principal type is not supported."),
    (68, "NON_EMPTY_GROUP", False, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", False, "The group does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, "The fetch session does not exist."),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, "The fetch session epoch is not valid."),
    (72, "LISTENER_NOT_FOUND", True, "The leader has no endpoint on the requested listener."),
    (73, "TOPIC_DELETION_DISABLED", False, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", True, "The leader epoch in the request is older than the current one."),
    (75, "UNKNOWN_LEADER_EPOCH", True, "The leader epoch in the request is newer than the current one."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, "The compression type is not supported."),
    (77, "STALE_BROKER_EPOCH", False, "The broker epoch is not the current one."),
    (78, "OFFSET_NOT_AVAILABLE", True, "The leader's high watermark has not caught up."),
    (79, "MEMBER_ID_REQUIRED", False, "A member id is required to join the group."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, "The preferred leader is not available."),
    (81, "GROUP_MAX_SIZE_REACHED", False, "The group is full."),
    (82, "FENCED_INSTANCE_ID", False, "Another member with the same group instance id took over."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, "No eligible leader is available for the partition."),
    (84, "ELECTION_NOT_NEEDED", False, "The election is not needed: the right leader already leads."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, "No reassignment is in progress for the partition."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False, "The group is subscribed to the topic."),
    (87, "INVALID_RECORD", False, "A record failed validation on the server."),
    (88, "UNSTABLE_OFFSET_COMMIT", True, "Pending offset commits make the offsets unstable."),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, "The throttling quota has been exceeded."),
    (90, "PRODUCER_FENCED", False, "A newer producer with the same transactional id exists."),
    (91, "RESOURCE_NOT_FOUND", False, "The resource does not exist."),
    (92, "DUPLICATE_RESOURCE", False, "The resource appears more than once in the request."),
    (93, "UNACCEPTABLE_CREDENTIAL", False, "The credential does not meet the requirements."),
    (94, "INCONSISTENT_VOTER_SET", False, "The voter sets of the request and the receiver differ."),
    (95, "INVALID_UPDATE_VERSION", False, "The update version is not valid."),
    (96, "FEATURE_UPDATE_FAILED", False, "The feature update could not be applied."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, "The forwarded principal could not be read."),
    (98, "SNAPSHOT_NOT_FOUND", False, "The snapshot does not exist."),
    (99, "POSITION_OUT_OF_RANGE", False, "The position is outside the snapshot."),
    (100, "UNKNOWN_TOPIC_ID", True, "No topic with this id exists."),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, "Another live broker holds this id."),
    (102, "BROKER_ID_NOT_REGISTERED", False, "No broker with this id is registered."),
    (103, "INCONSISTENT_TOPIC_ID", True, "The topic id does not match the topic."),
    (104, "INCONSISTENT_CLUSTER_ID", False, "The cluster id does not match this cluster."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, "The transactional id does not exist."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, "Topic ids in the fetch session are inconsistent."),
    (107, "INELIGIBLE_REPLICA", False, "The replica is not eligible to join the ISR."),
    (108, "NEW_LEADER_ELECTED", False, "A new leader was elected; the request came from the old one."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False, "The offset has moved to tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", False, "The member epoch is fenced."),
    (111, "UNRELEASED_INSTANCE_ID", False, "The instance id is still in use."),
    (112, "UNSUPPORTED_ASSIGNOR", False, "The assignor is not supported."),
    (113, "STALE_MEMBER_EPOCH", False, "The member epoch is stale."),
    (114, "MISMATCHED_ENDPOINT_TYPE", False, "The request went to the wrong kind of endpoint."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, "This endpoint type is not supported."),
    (116, "UNKNOWN_CONTROLLER_ID", False, "No controller with this id is known."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", False, "The client telemetry subscription is not known."),
    (118, "TELEMETRY_TOO_LARGE", False, "The telemetry payload is too large."),
    (119, "INVALID_REGISTRATION", False, "The registration is not valid."),
    (120, "TRANSACTION_ABORTABLE", False, "The transaction must be aborted."),
    (121, "INVALID_RECORD_STATE", False, "The record state is not valid."),
    (122, "SHARE_SESSION_NOT_FOUND", True, "The share session does not exist."),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, "The share session epoch is not valid."),
    (124, "FENCED_STATE_EPOCH", False, "The share state epoch is fenced."),
    (125, "INVALID_VOTER_KEY", False, "The voter key does not match the receiver."),
    (126, "DUPLICATE_VOTER", False, "The voter is already in the voter set."),
    (127, "VOTER_NOT_FOUND", False, "The voter is not in the voter set."),
]

Error = IntEnum("Error", [(name, code) for code, name, _, _ in _TABLE])  # type: ignore[misc]
Error.__doc__ = "Kafka error codes by name."

_RETRIABLE = {code for code, _, retriable, _ in _TABLE if retriable}
_MESSAGES = {code: text for code, _, _, text in _TABLE}


def is_retriable(code: int) -> bool:
    return code in _RETRIABLE


def message(code: int) -> str:
    return _MESSAGES.get(code, "")


def describe(code: int) -> str:
    """``"NOT_CONTROLLER (41)"``; unknown numbers are shown as such."""
    try:
        return f"{Error(code).name} ({code})"
    except ValueError:
        return f"UNKNOWN_ERROR_CODE ({code})"
