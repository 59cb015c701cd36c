"""The dynamic configs kraftwire knows: Kafka's names, types, defaults and valid values.

A topic config that a topic does not set falls back to its broker-level synonyms, in order
(retention.ms <- log.retention.ms, log.retention.minutes, log.retention.hours), exactly the
names Kafka's brokers use, so `kafka-configs` output reads the same against kraftwire.
Values are kept as the strings clients send; `parse` is the one place that reads them, for
validation and for the controller's typed lookups alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from protocol.constants import ConfigType

_LONG_MAX = 9223372036854775807  # Java Long.MAX_VALUE: "never" in Kafka defaults
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


# A validator gets a parsed value and returns why it is unacceptable, or None.
Validator = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Synonym:
    """A broker config that supplies a topic config's value; `scale` converts its unit."""

    name: str
    scale: int = 1


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None  # None: unset unless someone sets it (e.g. log.retention.ms)
    doc: str
    topic: bool = False
    broker: bool = False
    validator: Validator | None = None
    synonyms: tuple[Synonym, ...] = ()


# --- parsing ---------------------------------------------------------------------------------
_INTEGER_RE = re.compile(r"[+-]?[0-9]+")
_DOUBLE_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INT_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def parse(defn: ConfigDef, text: str) -> Any:
    """Read a config value as Kafka's ConfigDef does; raises ValueError with the reason."""
    kind = defn.type
    value = text.strip()
    if kind is ConfigType.BOOLEAN:
        if value.lower() not in ("true", "false"):
            raise ValueError("Expected value to be either true or false")
        return value.lower() == "true"
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        if not _INTEGER_RE.fullmatch(value) or not -(1 << bits - 1) <= int(value) < 1 << bits - 1:
            raise ValueError(f"Not a number of type {kind.name}")
        return int(value)
    if kind is ConfigType.DOUBLE:
        if not _DOUBLE_RE.fullmatch(value):
            raise ValueError("Not a number of type DOUBLE")
        return float(value)
    if kind is ConfigType.LIST:
        return split_list(value)
    return value


def split_list(text: str) -> list[str]:
    """Kafka's LIST syntax: comma separated, spaces around items ignored, "" is empty."""
    text = text.strip()
    return [item.strip() for item in text.split(",")] if text else []


def check(defn: ConfigDef, text: str) -> str | None:
    """Why `text` is not a valid value of `defn`, in Kafka's wording, or None."""
    try:
        value = parse(defn, text)
    except ValueError as exc:
        reason: str | None = str(exc)
    else:
        reason = defn.validator(value) if defn.validator else None
    if reason is None:
        return None
    return f"Invalid value {text} for configuration {defn.name}: {reason}"


def to_topic_units(synonym: Synonym, text: str) -> str:
    """A broker synonym's value in the topic config's unit (log.retention.hours -> ms)."""
    if synonym.scale == 1:
        return text
    value = int(text.strip())
    # Kafka reads any negative retention as "keep forever" (-1) rather than scaling it.
    return "-1" if value < 0 else str(value * synonym.scale)


# --- validators ------------------------------------------------------------------------------
def at_least(low: int) -> Validator:
    return lambda v: None if v >= low else f"Value must be at least {low}"


def between(low: float, high: float) -> Validator:
    def validate(v: float) -> str | None:
        if not v >= low:  # also rejects NaN
            return f"Value must be at least {low}"
        return None if v <= high else f"Value must be no more than {high}"
    return validate


def one_of(*choices: str) -> Validator:
    return lambda v: None if v in choices else "String must be one of: " + ", ".join(choices)


def list_of(*choices: str) -> Validator:
    def validate(items: list[str]) -> str | None:
        if len(set(items)) != len(items):
            return "Values must not be duplicated"
        bad = [item for item in items if item not in choices]
        return f"List items must be among: {', '.join(choices)}" if bad else None
    return validate


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be -1 (the codec's default) or between 1 and 9"


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(items: list[str]) -> str | None:
    if items == ["*"] or all(_REPLICA.fullmatch(item) for item in items):
        return None
    return "must be the literal '*' or a list of partitionId:brokerId pairs"


# --- the definitions -------------------------------------------------------------------------
def _topic(name: str, kind: ConfigType, default: str, doc: str, validator: Validator | None = None,
           *synonyms: Synonym | str) -> ConfigDef:
    syns = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return ConfigDef(name, kind, default, doc, topic=True, validator=validator, synonyms=syns)


def _shared(name: str, kind: ConfigType, default: str, doc: str,
            validator: Validator | None = None) -> ConfigDef:
    """A config with one name at both levels: the broker value is the topic's default."""
    return ConfigDef(name, kind, default, doc, topic=True, broker=True, validator=validator,
                     synonyms=(Synonym(name),))


def _broker(name: str, kind: ConfigType, default: str | None, doc: str,
            validator: Validator | None = None) -> ConfigDef:
    return ConfigDef(name, kind, default, doc, broker=True, validator=validator)


_B, _S, _I, _L, _D, _LST = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                            ConfigType.DOUBLE, ConfigType.LIST)
_LMAX = str(_LONG_MAX)
_CLEANUP = list_of("compact", "delete")
_CODECS = one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = one_of("CreateTime", "LogAppendTime")

