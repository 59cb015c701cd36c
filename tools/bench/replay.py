"""Validating a capture of controller traffic: the Spark job on 2 cores against tshark.

``run()`` starts a controller with ``--capture-file`` and plays a session of real traffic
against it with raw clients: brokers negotiate versions, register, heartbeat and fetch the
metadata log; an admin creates topics and asks for Metadata, DescribeTopicPartitions and
DescribeCluster. The session's connections, with the controller's own request and response
bytes, are then written again with the capture writer (new client ports, later timestamps,
connections of a round interleaved by time) until the file holds each size asked for: driving the
controller for the whole size would take far longer than reading it. Both readers then take
the same file in the same run:

    {"name": "replay.validate 100 MB capture (...)", "ours": MB/s, "anchor": MB/s, "unit": "MB/s", ...}

``ours`` is the Spark job (local[2], 2 cores: session start, decode, rules, Parquet tables,
summary and report), from nothing to the report as a user waits for it. ``anchor`` is
``tshark -r FILE -Y kafka -T fields -e kafka.api_key`` (with ``-d tcp.port==PORT,kafka``: the
controller does not listen on Kafka's registered port). Without tshark the anchor is null.
Beside the ratio, each line splits the job's time by its notes (session start, decoding
and writing the tables, summary, exit) and gives the decoding rate per core.

One more line, on the first size only, is the CPU that reading a gigabyte costs, the driver's
index and the decoding tasks' Python workers summed (the job's ``cpu_s`` figures), at local[2]
against local[1] on the same file: a ratio above 1 is work that grows with the cores.

    python -m tools.bench replay
    python -m tools.bench replay --sizes 50,200,1000
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.bench.report import emit, note
from tools.controller_process import ControllerProcess
from tools.processes import bounded_child
from tools.replay.job import ROOT

# What `make bench` runs: one capture where Spark's fixed costs still show, one where they do not.
DEFAULT_SIZES_MB = [100.0, 1000.0]
BROKERS = 12
ROUNDS = 30
TOPICS_PER_ROUND = 2
PARTITIONS = 6
HEARTBEATS_PER_ROUND = 4
CORES = 2
CHILD_LIFETIME_S = 300
TSHARK_TIMEOUT_S = 1800


# --- the session -------------------------------------------------------------------------------------

def record_session(workdir: Path) -> tuple[Path, int]:
    """A capture of one session of controller traffic, and the controller's port."""
    capture = workdir / "session.pcapng"
    controller = ControllerProcess(workdir / "controller",
                                   server_args=["--capture-file", str(capture), "--log-level", "WARNING"],
                                   lifetime_s=CHILD_LIFETIME_S, start_timeout_s=60).start()
    try:
        assert controller.cluster_id is not None, "an active controller has told its cluster id"
        play_session(controller.port, controller.cluster_id)
    finally:
        controller.stop()  # a clean stop closes the capture
    return capture, controller.port


def play_session(port: int, cluster_id: str) -> None:
    from protocol.client import KafkaClient
    from protocol.constants import EndpointType
    from protocol.generated.messages.api_versions_request import ApiVersionsRequest
    from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    from protocol.generated.messages.broker_registration_request import (
        BrokerRegistrationRequest, Feature, Listener)
    from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
    from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
    from protocol.generated.messages.describe_topic_partitions_request import (
        DescribeTopicPartitionsRequest, TopicRequest)
    from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
    from protocol.generated.messages.fetch_response import FetchResponse
    from protocol.generated.messages.metadata_request import MetadataRequest
    from protocol.primitives import METADATA_TOPIC_ID, random_uuid

    hello = ApiVersionsRequest(client_software_name="kraftwire-bench", client_software_version="1")
    admin = KafkaClient("127.0.0.1", port, client_id="bench-admin", timeout=60)
    brokers = {b: KafkaClient("127.0.0.1", port, client_id=f"broker-{b}", timeout=60) for b in range(1, BROKERS + 1)}
    try:
        epochs = {}
        for broker_id, client in brokers.items():
            client.request(hello, 3)
            response = client.request(BrokerRegistrationRequest(
                broker_id=broker_id, cluster_id=cluster_id, incarnation_id=random_uuid(),
                listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=20000 + broker_id)],
                features=[Feature(name="metadata.version", min_supported_version=7, max_supported_version=25)],
                rack=None, log_dirs=[random_uuid()]), 4)
            assert isinstance(response, BrokerRegistrationResponse)
            epochs[broker_id] = response.broker_epoch

        def heartbeats() -> None:
            for broker_id, client in brokers.items():
                client.request(BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epochs[broker_id],
                                                      current_metadata_offset=1 << 40), 1)

        offsets = dict.fromkeys(brokers, 0)

        def fetches() -> None:
            # Each broker asks for what it has not seen yet, as its metadata fetcher does.
            for broker_id, client in brokers.items():
                response = client.request(FetchRequest(
                    cluster_id=cluster_id, replica_state=ReplicaState(replica_id=broker_id), max_wait_ms=0,
                    min_bytes=0, max_bytes=8 << 20, topics=[FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[
                        FetchPartition(partition=0, fetch_offset=offsets[broker_id], partition_max_bytes=8 << 20)])]),
                    17)
                assert isinstance(response, FetchResponse)
                offsets[broker_id] = response.responses[0].partitions[0].high_watermark

        heartbeats()
        fetches()
        admin.request(hello, 3)
        names = []
        for round_ in range(ROUNDS):
            new = [f"bench-topic-{round_:03d}-{i}" for i in range(TOPICS_PER_ROUND)]
            admin.request(CreateTopicsRequest(topics=[
                CreatableTopic(name=name, num_partitions=PARTITIONS, replication_factor=3) for name in new]), 7)
            names += new
            for _ in range(HEARTBEATS_PER_ROUND):
                heartbeats()
            fetches()
            admin.request(MetadataRequest(topics=None), 12)
            admin.request(DescribeTopicPartitionsRequest(topics=[TopicRequest(name=n) for n in names]), 0)
            admin.request(DescribeClusterRequest(endpoint_type=EndpointType.BROKER), 1)
    finally:
        admin.close()
        for client in brokers.values():
            client.close()


