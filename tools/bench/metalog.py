"""Loading a 1,000,000-partition metadata log cold, as the controller does at start-up.

The data is generated directly as records: 30 RegisterBrokerRecords, 10,000 TopicRecords and
1,000,000 PartitionRecords (replication factor 3, replicas, ISR and directories) written as a
snapshot checkpoint with server.metalog.snapshots, followed by log segments holding ISR changes
and new topics. A fresh interpreter then constructs ControllerServer on that directory - log
recovery (CRC of every segment batch), snapshot read (CRC and decoding), replay into
QuorumController, then the log after the snapshot - and reports how long that took and the
peak RSS it reached. The server pauses CPython's cyclic collector for the load by itself, so
there is no separate run without it.

Anchor of the records/s line: kafka-python 3's schema engine decoding the record payloads (after the three-byte
metadata frame) of a sample of the very same records, read from the same snapshot file: decoding
only, without batch parsing, CRCs or replay, so the anchor does strictly less work per record
than the measured load. A second line compares decoding alone on both sides.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from protocol.constants import LeaderRecoveryState
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.register_broker_record import BrokerEndpoint, BrokerFeature, RegisterBrokerRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.primitives import read_uvarint
from protocol.records import parse_metadata_record, record_values, read_batch_header
from server.controller.result import VersionedRecord
from server.metalog.commit_path import encode_records
from server.metalog.segments import MetadataLog, segment_name
from server.metalog.snapshots import SnapshotId, write_snapshot
from tools.bench.kafka_python_engine import kafka_python_class
from tools.bench.report import emit, note
from tools.broker.broker import PLAINTEXT

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
RELEASE = "4.0-IV3"  # metadata.version 25: registrations v3, partition records v2
BROKERS = 30
TOPICS = 10_000
PARTITIONS_PER_TOPIC = 100  # 1,000,000 partitions
RF = 3
SUFFIX_TOPICS = 100
SUFFIX_PARTITIONS = 10
ISR_BATCHES = 200
ISR_CHANGES_PER_BATCH = 50
SEGMENT_BYTES = 256 * 1024
ANCHOR_SAMPLE = 60_000
LOAD_TARGET_S = 5.0
PEAK_RSS_TARGET = 1024  # bytes per partition


def _uuid(rng: random.Random) -> bytes:
    return rng.getrandbits(128).to_bytes(16, "big")


class Dataset:
    """The generated cluster: broker log dirs and topic ids, deterministic per seed."""

    def __init__(self, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.rng = rng
        self.log_dirs = {b: _uuid(rng) for b in range(BROKERS)}
        self.incarnations = {b: _uuid(rng) for b in range(BROKERS)}
        self.topic_ids = [_uuid(rng) for _ in range(TOPICS + SUFFIX_TOPICS)]

    def replicas(self, topic: int, partition: int) -> list[int]:
        first = (topic * 7 + partition) % BROKERS
        spread = topic % (BROKERS - RF + 1)  # distinct replicas, spread differently per topic
        return [first] + [(first + spread + i) % BROKERS for i in range(1, RF)]

    def partition(self, topic: int, partition: int) -> PartitionRecord:
        replicas = self.replicas(topic, partition)
        assert len(set(replicas)) == RF
        return PartitionRecord(
            partition_id=partition, topic_id=self.topic_ids[topic], replicas=replicas, isr=list(replicas),
            removing_replicas=[], adding_replicas=[], leader=replicas[0],
            leader_recovery_state=LeaderRecoveryState.RECOVERED,
            leader_epoch=1 + partition % 5, partition_epoch=2 + partition % 7,
            directories=[self.log_dirs[b] for b in replicas])

    def snapshot_records(self, topics: int = TOPICS) -> Iterator[VersionedRecord]:
        """The state as the controller's own snapshot lists it: features, brokers, the first
        ``topics`` topics."""
        yield FeatureLevelRecord(name="metadata.version", feature_level=25), 0
        for b in range(BROKERS):
            yield RegisterBrokerRecord(
                broker_id=b, incarnation_id=self.incarnations[b], broker_epoch=1 + b,
                end_points=[BrokerEndpoint(name="PLAINTEXT", host=f"broker-{b}.bench", port=9092,
                                           security_protocol=PLAINTEXT)],
                features=[BrokerFeature(name="metadata.version", min_supported_version=7,
                                        max_supported_version=25)],
                rack=f"rack-{b % 3}", fenced=False, in_controlled_shutdown=False,
                log_dirs=[self.log_dirs[b]]), 3
        for t in range(topics):
            yield TopicRecord(name=f"topic-{t:05d}", topic_id=self.topic_ids[t]), 0
            for p in range(PARTITIONS_PER_TOPIC):
                yield self.partition(t, p), 2

    def suffix_batches(self) -> Iterator[list[VersionedRecord]]:
        """The log after the snapshot: ISR shrinks of random partitions, then new topics."""
        rng = random.Random(11)
        for _ in range(ISR_BATCHES):
            batch: list[VersionedRecord] = []
            for _ in range(ISR_CHANGES_PER_BATCH):
                t, p = rng.randrange(TOPICS), rng.randrange(PARTITIONS_PER_TOPIC)
                replicas = self.replicas(t, p)
                batch.append((PartitionChangeRecord(partition_id=p, topic_id=self.topic_ids[t],
                                                    isr=replicas[:2]), 0))
            yield batch
        for t in range(TOPICS, TOPICS + SUFFIX_TOPICS):
            yield [(TopicRecord(name=f"topic-{t:05d}", topic_id=self.topic_ids[t]), 0)] + \
                  [(self.partition(t, p), 2) for p in range(SUFFIX_PARTITIONS)]


def snapshot_record_count() -> int:
    return 1 + BROKERS + TOPICS * (1 + PARTITIONS_PER_TOPIC)


def write_dataset(data_dir: Path) -> tuple[Path, SnapshotId, int]:
    """Format ``data_dir`` for the controller and write the snapshot and the log after it;
    returns the config file, the snapshot id and the number of suffix records."""
    from server.config import load_config
    from tools.storage import format_dirs

    config_path = data_dir.parent / "server.properties"
    config_path.write_text(
        "process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
        "listeners=CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n"
        f"metadata.log.dir={data_dir}\nmetadata.log.segment.bytes={SEGMENT_BYTES}\n"
        # Large enough that loading never triggers a snapshot of its own.
        "metadata.log.max.record.bytes.between.snapshots=1099511627776\n", encoding="utf-8")
    config = load_config(config_path)
    format_dirs(config, CLUSTER_ID, RELEASE)
    data = Dataset()
    snapshot = SnapshotId(snapshot_record_count(), 1)
    partition_dir = data_dir / "__cluster_metadata-0"
    partition_dir.mkdir(parents=True, exist_ok=True)
    write_snapshot(partition_dir, snapshot, data.snapshot_records())
    # The log continues from the snapshot: its first segment is named after that offset.
    (partition_dir / segment_name(snapshot.end_offset)).touch()
    log = MetadataLog.open(data_dir, SEGMENT_BYTES)
    assert log.start_offset == snapshot.end_offset
    written = 0
    for batch in data.suffix_batches():
        log.append([encode_records(batch, log.end_offset, 1, 1_700_000_000_000)])
        written += len(batch)
    log.close()
    return config_path, snapshot, written


# --- the cold load, in a fresh interpreter ------------------------------------------------------------

def load_cold(config_path: Path) -> dict[str, float]:
    """Construct ControllerServer as ``python -m server`` does and time it, wall clock and CPU,
    with the snapshot read and the log replay timed on their own."""
    from server.config import load_config

    started = time.perf_counter()
    import server.app  # noqa: F401 - imports are part of a cold start

    # The snapshot is read and CRC-checked whole, then decoded while it is replayed.
    phases = {"snapshot_check_s": 0.0, "log_replay_s": 0.0}

    def timed(owner: object, name: str, phase: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                phases[phase] += time.perf_counter() - began

        setattr(owner, name, wrapper)

    timed(server.app, "load_latest_snapshot", "snapshot_check_s")
    timed(server.app.MetadataLoader, "raw_batch", "log_replay_s")
    imported = time.perf_counter()
    config = load_config(config_path)
    cpu = time.process_time()
    srv = server.app.ControllerServer(config)
    loaded = time.perf_counter()
    cpu = time.process_time() - cpu
    qc = srv.controller
    result = {
        "import_s": imported - started,
        "load_s": loaded - imported,
        "load_cpu_s": cpu,
        **phases,
        "snapshot_replay_s": loaded - imported - sum(phases.values()),
        "partitions": qc.replication.partition_count,
        "topics": len(qc.replication.topics),
        "brokers": len(qc.cluster.brokers),
        "next_offset": qc.next_offset,
        "segments": len(srv.log.segments),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    # What one full pass of the cyclic collector costs once the image is loaded: the pause
    # the event loop would take whenever the collector decides on a full collection.
    began = time.perf_counter()
    gc.collect()
    result["full_collection_s"] = time.perf_counter() - began
    srv.replication.close()
    srv.log.close()
    return result


def _load_in_a_fresh_process(config_path: Path) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "tools.bench.metalog", "--load-cold", str(config_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"the cold load failed:\n{completed.stderr}")
    cold = json.loads(completed.stdout.strip().splitlines()[-1])
    expected_partitions = TOPICS * PARTITIONS_PER_TOPIC + SUFFIX_TOPICS * SUFFIX_PARTITIONS
    if (cold["partitions"], cold["topics"], cold["brokers"]) != \
            (expected_partitions, TOPICS + SUFFIX_TOPICS, BROKERS):
        raise SystemExit(f"the loaded controller does not hold the generated cluster: {cold}")
    return cold


# --- the anchor --------------------------------------------------------------------------------------

def sample_values(snapshot_path: Path, count: int) -> list[bytes]:
    """Record values from the middle of the snapshot file: the same bytes the load decodes,
    in the snapshot's own mix of topic and partition records."""
    data = snapshot_path.read_bytes()
    pos = len(data) // 3
    # Walk from the start to a batch boundary at or after a third of the file.
    p = 0
    while p < pos:
        p += read_batch_header(data, p).size
    values: list[bytes] = []
    while len(values) < count and p < len(data):
        header, records = record_values(data, p)
        if not header.is_control:
            values.extend(v for _, v in records if v is not None)
        p += header.size
    return values[:count]


