"""How long one heavy thing holds the controller: the worst answer a bystander waits for.

Each scenario starts a real controller process, registers a live broker that heartbeats every
500 ms on its own connection, and a probe that sends ApiVersions every 100 ms on another; then
the heavy thing happens (sent from a separate process, so that its own work does not slow the
measuring event loop). One JSON line per scenario:

    {"name": "stalls.SCENARIO", "ours": worst probe ms, "anchor": the bound in ms, "unit": "ms",
     "ratio": worst probe / bound, "heartbeat_max_ms", "heartbeats_late", "live_broker_fenced", ...}

Scenarios (sizes are options, so that they run small on a busy machine and full on a big one):

- ``scram``: one DescribeUserScramCredentials naming --scram-users users;
- ``acls``: --acls ACLs, then one Metadata naming --metadata-topics topics from a user with no
  ACL, over a SASL_PLAINTEXT listener with the StandardAuthorizer;
- ``frame``: a frame of --frame-mib MiB sent before login on a SASL listener;
- ``restart``: a directory of --partitions partitions whose --dead-brokers registered brokers
  never come back, restarted: peak RSS per partition and the time until all are fenced, against
  twice the session timeout;
- ``quorum``: three voters with --quorum-topics topics, all restarted together: elections (the
  epochs the restart used) and the first acknowledged write after the first voter listens (no
  live broker: the leader is not known yet);
- ``fuzz``: --fuzz-s seconds of mutated requests from a separate process: hangs (no answer and
  no close within 5 s) and late heartbeats.

A heartbeat is late when its answer takes longer than the heartbeat interval.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import random
import shutil
import socket
import struct
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Awaitable, Callable

from protocol.client import ConnectionClosed, KafkaClient
from protocol.error_codes import Error
from protocol.api_keys import APIS
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import (
    BrokerRegistrationRequest, Feature, Listener)
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.generated.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.generated.messages.create_topics_request import (
    CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest)
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from protocol.generated.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest, UserName)
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.message import Message
from protocol.primitives import random_uuid
from server.client_connection import ConnectionLost, KafkaConnection
from server.controller.features import SUPPORTED_FEATURES
from server.metalog.snapshots import SnapshotId, write_snapshot
from server.metalog.segments import segment_name
from tools.bench import metalog
from tools.bench.fleet import rss_mb
from tools.bench.report import emit, note
from tools.controller_process import ControllerProcess, QuorumProcesses
from tools.processes import poll

HEARTBEAT_S = 0.5
PROBE_S = 0.1
REQUEST_TIMEOUT_S = 60.0
LIVE_BROKER = 100_000  # an id no generated broker has
HANG_S = 5.0
PROBE_BOUND_MS = 100.0
RESTART_PROBE_BOUND_MS = 200.0
SETTLE_S = 2.0  # watched after the heavy thing is answered
LIFETIME_S = 900

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
NOBODY, NOBODY_PASSWORD = "nobody", "nobody-secret"
SASL_PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" user_nobody="{NOBODY_PASSWORD}";'),
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}
Login = tuple[str, str] | None


# --- the bystanders -------------------------------------------------------------------------------

async def connect(port: int, client_id: str, login: Login) -> KafkaConnection:
    conn = await KafkaConnection.open("127.0.0.1", port, client_id, 10)
    if login is not None:
        user, password = login
        await conn.request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 10)
        answer = await conn.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2, 10)
        if getattr(answer, "error_code", 0):
            raise RuntimeError(f"login of {user} refused: {answer}")
    return conn


class Bystanders:
    """A live broker heartbeating every HEARTBEAT_S and a probe sending ApiVersions every
    PROBE_S, each on its own connection, with the worst answer each waited for."""

    def __init__(self, port: int, login: Login = None, broker: bool = True) -> None:
        self.port, self.login, self.with_broker = port, login, broker
        self.probe_max_ms = self.heartbeat_max_ms = 0.0
        self.probes = self.heartbeats = self.heartbeats_late = self.heartbeats_failed = 0
        self.probe_failures = 0
        self.unfenced = asyncio.Event()
        self.fenced = False  # fenced after it had been unfenced
        self.fence_records: dict[int, float] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.epoch = -1

    async def start(self, unfenced_timeout_s: float = 120.0) -> None:
        if self.with_broker:
            self._tasks.append(asyncio.ensure_future(self._broker()))
            await asyncio.wait_for(self.unfenced.wait(), unfenced_timeout_s)
        self._tasks.append(asyncio.ensure_future(self._probe()))

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def _probe(self) -> None:
        conn = await connect(self.port, "stalls-probe", self.login)
        while True:
            sent = time.perf_counter()
            try:
                await conn.request(ApiVersionsRequest(client_software_name="stalls-probe",
                                                      client_software_version="1"), 3, REQUEST_TIMEOUT_S)
            except (ConnectionLost, asyncio.TimeoutError):
                self.probe_failures += 1
                conn = await connect(self.port, "stalls-probe", self.login)
                continue
            took = time.perf_counter() - sent
            self.probes += 1
            self.probe_max_ms = max(self.probe_max_ms, took * 1000)
            await asyncio.sleep(max(0.0, PROBE_S - took))

    async def _broker(self) -> None:
        """Registers and heartbeats. It reports having replayed up to its own registration,
        which is all the controller asks before unfencing it; it fetches nothing, so that a
        huge metadata log costs this process nothing."""
        conn = await connect(self.port, "stalls-broker", self.login)
        registered = await conn.request(BrokerRegistrationRequest(
            broker_id=LIVE_BROKER, cluster_id=await self._cluster_id(), incarnation_id=random_uuid(),
            listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)],
            features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, (lo, hi) in SUPPORTED_FEATURES.items()], log_dirs=[random_uuid()]), 4, REQUEST_TIMEOUT_S)
        assert isinstance(registered, BrokerRegistrationResponse)
        if registered.error_code != Error.NONE:
            raise RuntimeError(f"the live broker's registration failed: {registered.error_code}")
        self.epoch = registered.broker_epoch
        while True:
            sent = time.perf_counter()
            try:
                answer = await conn.request(BrokerHeartbeatRequest(
                    broker_id=LIVE_BROKER, broker_epoch=self.epoch, current_metadata_offset=self.epoch),
                    1, REQUEST_TIMEOUT_S)
            except (ConnectionLost, asyncio.TimeoutError):
                self.heartbeats_failed += 1
                conn = await connect(self.port, "stalls-broker", self.login)
                continue
            took = time.perf_counter() - sent
            assert isinstance(answer, BrokerHeartbeatResponse)
            if answer.error_code != Error.NONE or (answer.is_fenced and self.unfenced.is_set()):
                self.fenced = True
            if not answer.is_fenced:
                self.unfenced.set()
            if self.unfenced.is_set():
                self.heartbeats += 1
                self.heartbeat_max_ms = max(self.heartbeat_max_ms, took * 1000)
                self.heartbeats_late += took > HEARTBEAT_S
            await asyncio.sleep(max(0.0, HEARTBEAT_S - took))

    async def _cluster_id(self) -> str:
        conn = await connect(self.port, "stalls-cluster-id", self.login)
        try:
            answer = await conn.request(DescribeClusterRequest(), 1, REQUEST_TIMEOUT_S)
        finally:
            conn.close()
        return str(getattr(answer, "cluster_id"))

    def figures(self) -> dict[str, Any]:
        return {"probe_max_ms": round(self.probe_max_ms, 1), "probes": self.probes,
                "probe_reconnects": self.probe_failures,
                "heartbeat_max_ms": round(self.heartbeat_max_ms, 1), "heartbeats": self.heartbeats,
                "heartbeats_late": self.heartbeats_late, "heartbeats_failed": self.heartbeats_failed,
                "live_broker_fenced": self.fenced}


async def watch(port: int, heavy: Callable[[], Awaitable[dict[str, Any]]], login: Login = None,
                broker: bool = True) -> dict[str, Any]:
    """The bystanders' figures while ``heavy`` runs and SETTLE_S after, with its own."""
    bystanders = Bystanders(port, login, broker)
    await bystanders.start()
    try:
        await asyncio.sleep(1.0)
        extra = await heavy()
        await asyncio.sleep(SETTLE_S)
    finally:
        bystanders.stop()
    return {**bystanders.figures(), **extra}


