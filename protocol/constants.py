"""Kafka's enumerations and sentinel values that travel as bare integers on the wire.

The schemas only say "int8" or "int32"; the meaning of each number is Kafka's, and the values
here are Kafka's released ones. Two different enumerations share the name "resource type":
configuration resources (DescribeConfigs, AlterConfigs, ConfigRecord) use one set of codes,
ACL resources (CreateAcls, AccessControlEntryRecord) another.
"""

from __future__ import annotations

from enum import IntEnum

from protocol.primitives import ZERO_UUID


def name_of(kind: type[IntEnum], code: int) -> str:
    """The name Kafka gives ``code`` in ``kind``, or the number where the enum has none (a
    newer Kafka's value): for people, in logs and tools."""
    try:
        return kind(code).name
    except ValueError:
        return str(code)


class ConfigResourceType(IntEnum):
    """The resource a configuration belongs to."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class AclResourceType(IntEnum):
    """The resource an ACL protects."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15  # Kafka 4.0 (KIP-939)


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    """How an ACL's resource name matches (ANY and MATCH only appear in filters)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class ConfigSource(IntEnum):
    """Where a described configuration value comes from (DescribeConfigs v1+)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """The declared type of a described configuration (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOpType(IntEnum):
    """IncrementalAlterConfigs' ConfigOperation."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


class EndpointType(IntEnum):
    """Which listeners DescribeCluster v1+ reports."""

    UNKNOWN = 0
    BROKER = 1
    CONTROLLER = 2


class FeatureUpgradeType(IntEnum):
    """UpdateFeatures v1+ UpgradeType."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class LeaderRecoveryState(IntEnum):
    RECOVERED = 0
    RECOVERING = 1
    # Only in PartitionChangeRecord: the state stays as it was.
    NO_CHANGE = -1


class FencingChange(IntEnum):
    """BrokerRegistrationChangeRecord's Fenced field."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


class ControlledShutdownChange(IntEnum):
    """BrokerRegistrationChangeRecord's InControlledShutdown field."""

    NONE = 0
    IN_CONTROLLED_SHUTDOWN = 1


# Leader fields: no replica leads the partition.
NO_LEADER = -1
# PartitionChangeRecord's Leader: the leader stays as it was.
NO_LEADER_CHANGE = -2
# Authorized-operations fields when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# Directory ids with a reserved meaning in partition records and broker registrations.
DIRECTORY_MIGRATING = ZERO_UUID  # the broker has not reported directories yet
DIRECTORY_UNASSIGNED = bytes(15) + b"\x01"  # no directory chosen yet
DIRECTORY_LOST = bytes(15) + b"\x02"  # the directory was lost (offline)
