"""Kafka's error codes: number, name, whether a client may retry, and a short explanation.

``Error`` members are ints, so they go straight into generated messages; decoded codes are
plain ints and ``Error(code)`` or ``describe(code)`` turns them back into names.
"""

from __future__ import annotations

from enum import IntEnum


class Error(IntEnum):
    """Kafka error codes by name; each knows whether a client may retry and what it means."""

    retriable: bool
    explanation: str

    def __new__(cls, code: int, retriable: bool = False, explanation: str = "") -> Error:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.explanation = explanation
        return member

    UNKNOWN_SERVER_ERROR = -1, False, "The server hit an unexpected error."
    NONE = 0, False, ""
    OFFSET_OUT_OF_RANGE = 1, False, "The requested offset is outside the log's range."
    CORRUPT_MESSAGE = 2, True, "A record failed its CRC, size or other validity check."
    UNKNOWN_TOPIC_OR_PARTITION = 3, True, "No such topic or partition on this server."
    INVALID_FETCH_SIZE = 4, False, "The fetch size is invalid."
    LEADER_NOT_AVAILABLE = 5, True, "The partition has no leader right now (an election is under way)."
    NOT_LEADER_OR_FOLLOWER = 6, True, "This server is neither leader nor follower of the partition."
    REQUEST_TIMED_OUT = 7, True, "The request timed out."
    BROKER_NOT_AVAILABLE = 8, False, "The broker is not available."
    REPLICA_NOT_AVAILABLE = 9, True, "The replica is not available for the partition."
    MESSAGE_TOO_LARGE = 10, False, "The request is larger than the server accepts."
    STALE_CONTROLLER_EPOCH = 11, False, "The controller epoch is older than the current one."
    OFFSET_METADATA_TOO_LARGE = 12, False, "The committed offset metadata is too large."
    NETWORK_EXCEPTION = 13, True, "The server disconnected before a response arrived."
    COORDINATOR_LOAD_IN_PROGRESS = 14, True, "The coordinator is still loading."
    COORDINATOR_NOT_AVAILABLE = 15, True, "The coordinator is not available."
    NOT_COORDINATOR = 16, True, "This server is not the coordinator."
    INVALID_TOPIC_EXCEPTION = 17, False, "The topic name is not valid."
    RECORD_LIST_TOO_LARGE = 18, False, "The record batch is larger than the segment allows."
    NOT_ENOUGH_REPLICAS = 19, True, "Fewer in-sync replicas than required."
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, True, "Written, but to fewer in-sync replicas than required."
    INVALID_REQUIRED_ACKS = 21, False, "The acks setting is invalid."
    ILLEGAL_GENERATION = 22, False, "The group generation is not current."
    INCONSISTENT_GROUP_PROTOCOL = 23, False, "The member's protocol does not match the group's."
    INVALID_GROUP_ID = 24, False, "The group id is not valid."
    UNKNOWN_MEMBER_ID = 25, False, "The coordinator does not know this member."
    INVALID_SESSION_TIMEOUT = 26, False, "The session timeout is outside the allowed range."
    REBALANCE_IN_PROGRESS = 27, False, "The group is rebalancing."
    INVALID_COMMIT_OFFSET_SIZE = 28, False, "The committing offset data size is not valid."
    TOPIC_AUTHORIZATION_FAILED = 29, False, "Not authorized to access the topic."
    GROUP_AUTHORIZATION_FAILED = 30, False, "Not authorized to access the group."
    CLUSTER_AUTHORIZATION_FAILED = 31, False, "Not authorized for this cluster operation."
    INVALID_TIMESTAMP = 32, False, "The timestamp is outside the accepted range."
    UNSUPPORTED_SASL_MECHANISM = 33, False, "The SASL mechanism is not enabled."
    ILLEGAL_SASL_STATE = 34, False, "The request is not valid in the SASL state of the connection."
    UNSUPPORTED_VERSION = 35, False, "The version of this API is not supported."
    TOPIC_ALREADY_EXISTS = 36, False, "A topic with this name already exists."
    INVALID_PARTITIONS = 37, False, "The number of partitions is not valid."
    INVALID_REPLICATION_FACTOR = 38, False, "The replication factor is not valid."
    INVALID_REPLICA_ASSIGNMENT = 39, False, "The replica assignment is not valid."
    INVALID_CONFIG = 40, False, "The configuration is not valid."
    NOT_CONTROLLER = 41, True, "This node is not the active controller."
    INVALID_REQUEST = 42, False, "The request is malformed or not valid here."
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, False, "The message format does not support this request."
    POLICY_VIOLATION = 44, False, "The request violates a configured policy."
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, False, "The producer sequence number is out of order."
    DUPLICATE_SEQUENCE_NUMBER = 46, False, "The producer sequence number is a duplicate."
    INVALID_PRODUCER_EPOCH = 47, False, "The producer epoch is not current."
    INVALID_TXN_STATE = 48, False, "The operation is not valid in the transaction's state."
    INVALID_PRODUCER_ID_MAPPING = 49, False, "The producer id does not match the transactional id."
    INVALID_TRANSACTION_TIMEOUT = 50, False, "The transaction timeout is out of range."
    CONCURRENT_TRANSACTIONS = 51, True, "Another transaction operation is in progress."
    TRANSACTION_COORDINATOR_FENCED = 52, False, "A newer transaction coordinator has taken over."
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, False, "Not authorized for the transactional id."
    SECURITY_DISABLED = 54, False, "Security features are disabled."
    OPERATION_NOT_ATTEMPTED = 55, False, "Not attempted because another part of the batch failed."
    KAFKA_STORAGE_ERROR = 56, True, "A disk error occurred on the server."
    LOG_DIR_NOT_FOUND = 57, False, "The log directory does not exist."
    SASL_AUTHENTICATION_FAILED = 58, False, "SASL authentication failed."
    UNKNOWN_PRODUCER_ID = 59, False, "The producer id is not known."
    REASSIGNMENT_IN_PROGRESS = 60, False, "A reassignment of this partition is in progress."
    DELEGATION_TOKEN_AUTH_DISABLED = 61, False, "Delegation token authentication is disabled."
    DELEGATION_TOKEN_NOT_FOUND = 62, False, "The delegation token does not exist."
    DELEGATION_TOKEN_OWNER_MISMATCH = 63, False, "The principal does not own the delegation token."
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64, False, "Delegation token requests are not allowed on this channel."
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65, False, "Not authorized for the delegation token."
    DELEGATION_TOKEN_EXPIRED = 66, False, "The delegation token has expired."
    INVALID_PRINCIPAL_TYPE = 67, False, "The principal type is not supported."
    NON_EMPTY_GROUP = 68, False, "The group is not empty."
    GROUP_ID_NOT_FOUND = 69, False, "The group does not exist."
    FETCH_SESSION_ID_NOT_FOUND = 70, True, "The fetch session does not exist."
    INVALID_FETCH_SESSION_EPOCH = 71, True, "The fetch session epoch is not valid."
    LISTENER_NOT_FOUND = 72, True, "The leader has no endpoint on the requested listener."
    TOPIC_DELETION_DISABLED = 73, False, "Topic deletion is disabled."
    FENCED_LEADER_EPOCH = 74, True, "The leader epoch in the request is older than the current one."
    UNKNOWN_LEADER_EPOCH = 75, True, "The leader epoch in the request is newer than the current one."
    UNSUPPORTED_COMPRESSION_TYPE = 76, False, "The compression type is not supported."
    STALE_BROKER_EPOCH = 77, False, "The broker epoch is not the current one."
    OFFSET_NOT_AVAILABLE = 78, True, "The leader's high watermark has not caught up."
    MEMBER_ID_REQUIRED = 79, False, "A member id is required to join the group."
    PREFERRED_LEADER_NOT_AVAILABLE = 80, True, "The preferred leader is not available."
    GROUP_MAX_SIZE_REACHED = 81, False, "The group is full."
    FENCED_INSTANCE_ID = 82, False, "Another member with the same group instance id took over."
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, True, "No eligible leader is available for the partition."
    ELECTION_NOT_NEEDED = 84, False, "The election is not needed: the right leader already leads."
    NO_REASSIGNMENT_IN_PROGRESS = 85, False, "No reassignment is in progress for the partition."
    GROUP_SUBSCRIBED_TO_TOPIC = 86, False, "The group is subscribed to the topic."
    INVALID_RECORD = 87, False, "A record failed validation on the server."
    UNSTABLE_OFFSET_COMMIT = 88, True, "Pending offset commits make the offsets unstable."
    THROTTLING_QUOTA_EXCEEDED = 89, True, "The throttling quota has been exceeded."
    PRODUCER_FENCED = 90, False, "A newer producer with the same transactional id exists."
    RESOURCE_NOT_FOUND = 91, False, "The resource does not exist."
    DUPLICATE_RESOURCE = 92, False, "The resource appears more than once in the request."
    UNACCEPTABLE_CREDENTIAL = 93, False, "The credential does not meet the requirements."
    INCONSISTENT_VOTER_SET = 94, False, "The voter sets of the request and the receiver differ."
    INVALID_UPDATE_VERSION = 95, False, "The update version is not valid."
    FEATURE_UPDATE_FAILED = 96, False, "The feature update could not be applied."
    PRINCIPAL_DESERIALIZATION_FAILURE = 97, False, "The forwarded principal could not be read."
    SNAPSHOT_NOT_FOUND = 98, False, "The snapshot does not exist."
    POSITION_OUT_OF_RANGE = 99, False, "The position is outside the snapshot."
    UNKNOWN_TOPIC_ID = 100, True, "No topic with this id exists."
    DUPLICATE_BROKER_REGISTRATION = 101, False, "Another live broker holds this id."
    BROKER_ID_NOT_REGISTERED = 102, False, "No broker with this id is registered."
    INCONSISTENT_TOPIC_ID = 103, True, "The topic id does not match the topic."
    INCONSISTENT_CLUSTER_ID = 104, False, "The cluster id does not match this cluster."
    TRANSACTIONAL_ID_NOT_FOUND = 105, False, "The transactional id does not exist."
    FETCH_SESSION_TOPIC_ID_ERROR = 106, True, "Topic ids in the fetch session are inconsistent."
    INELIGIBLE_REPLICA = 107, False, "The replica is not eligible to join the ISR."
    NEW_LEADER_ELECTED = 108, False, "A new leader was elected; the request came from the old one."
    OFFSET_MOVED_TO_TIERED_STORAGE = 109, False, "The offset has moved to tiered storage."
    FENCED_MEMBER_EPOCH = 110, False, "The member epoch is fenced."
    UNRELEASED_INSTANCE_ID = 111, False, "The instance id is still in use."
    UNSUPPORTED_ASSIGNOR = 112, False, "The assignor is not supported."
    STALE_MEMBER_EPOCH = 113, False, "The member epoch is stale."
    MISMATCHED_ENDPOINT_TYPE = 114, False, "The request went to the wrong kind of endpoint."
    UNSUPPORTED_ENDPOINT_TYPE = 115, False, "This endpoint type is not supported."
    UNKNOWN_CONTROLLER_ID = 116, False, "No controller with this id is known."
    UNKNOWN_SUBSCRIPTION_ID = 117, False, "The client telemetry subscription is not known."
    TELEMETRY_TOO_LARGE = 118, False, "The telemetry payload is too large."
    INVALID_REGISTRATION = 119, False, "The registration is not valid."
    TRANSACTION_ABORTABLE = 120, False, "The transaction must be aborted."
    INVALID_RECORD_STATE = 121, False, "The record state is not valid."
    SHARE_SESSION_NOT_FOUND = 122, True, "The share session does not exist."
    INVALID_SHARE_SESSION_EPOCH = 123, True, "The share session epoch is not valid."
    FENCED_STATE_EPOCH = 124, False, "The share state epoch is fenced."
    INVALID_VOTER_KEY = 125, False, "The voter key does not match the receiver."
    DUPLICATE_VOTER = 126, False, "The voter is already in the voter set."
    VOTER_NOT_FOUND = 127, False, "The voter is not in the voter set."


_BY_CODE: dict[int, Error] = {int(e): e for e in Error}


def is_retriable(code: int) -> bool:
    error = _BY_CODE.get(code)
    return error is not None and error.retriable


def message(code: int) -> str:
    error = _BY_CODE.get(code)
    return "" if error is None else error.explanation


def describe(code: int) -> str:
    """``"NOT_CONTROLLER (41)"``; unknown numbers are shown as such."""
    try:
        return f"{Error(code).name} ({code})"
    except ValueError:
        return f"UNKNOWN_ERROR_CODE ({code})"