def in_another_process(fn: Callable[..., dict[str, Any]], *args: Any) -> Awaitable[dict[str, Any]]:
    """Run ``fn`` in a fresh interpreter: its encoding and decoding never slow the watchers."""
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    future = asyncio.get_running_loop().run_in_executor(pool, fn, *args)
    future.add_done_callback(lambda _: pool.shutdown(wait=False))
    return future


def client(port: int, login: Login) -> KafkaClient:
    c = KafkaClient("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    if login is not None:
        c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        c.request(SaslAuthenticateRequest(auth_bytes=f"\0{login[0]}\0{login[1]}".encode()), 2)
    return c


def timed_request(port: int, login: Login, request: Message, version: int) -> dict[str, Any]:
    with client(port, login) as c:
        sent = time.perf_counter()
        answer = c.request(request, version)
        return {"answered_ms": round((time.perf_counter() - sent) * 1000, 1), "answer": answer.NAME}


def emit_scenario(name: str, r: dict[str, Any], bound_ms: float, **extra: Any) -> None:
    figures = {k: v for k, v in r.items() if k != "answer"}
    emit(f"stalls.{name}", r["probe_max_ms"], bound_ms, "ms",
         anchor_is=f"the bound: worst probe <= {bound_ms:.0f} ms", **figures, **extra)


def controller(workdir: Path, properties: dict[str, str]) -> ControllerProcess:
    return ControllerProcess(workdir, {"metadata.max.idle.interval.ms": "0", **properties},
                             server_args=["--log-level", "WARNING"], lifetime_s=LIFETIME_S, start_timeout_s=600)


# --- (a) SCRAM, (b) ACLs, (c) a frame before login ----------------------------------------------

def scram(workdir: Path, users: int) -> None:
    proc = controller(workdir, {}).start()
    try:
        request = DescribeUserScramCredentialsRequest(users=[UserName(name=f"user-{i}") for i in range(users)])
        r = asyncio.run(watch(proc.port, lambda: in_another_process(timed_request, proc.port, None, request, 0)))
    finally:
        proc.stop()
    emit_scenario("scram describe", r, PROBE_BOUND_MS, users=users)


def create_acls(port: int, count: int) -> dict[str, Any]:
    with client(port, (ADMIN, ADMIN_PASSWORD)) as c:
        for start in range(0, count, 1000):
            c.request(CreateAclsRequest(creations=[AclCreation(
                resource_type=2, resource_name=f"topic-{i}", resource_pattern_type=3, principal=f"User:user-{i}",
                host="*", operation=3, permission_type=3) for i in range(start, min(count, start + 1000))]), 3)
    return {}


def acls(workdir: Path, count: int, topics: int) -> None:
    proc = controller(workdir, SASL_PROPERTIES).start()
    admin = (ADMIN, ADMIN_PASSWORD)
    try:
        create_acls(proc.port, count)
        request = MetadataRequest(topics=[MetadataRequestTopic(name=f"topic-{i}") for i in range(topics)],
                                  allow_auto_topic_creation=False)
        r = asyncio.run(watch(proc.port, lambda: in_another_process(
            timed_request, proc.port, (NOBODY, NOBODY_PASSWORD), request, 12), admin))
    finally:
        proc.stop()
    emit_scenario("acls metadata", r, PROBE_BOUND_MS, acls=count, topics=topics)


def big_frame(port: int, mib: int) -> dict[str, Any]:
    """Sends the size prefix, then the bytes until all are sent or the server closes."""
    size = mib * 1024 * 1024
    chunk = bytes(1024 * 1024)
    sent = 0
    began = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) as sock:
        try:
            sock.sendall(struct.pack(">i", size))
            while sent < size:
                sock.sendall(chunk)
                sent += len(chunk)
            sock.shutdown(socket.SHUT_WR)
            closed = sock.recv(1) == b""
        except OSError:
            closed = True
    return {"frame_bytes_sent": sent, "closed_by_server": closed,
            "frame_s": round(time.perf_counter() - began, 2)}