def decode_with_kafka_python(values: list[bytes]) -> float:
    """Records per second kafka-python decodes; checks it reads what we read."""
    classes: dict[int, type[Any]] = {}
    from protocol.records import _record_classes

    ours = _record_classes()
    prepared = []
    for value in values:
        _, pos = read_uvarint(value, 0)
        api_key, pos = read_uvarint(value, pos)
        version, pos = read_uvarint(value, pos)
        if api_key not in classes:
            classes[api_key] = kafka_python_class(ours[api_key].NAME, folder="metadata")
        prepared.append((classes[api_key], value[pos:], version))
    first = prepared[-1]
    theirs = first[0].decode(first[1], version=first[2], header=False)
    mine, _ = parse_metadata_record(values[-1])
    assert isinstance(mine, PartitionRecord), "the sample ends in a partition record"
    if list(theirs.replicas) != mine.replicas or theirs.partition_id != mine.partition_id:
        raise SystemExit("kafka-python and kraftwire decode the records differently; refusing to time them")
    best = 0.0
    for _ in range(2):
        started = time.process_time()
        for cls, payload, version in prepared:
            cls.decode(payload, version=version, header=False)
        best = max(best, len(prepared) / (time.process_time() - started))
    return best


def decode_with_ours(values: list[bytes]) -> float:
    best = 0.0
    for _ in range(3):
        started = time.process_time()
        for value in values:
            parse_metadata_record(value)
        best = max(best, len(values) / (time.process_time() - started))
    return best