# --- the capture -------------------------------------------------------------------------------------

def grow(session: Path, path: Path, size_bytes: int) -> int:
    """Write the session's connections again and again into `path` until it holds `size_bytes`;
    returns how many rounds were written."""
    from captures import pcapng_writer
    from tools.replay.flows import FlowFrame, FlowStart, kafka_flows
    from tools.replay.framing import REQUEST

    starts: dict[str, FlowStart] = {}
    frames: list[FlowFrame] = []
    for item in kafka_flows(session, "session"):
        if type(item) is FlowStart:
            starts[item.flow] = item
        elif type(item) is FlowFrame:
            frames.append(item)
    first = min(s.timestamp_ns for s in starts.values())
    span = max(f.timestamp_ns for f in frames) - first + 1_000_000
    order = list(starts)
    rounds = 0
    with open(path, "wb") as out, pcapng_writer.open(out) as writer:
        while out.tell() < size_bytes:
            shift = rounds * span
            conns = {}
            for n, flow in enumerate(order):
                start = starts[flow]
                client_host = start.client.rpartition(":")[0]
                server_host, _, server_port = start.server.rpartition(":")
                client_port = 1024 + (rounds * len(order) + n) % 64000
                conns[flow] = writer.connection((client_host, client_port), (server_host, int(server_port)),
                                                start.timestamp_ns + shift)
            last = {}
            # In capture order, so the connections of a round interleave as the controller served them.
            for f in frames:
                data = len(f.data).to_bytes(4, "big") + f.data
                if f.direction == REQUEST:
                    conns[f.flow].client_to_server(data, f.timestamp_ns + shift)
                else:
                    conns[f.flow].server_to_client(data, f.timestamp_ns + shift)
                last[f.flow] = f.timestamp_ns + shift
            for flow, conn in conns.items():
                conn.close(last.get(flow, starts[flow].timestamp_ns + shift) + 1000)
            rounds += 1
    return rounds


# --- the readers -------------------------------------------------------------------------------------

# The parts of the job's time, in order, each with what the job's note that opens it begins
# with: the session's start opens with the command, and the exit with the note "done".
PARTS = (("session_start_s", None), ("decode_s", "reading"), ("summary_s", "summarising"), ("exit_s", "done"))


def time_spark(path: Path, workdir: Path, cores: int = CORES) -> tuple[float, dict[str, float], dict[str, Any]]:
    """(seconds from the command to its exit, as a user waits for `python -m tools.replay
    validate`, JVM and session start included; how they split between the session's start,
    decoding (which writes the tables), the summary and the exit, from the job's notes; the job's
    figures). A child process each time: a JVM this process already started would make every
    later start look free."""
    out = workdir / "out"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tools.replay", "validate", str(path), "--out", str(out), "--master", f"local[{cores}]",
         "--figures", str(workdir / "figures.json")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=TSHARK_TIMEOUT_S,
        preexec_fn=bounded_child(TSHARK_TIMEOUT_S))
    elapsed = time.monotonic() - started
    if result.returncode not in (0, 1):
        raise RuntimeError(f"the replay job failed: {result.stderr[-2000:]}")
    # Each note says when its part began; the job's first comes once the session is up.
    began = [0.0]
    for _, opening in PARTS[1:]:
        found = re.search(rf"replay \[\s*([\d.]+) s\]: {opening}", result.stderr)
        began.append(float(found.group(1)) if found else float("nan"))
    ends = began[1:] + [elapsed]
    split = {part: round(ends[i] - began[i], 2) for i, (part, _) in enumerate(PARTS)}
    return elapsed, split, json.loads((workdir / "figures.json").read_text())