def frame(workdir: Path, mib: int) -> None:
    proc = controller(workdir, SASL_PROPERTIES).start()
    try:
        r = asyncio.run(watch(proc.port, lambda: in_another_process(big_frame, proc.port, mib),
                              (ADMIN, ADMIN_PASSWORD)))
        r["peak_rss_mb"] = round(peak_rss_mb(proc.pid), 1)
    finally:
        proc.stop()
    emit_scenario("frame before login", r, PROBE_BOUND_MS, frame_mib=mib)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


# --- (d) a restart with many partitions and dead brokers ------------------------------------------

def write_directory(proc: ControllerProcess, partitions: int) -> int:
    """The generated cluster of tools.bench.metalog as a snapshot: its 30 brokers registered
    and unfenced, ``partitions`` partitions in topics of 100."""
    proc.prepare()
    topics = math.ceil(partitions / metalog.PARTITIONS_PER_TOPIC)
    records = 1 + metalog.BROKERS + topics * (1 + metalog.PARTITIONS_PER_TOPIC)
    snapshot = SnapshotId(records, 1)
    directory = proc.data_dir / "__cluster_metadata-0"
    directory.mkdir(parents=True, exist_ok=True)
    write_snapshot(directory, snapshot, metalog.Dataset().snapshot_records(topics))
    (directory / segment_name(snapshot.end_offset)).touch()
    return topics * metalog.PARTITIONS_PER_TOPIC