# --- the suite ---------------------------------------------------------------------------------------

def run() -> None:
    work = Path(tempfile.mkdtemp(prefix="kraftwire-bench-metalog-"))
    try:
        started = time.perf_counter()
        data_dir = work / "data"
        config_path, snapshot, suffix = write_dataset(data_dir)
        snapshot_path = data_dir / "__cluster_metadata-0" / snapshot.file_name
        size = snapshot_path.stat().st_size
        note(f"metalog: wrote {snapshot.end_offset:,} snapshot records ({size:,} bytes) and {suffix:,} log "
             f"records in {time.perf_counter() - started:.1f}s")

        cold = _load_in_a_fresh_process(config_path)
        replayed = snapshot.end_offset + suffix
        values = sample_values(snapshot_path, ANCHOR_SAMPLE)
        anchor = decode_with_kafka_python(values)
        ours_decode = decode_with_ours(values)

        # Rates in CPU seconds: the machine is shared, and the load and the anchor run at
        # different moments; CPU time is what either side spends, whoever else is running.
        emit("metalog.load records replayed/s (snapshot + log, cold, CPU time)", replayed / cold["load_cpu_s"],
             anchor, "records/s", anchor_is="kafka-python decoding the record payloads only (no batches, "
             "CRCs or replay), a sample of the same records", records=replayed)
        emit("metalog.decode metadata records, generic decoder (CPU time)", ours_decode, anchor, "records/s",
             anchor_is="kafka-python decoding the same record payloads", sample=len(values))
        emit("metalog.snapshot size 1M partitions", size, None, "bytes", anchor_is="none",
             records=snapshot.end_offset, bytes_per_partition=round(size / (TOPICS * PARTITIONS_PER_TOPIC), 1))
        emit("metalog.load time 1M partitions (snapshot + log, cold, wall clock)", cold["load_s"], LOAD_TARGET_S,
             "s", anchor_is=f"the {LOAD_TARGET_S:.0f} s target (lower is better)", cpu_s=round(cold["load_cpu_s"], 2),
             snapshot_check_s=round(cold["snapshot_check_s"], 2),
             snapshot_replay_s=round(cold["snapshot_replay_s"], 2), log_replay_s=round(cold["log_replay_s"], 2),
             partitions=cold["partitions"], import_s=round(cold["import_s"], 3),
             max_rss_mb=round(cold["max_rss_mb"]), segments=cold["segments"],
             full_collection_s=round(cold["full_collection_s"], 2))
        emit("metalog.load peak RSS per partition (1M partitions, cold)",
             cold["max_rss_mb"] * 1024 * 1024 / cold["partitions"], PEAK_RSS_TARGET, "bytes/partition",
             anchor_is=f"the {PEAK_RSS_TARGET} bytes target (lower is better)", max_rss_mb=round(cold["max_rss_mb"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.metalog")
    parser.add_argument("--load-cold", type=Path, help="(internal) load this config's log and print timings")
    args = parser.parse_args(argv)
    if args.load_cold is not None:
        print(json.dumps(load_cold(args.load_cold)), flush=True)
        return 0
    run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