def time_tshark(path: Path, port: int) -> tuple[float, int] | None:
    """(seconds, Kafka messages listed), or None without tshark."""
    tshark = shutil.which("tshark")
    if tshark is None:
        return None
    started = time.monotonic()
    result = subprocess.run(
        [tshark, "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", "kafka", "-T", "fields", "-e", "kafka.api_key"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=TSHARK_TIMEOUT_S, check=True)
    elapsed = time.monotonic() - started
    return elapsed, sum(len(line.split(b",")) for line in result.stdout.splitlines())


def run(sizes_mb: list[float] | None = None) -> None:
    """One line per capture size; past the first, how much longer the job took than in
    proportion to the size (1.0: linear)."""
    with tempfile.TemporaryDirectory(prefix="kraftwire-bench-replay-") as tmp:
        workdir = Path(tmp)
        session, port = record_session(workdir)
        # A user's first local run writes the JVM's class archive, which every later one maps
        # (tools/replay/class_archive.py): the timed runs are the later ones.
        time_spark(session, workdir)
        first: tuple[float, float] | None = None
        for size_mb in sizes_mb or DEFAULT_SIZES_MB:
            started = time.monotonic()
            path = workdir / "controller-traffic.pcapng"
            rounds = grow(session, path, int(size_mb * 1e6))
            mb = path.stat().st_size / 1e6
            note(f"replay: {mb:.1f} MB capture ({rounds} rounds of a {session.stat().st_size / 1e6:.2f} MB session) "
                 f"in {time.monotonic() - started:.1f} s")
            job_s, split, figures = time_spark(path, workdir)
            note(f"replay: Spark {job_s:.1f} s ({', '.join(f'{k} {v}' for k, v in split.items())}), "
                 f"{figures['totals']['frames']} frames, {figures['totals']['violations']} violations")
            theirs = time_tshark(path, port)
            if first is None:
                cpu_line(path, workdir, mb, figures)
            first = first or (mb, job_s)
            extra = dict(capture_mb=round(mb, 1), frames=figures["totals"]["frames"],
                         violations=figures["totals"]["violations"], job_s=round(job_s, 2), **split,
                         decode_mb_s_per_core=round(mb / split["decode_s"] / CORES, 2),
                         decode_mb_per_task_cpu_s=round(mb / figures["cpu_s"]["tasks"], 2),
                         cpu_s_per_gb=round(sum(figures["cpu_s"].values()) / mb * 1000, 1),
                         ours_cores=CORES, anchor_cores=1,
                         s_per_gb=round(job_s / mb * 1000, 1),
                         growth_vs_linear=round((job_s / first[1]) / (mb / first[0]), 3))
            name = f"replay.validate {size_mb:g} MB capture (Spark local[{CORES}], session start included)"
            anchor_is = "tshark -Y kafka -T fields (1 core) on the same file"
            if theirs is None:
                emit(name, mb / job_s, None, "MB/s", anchor_is=anchor_is, note="tshark is not installed", **extra)
            else:
                tshark_s, messages = theirs
                emit(name, mb / job_s, mb / tshark_s, "MB/s", anchor_is=anchor_is, tshark_s=round(tshark_s, 2),
                     tshark_s_per_gb=round(tshark_s / mb * 1000, 1), tshark_messages=messages, **extra)
            path.unlink()


def cpu_line(path: Path, workdir: Path, mb: float, figures: dict[str, Any]) -> None:
    """CPU seconds per GB of the index and the decoding tasks, at local[CORES] (from `figures`)
    against local[1] on the same file."""
    _, _, alone = time_spark(path, workdir, 1)
    per_gb = {cores: sum(f["cpu_s"].values()) / mb * 1000 for cores, f in ((CORES, figures), (1, alone))}
    emit(f"replay.cpu {mb:.0f} MB capture (CPU s per GB: index and decoding tasks, local[{CORES}] against local[1])",
         per_gb[CORES], per_gb[1], "CPU s/GB", anchor_is="the same job at local[1]",
         **{f"index_s_local{c}": f["cpu_s"]["index"] for c, f in ((CORES, figures), (1, alone))},
         **{f"tasks_s_local{c}": f["cpu_s"]["tasks"] for c, f in ((CORES, figures), (1, alone))})


def _sizes(text: str) -> list[float]:
    try:
        return [float(size) for size in text.split(",") if size]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be comma-separated megabytes, not {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench replay")
    parser.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES_MB, help="capture sizes in MB (default 100,1000)")
    args = parser.parse_args(argv)
    run(args.sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