def restart(workdir: Path, partitions: int, session_ms: int) -> None:
    proc = controller(workdir, {"broker.session.timeout.ms": str(session_ms)})
    began = time.perf_counter()
    partitions = write_directory(proc, partitions)
    note(f"stalls: wrote {partitions:,} partitions in {time.perf_counter() - began:.1f} s")
    dead = set(range(metalog.BROKERS))
    try:
        proc.start()
        listening = time.perf_counter()

        async def heavy() -> dict[str, Any]:
            # A broker is fenced once DescribeCluster, which lists the unfenced brokers from
            # committed state only, no longer names it.
            conn = await connect(proc.port, "stalls-cluster", None)
            try:
                while time.perf_counter() - listening < 20 * session_ms / 1000 + 600:
                    answer = await conn.request(DescribeClusterRequest(), 0, REQUEST_TIMEOUT_S)
                    if dead.isdisjoint(b.broker_id for b in answer.brokers):  # type: ignore[attr-defined]
                        return {"all_fenced_s": round(time.perf_counter() - listening, 2)}
                    await asyncio.sleep(0.1)
                return {"all_fenced_s": None}
            finally:
                conn.close()

        r = asyncio.run(watch(proc.port, heavy))
        rss = peak_rss_mb(proc.pid)
    finally:
        proc.stop()
    bound_s = 2 * session_ms / 1000
    emit_scenario(f"restart partitions={partitions}", r, RESTART_PROBE_BOUND_MS, partitions=partitions,
                  dead_brokers=len(dead), session_timeout_ms=session_ms,
                  fenced_within_ratio=None if r["all_fenced_s"] is None else round(r["all_fenced_s"] / bound_s, 2),
                  peak_rss_mb=round(rss, 1), peak_rss_bytes_per_partition=round(rss * 1024 * 1024 / partitions),
                  rss_ratio=round(rss * 1024 * 1024 / partitions / metalog.PEAK_RSS_TARGET, 2))


