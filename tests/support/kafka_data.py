"""An independent reading of a Kafka metadata directory, to check the controller against.

It walks the files' bytes itself (batch headers, record framing, varints) and keeps only
what the comparisons need, applying Kafka's rules directly: it shares nothing with the
controller's log reader, loader or replay. Only the generated record decoders are common.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from protocol.generated.metadata import BY_API_KEY

_BATCH = struct.Struct(">qiibIhiqqqhii")  # through the record count: 61 bytes
NO_LEADER_CHANGE = -2
TOPIC_RESOURCE = 2


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def read_batches(data: bytes) -> list[tuple[int, bool, list[tuple[int, bytes | None]]]]:
    """(base offset, is control, [(offset, value)]) for each whole batch."""
    batches = []
    pos = 0
    while len(data) - pos >= _BATCH.size:
        (base, length, _epoch, _magic, _crc, attributes, _lod, _bts, _mts, _pid, _pe, _bs,
         count) = _BATCH.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        p = pos + _BATCH.size
        values = []
        for _ in range(count):
            size, p = _varint(data, p)
            stop = p + size
            p += 1  # attributes
            _, p = _varint(data, p)  # timestamp delta
            delta, p = _varint(data, p)
            key_len, p = _varint(data, p)
            p += max(key_len, 0)
            value_len, p = _varint(data, p)
            values.append((base + delta, data[p:p + value_len] if value_len >= 0 else None))
            p = stop
        batches.append((base, bool(attributes & 0x20), values))
        pos = end
    return batches


def decode_record(value: bytes):
    _, pos = _uvarint(value, 0)  # frame version
    api_key, pos = _uvarint(value, pos)
    version, pos = _uvarint(value, pos)
    record, _ = BY_API_KEY[("metadata", api_key)].decode(value, version, pos)
    return record


@dataclass
class Partition:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int


@dataclass
class Expected:
    topics: dict[str, bytes] = field(default_factory=dict)  # name -> id
    partitions: dict[tuple[bytes, int], Partition] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    brokers: dict[int, tuple[int, bool]] = field(default_factory=dict)  # id -> (epoch, fenced)
    next_producer_id: int | None = None

    def topic_name(self, topic_id: bytes) -> str:
        return next(name for name, tid in self.topics.items() if tid == topic_id)

    def apply(self, r) -> None:
        name = r.NAME
        if name == "TopicRecord":
            self.topics[r.name] = r.topic_id
        elif name == "PartitionRecord":
            self.partitions[(r.topic_id, r.partition_id)] = Partition(list(r.replicas), list(r.isr), r.leader,
                                                                      r.leader_epoch)
        elif name == "PartitionChangeRecord":
            p = self.partitions[(r.topic_id, r.partition_id)]
            if r.isr is not None:
                p.isr = list(r.isr)
            if r.replicas is not None:
                p.replicas = list(r.replicas)
            if r.leader != NO_LEADER_CHANGE:
                p.leader = r.leader
                p.leader_epoch += 1
        elif name == "RemoveTopicRecord":
            gone = self.topic_name(r.topic_id)
            del self.topics[gone]
            self.topic_configs.pop(gone, None)
            self.partitions = {k: v for k, v in self.partitions.items() if k[0] != r.topic_id}
        elif name == "ConfigRecord" and r.resource_type == TOPIC_RESOURCE:
            configs = self.topic_configs.setdefault(r.resource_name, {})
            if r.value is None:
                configs.pop(r.name, None)
            else:
                configs[r.name] = r.value
        elif name == "FeatureLevelRecord":
            if r.feature_level == 0:
                self.features.pop(r.name, None)
            else:
                self.features[r.name] = r.feature_level
        elif name == "RegisterBrokerRecord":
            self.brokers[r.broker_id] = (r.broker_epoch, r.fenced)
        elif name in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            self.brokers[r.id] = (self.brokers[r.id][0], name == "FenceBrokerRecord")
        elif name == "BrokerRegistrationChangeRecord" and r.fenced != 0:
            # fenced: 1 fences, -1 unfences, 0 leaves it
            self.brokers[r.broker_id] = (self.brokers[r.broker_id][0], r.fenced == 1)
        elif name == "UnregisterBrokerRecord":
            self.brokers.pop(r.broker_id, None)
        elif name == "ProducerIdsRecord":
            self.next_producer_id = r.next_producer_id


def read_directory(directory: Path) -> Expected:
    """The state of the newest snapshot, then every log record after it, with metadata
    transactions applied only once they end."""
    partition = directory / "__cluster_metadata-0"
    expected = Expected()
    start = 0
    snapshots = sorted(partition.glob("*-*.checkpoint"))
    if snapshots:
        for _, control, values in read_batches(snapshots[-1].read_bytes()):
            if not control:
                for _, value in values:
                    expected.apply(decode_record(value))
        start = int(snapshots[-1].name.split("-")[0])
    pending: list | None = None
    for segment in sorted(partition.glob("*.log")):
        for _, control, values in read_batches(segment.read_bytes()):
            if control:
                continue
            for offset, value in values:
                if offset < start:
                    continue
                record = decode_record(value)
                if record.NAME == "BeginTransactionRecord":
                    pending = []
                elif record.NAME == "EndTransactionRecord":
                    for r in pending or []:
                        expected.apply(r)
                    pending = None
                elif record.NAME == "AbortTransactionRecord":
                    pending = None
                elif pending is not None:
                    pending.append(record)
                else:
                    expected.apply(record)
    return expected


def metadata_files(directory: Path) -> list[Path]:
    """A Kafka metadata directory's log segments and snapshots, then its bootstrap checkpoint."""
    partition = directory / "__cluster_metadata-0"
    files = sorted(partition.glob("*.log")) + sorted(partition.glob("*.checkpoint"))
    bootstrap = directory / "bootstrap.checkpoint"
    return files + ([bootstrap] if bootstrap.exists() else [])