_DEFINITIONS = (
    # Topic configs, with the broker configs they inherit from.
    _topic("cleanup.policy", _LST, "delete",
           "How old segments are retired: delete them, compact them by key, or both.",
           _CLEANUP, "log.cleanup.policy"),
    _shared("compression.type", _S, "producer",
            "Codec the log stores batches in; 'producer' keeps whatever the producer used.", _CODECS),
    _shared("compression.gzip.level", _I, "-1", "Compression level used when the log codec is gzip.",
            _gzip_level),
    _shared("compression.lz4.level", _I, "9", "Compression level used when the log codec is lz4.",
            between(1, 17)),
    _shared("compression.zstd.level", _I, "3", "Compression level used when the log codec is zstd.",
            between(-131072, 22)),
    _topic("delete.retention.ms", _L, "86400000",
           "How long delete markers survive compaction, so slow readers still see the deletion.",
           at_least(0), "log.cleaner.delete.retention.ms"),
    _shared("eligible.leader.replicas.enabled", _B, "false",
            "Whether the controller keeps eligible leader replicas (KIP-966) and lets the ISR empty."),
    _topic("file.delete.delay.ms", _L, "60000",
           "Grace period before a retired segment file is removed from disk.",
           at_least(0), "log.segment.delete.delay.ms"),
    _topic("flush.messages", _L, _LMAX, "Messages appended between forced fsyncs of the log.",
           at_least(1), "log.flush.interval.messages"),
    _topic("flush.ms", _L, _LMAX, "Longest time appended data may stay unsynced to disk.",
           at_least(0), "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    _topic("follower.replication.throttled.replicas", _LST, "",
           "Replicas ('*' for all) whose follower-side fetching is throttled.", _throttled_replicas),
    _topic("index.interval.bytes", _I, "4096", "Bytes of log between two offset index entries.",
           at_least(0), "log.index.interval.bytes"),
    _topic("leader.replication.throttled.replicas", _LST, "",
           "Replicas ('*' for all) whose leader-side serving of followers is throttled.",
           _throttled_replicas),
    _topic("local.retention.bytes", _L, "-2",
           "Bytes kept on local disk when tiered storage is on; -2 means use retention.bytes.",
           at_least(-2), "log.local.retention.bytes"),
    _topic("local.retention.ms", _L, "-2",
           "Time data stays on local disk when tiered storage is on; -2 means use retention.ms.",
           at_least(-2), "log.local.retention.ms"),
    _topic("max.compaction.lag.ms", _L, _LMAX,
           "Longest time a record may stay uncompacted in a compacted log.",
           at_least(1), "log.cleaner.max.compaction.lag.ms"),
    _topic("max.message.bytes", _I, "1048588", "Largest record batch the log accepts, after compression.",
           at_least(0), "message.max.bytes"),
    _topic("message.timestamp.after.max.ms", _L, "3600000",
           "How far in the future a CreateTime timestamp may be before the batch is rejected.",
           at_least(0), "log.message.timestamp.after.max.ms"),
    _topic("message.timestamp.before.max.ms", _L, _LMAX,
           "How far in the past a CreateTime timestamp may be before the batch is rejected.",
           at_least(0), "log.message.timestamp.before.max.ms"),
    _topic("message.timestamp.type", _S, "CreateTime",
           "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
           _TIMESTAMP_TYPES, "log.message.timestamp.type"),
    _topic("min.cleanable.dirty.ratio", _D, "0.5",
           "Share of uncompacted log that makes the log eligible for cleaning.",
           between(0, 1), "log.cleaner.min.cleanable.ratio"),
    _topic("min.compaction.lag.ms", _L, "0", "Shortest time a record stays uncompacted.",
           at_least(0), "log.cleaner.min.compaction.lag.ms"),
    _shared("min.insync.replicas", _I, "1",
            "Replicas that must hold a write before an acks=all produce succeeds.", at_least(1)),
    _topic("preallocate", _B, "false", "Whether new segment files are allocated at full size up front.",
           None, "log.preallocate"),
    _topic("remote.storage.enable", _B, "false",
           "Whether the topic's old segments move to tiered storage."),
    _topic("retention.bytes", _L, "-1",
           "Largest size a partition may reach before old segments go; -1 is no limit.",
           None, "log.retention.bytes"),
    _topic("retention.ms", _L, "604800000", "How long data is kept before old segments go; -1 is forever.",
           at_least(-1), "log.retention.ms", Synonym("log.retention.minutes", _MINUTE_MS),
           Synonym("log.retention.hours", _HOUR_MS)),
    _topic("segment.bytes", _I, "1073741824", "Size at which the active segment file is rolled.",
           at_least(1048576), "log.segment.bytes"),
    _topic("segment.index.bytes", _I, "10485760", "Size of each segment's offset and time index files.",
           at_least(4), "log.index.size.max.bytes"),
    _topic("segment.jitter.ms", _L, "0", "Random slack subtracted from segment.ms so segments roll apart.",
           at_least(0), "log.roll.jitter.ms", Synonym("log.roll.jitter.hours", _HOUR_MS)),
    _topic("segment.ms", _L, "604800000", "Age at which the active segment is rolled even if not full.",
           at_least(1), "log.roll.ms", Synonym("log.roll.hours", _HOUR_MS)),
    _shared("unclean.leader.election.enable", _B, "false",
            "Whether a replica outside the ISR may become leader as a last resort, losing data."),
    # Broker-level names behind the topic configs above.
    _broker("log.cleanup.policy", _LST, "delete", "Broker-level default for cleanup.policy.", _CLEANUP),
    _broker("log.cleaner.delete.retention.ms", _L, "86400000",
            "Broker-level default for delete.retention.ms.", at_least(0)),
    _broker("log.segment.delete.delay.ms", _L, "60000", "Broker-level default for file.delete.delay.ms.",
            at_least(0)),
    _broker("log.flush.interval.messages", _L, _LMAX,
            "Broker-level default for flush.messages.", at_least(1)),
    _broker("log.flush.interval.ms", _L, None, "Broker-level default for flush.ms.", at_least(0)),
    _broker("log.flush.scheduler.interval.ms", _L, _LMAX,
            "How often the flusher looks for logs to sync; flush.ms falls back to it.", at_least(0)),
    _broker("log.index.interval.bytes", _I, "4096", "Broker-level default for index.interval.bytes.",
            at_least(0)),
    _broker("log.local.retention.bytes", _L, "-2", "Broker-level default for local.retention.bytes.",
            at_least(-2)),
    _broker("log.local.retention.ms", _L, "-2",
            "Broker-level default for local.retention.ms.", at_least(-2)),
    _broker("log.cleaner.max.compaction.lag.ms", _L, _LMAX,
            "Broker-level default for max.compaction.lag.ms.", at_least(1)),
    _broker("message.max.bytes", _I, "1048588", "Broker-level default for max.message.bytes.", at_least(0)),
    _broker("log.message.timestamp.after.max.ms", _L, "3600000",
            "Broker-level default for message.timestamp.after.max.ms.", at_least(0)),
    _broker("log.message.timestamp.before.max.ms", _L, _LMAX,
            "Broker-level default for message.timestamp.before.max.ms.", at_least(0)),
    _broker("log.message.timestamp.type", _S, "CreateTime",
            "Broker-level default for message.timestamp.type.", _TIMESTAMP_TYPES),
    _broker("log.cleaner.min.cleanable.ratio", _D, "0.5",
            "Broker-level default for min.cleanable.dirty.ratio.", between(0, 1)),
    _broker("log.cleaner.min.compaction.lag.ms", _L, "0", "Broker-level default for min.compaction.lag.ms.",
            at_least(0)),
    _broker("log.preallocate", _B, "false", "Broker-level default for preallocate."),
    _broker("log.retention.bytes", _L, "-1", "Broker-level default for retention.bytes."),
    _broker("log.retention.ms", _L, None,
            "Broker-level default for retention.ms; wins over the minutes and hours forms.", at_least(-1)),
    _broker("log.retention.minutes", _I, None,
            "Broker-level retention in minutes, used when log.retention.ms is unset.", at_least(-1)),
    _broker("log.retention.hours", _I, "168",
            "Broker-level retention in hours, the last fallback.", at_least(-1)),
    _broker("log.segment.bytes", _I, "1073741824",
            "Broker-level default for segment.bytes.", at_least(1048576)),
    _broker("log.index.size.max.bytes", _I, "10485760", "Broker-level default for segment.index.bytes.",
            at_least(4)),
    _broker("log.roll.jitter.ms", _L, None, "Broker-level default for segment.jitter.ms.", at_least(0)),
    _broker("log.roll.jitter.hours", _I, "0",
            "Broker-level segment jitter in hours, used when log.roll.jitter.ms is unset.", at_least(0)),
    _broker("log.roll.ms", _L, None, "Broker-level default for segment.ms.", at_least(1)),
    _broker("log.roll.hours", _I, "168",
            "Broker-level segment age in hours, used when log.roll.ms is unset.", at_least(1)),
    # Broker-only settings the controller itself acts on.
    _broker("max.request.partition.size.limit", _I, "2000",
            "Most partitions DescribeTopicPartitions returns in one response.", at_least(1)),
    _broker("num.partitions", _I, "1", "Partition count of a topic created without one.", at_least(1)),
    _broker("default.replication.factor", _I, "1", "Replication factor of a topic created without one.",
            at_least(1)),
)

DEFINITIONS: dict[str, ConfigDef] = {d.name: d for d in _DEFINITIONS}
TOPIC_CONFIGS: tuple[str, ...] = tuple(sorted(d.name for d in _DEFINITIONS if d.topic))
BROKER_CONFIGS: tuple[str, ...] = tuple(sorted(d.name for d in _DEFINITIONS if d.broker))


def sensitive(defn: ConfigDef | None) -> bool:
    """Kafka hides the values of passwords and of configs it cannot type (custom ones may be secrets)."""
    return defn is None or defn.type is ConfigType.PASSWORD