# --- (e) three voters restarted together --------------------------------------------------------

def leader_epoch(quorum: QuorumProcesses) -> tuple[int, int] | None:
    """(leader id, epoch) as some running voter answers DescribeQuorum."""
    for member in quorum.members.values():
        try:
            with KafkaClient(member.host, member.port, timeout=3) as c:
                answer = c.request(DescribeQuorumRequest(topics=[TopicData(
                    topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 1)
        except (OSError, ConnectionClosed):
            continue
        part = answer.topics[0].partitions[0]  # type: ignore[attr-defined]
        if part.error_code == Error.NONE and part.leader_id >= 0:
            return part.leader_id, part.leader_epoch
    return None


def create_topics(port: int, names: list[str]) -> bool:
    """Topics of one partition on broker 1; True if all were created."""
    with KafkaClient("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S) as c:
        answer = c.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=n, num_partitions=-1, replication_factor=-1,
            assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[1])]) for n in names],
            timeout_ms=30000), 7)
    return all(t.error_code == Error.NONE for t in answer.topics)  # type: ignore[attr-defined]


def quorum(workdir: Path, topics: int) -> None:
    # Broker 1 heartbeats once: its session must outlast creating every topic on it.
    voters = QuorumProcesses(workdir, 3, {"metadata.max.idle.interval.ms": "0", "broker.session.timeout.ms": "3600000"},
                             lifetime_s=LIFETIME_S, start_timeout_s=600).start()
    try:
        leader = voters.members[voters.wait_for_leader(timeout=60)]
        with KafkaClient(leader.host, leader.port, timeout=REQUEST_TIMEOUT_S) as c:
            # Broker 1 holds the topics' replicas: unfenced once, it stays so through the
            # restart until its session runs out, long after the first write.
            registered = c.request(BrokerRegistrationRequest(
                broker_id=1, cluster_id=leader.cluster_id or "", incarnation_id=random_uuid(),
                listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)],
                features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                          for n, (lo, hi) in SUPPORTED_FEATURES.items()], log_dirs=[random_uuid()]), 4)
            epoch = registered.broker_epoch  # type: ignore[attr-defined]
            c.request(BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch, current_metadata_offset=epoch), 1)
        for start in range(0, topics, 1000):
            assert create_topics(leader.port, [f"topic-{i}" for i in range(start, min(topics, start + 1000))])
        before = leader_epoch(voters)
        assert before is not None
        # Stopped together and started together, as an operator restarting the quorum does:
        # one after another, the first ones stopped would elect again among the others. The
        # children are started from this thread (they die with the thread that started them).
        with ThreadPoolExecutor(len(voters.members)) as pool:
            list(pool.map(lambda m: m.stop(), voters.members.values()))
        for member in voters.members.values():
            member.start_again_unwaited()
        listened = []
        waiting = list(voters.members.values())
        deadline = time.monotonic() + 600
        while waiting and time.monotonic() < deadline:
            for member in [m for m in waiting if m.listening()]:
                waiting.remove(member)
                listened.append(time.perf_counter())
            time.sleep(0.005)
        assert not waiting, "voters that never listened after the restart"
        listening = listened[0]

        def first_write() -> float | None:
            now = leader_epoch(voters)
            if now is None:
                return None
            try:
                if create_topics(voters.members[now[0]].port, [f"after-{time.perf_counter()}"]):
                    return time.perf_counter() - listening
            except (OSError, ConnectionClosed):
                pass
            return None
        written = poll(first_write, timeout=600, interval=0.01, message="a write acknowledged after the restart")
        after = leader_epoch(voters)
        assert after is not None
    finally:
        voters.stop()
    emit("stalls.quorum restart first write", written * 1000, 2000.0, "ms",
         anchor_is="the bound: first acknowledged write <= 2 s after the voters listen", topics=topics,
         elections=after[1] - before[1], epoch_before=before[1], epoch_after=after[1],
         measured_from="the first voter listening", all_listening_ms=round((listened[-1] - listening) * 1000, 1))


# --- (f) wire fuzz ---------------------------------------------------------------------------------

def fuzz(port: int, seconds: float, seed: int = 1) -> dict[str, Any]:
    """Valid requests of every API, default values, mutated: bytes flipped, cut or added,
    lengths overwritten. One frame per connection; a hang is neither an answer nor a close
    within HANG_S."""
    rng = random.Random(seed)
    templates = []
    encoder = KafkaClient.__new__(KafkaClient)
    encoder.client_id, encoder.correlation_id = "stalls-fuzz", 0
    for key, api in APIS.items():
        for version in range(api.request.VALID_VERSIONS[0], api.request.VALID_VERSIONS[1] + 1):
            try:
                templates.append(encoder.encode_request(api.request(), version)[0])
            except Exception:
                continue
    sent = hangs = answered = closed = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        data = bytearray(rng.choice(templates))
        for _ in range(rng.randint(1, 8)):
            what = rng.random()
            pos = rng.randrange(4, len(data)) if len(data) > 4 else 4
            if what < 0.5 and len(data) > 4:
                data[pos] = rng.randrange(256)
            elif what < 0.7:
                data[pos:pos] = rng.randbytes(rng.randint(1, 64))
            elif what < 0.85:
                del data[pos:pos + rng.randint(1, 16)]
            elif len(data) >= pos + 4:
                data[pos:pos + 4] = struct.pack(">i", rng.choice([-1, 0, 0x7FFFFFFF, rng.randrange(1 << 20)]))
        data[:4] = struct.pack(">i", len(data) - 4)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=HANG_S) as sock:
                sock.sendall(bytes(data))
                sock.shutdown(socket.SHUT_WR)
                if sock.recv(65536):
                    answered += 1
                else:
                    closed += 1
        except socket.timeout:
            hangs += 1
        except OSError:
            closed += 1
        sent += 1
    return {"fuzz_frames": sent, "hangs": hangs, "answered": answered, "closed": closed}


def wire_fuzz(workdir: Path, seconds: float) -> None:
    proc = controller(workdir, {}).start()
    try:
        r = asyncio.run(watch(proc.port, lambda: in_another_process(fuzz, proc.port, seconds)))
        r["controller_rss_mb"] = round(rss_mb(proc.pid), 1)
        r["controller_running"] = proc.running
    finally:
        proc.stop()
    emit_scenario("wire fuzz", r, PROBE_BOUND_MS, seconds=seconds)


# --- the suite -------------------------------------------------------------------------------------

SCENARIOS = ("scram", "acls", "frame", "restart", "quorum", "fuzz")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench stalls")
    parser.add_argument("--only", nargs="*", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--scram-users", type=int, default=16_000)
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--metadata-topics", type=int, default=5_000)
    parser.add_argument("--frame-mib", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--session-ms", type=int, default=9_000)
    parser.add_argument("--quorum-topics", type=int, default=120_000)
    parser.add_argument("--fuzz-s", type=float, default=90.0)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kraftwire-bench-stalls-"))
    try:
        for name in args.only:
            workdir = root / name
            if name == "scram":
                scram(workdir, args.scram_users)
            elif name == "acls":
                acls(workdir, args.acls, args.metadata_topics)
            elif name == "frame":
                frame(workdir, args.frame_mib)
            elif name == "restart":
                restart(workdir, args.partitions, args.session_ms)
            elif name == "quorum":
                quorum(workdir, args.quorum_topics)
            else:
                wire_fuzz(workdir, args.fuzz_s)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def run() -> None:
    main([])


if __name__ == "__main__":
    sys.exit(main())
