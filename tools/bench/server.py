"""Heartbeat round trips against the controller, next to a bare uvloop echo server.

``run()`` starts the controller as a subprocess on a free loopback port, registers BROKERS
brokers and unfences them, then drives steady-state BrokerHeartbeats (no records: the answer
goes out at once) from a load generator in a separate process: asyncio + uvloop, raw sockets,
CONNECTIONS connections with DEPTH requests in flight on each, closed loop. 100 x 32 is where
the controller's rate stops rising; 1000 connections x 1 in flight measures the generator
rather than either server on a small machine. The same generator, with the same heartbeat
frames, then drives a bare uvloop server that echoes size-prefixed frames. Both are measured
in the same run, in alternating rounds, and the best round of each is reported:

    {"name": "server.heartbeat_rtt", "ours": req/s, "anchor": echo req/s, "ratio": ...,
     "p50_ms", "p99_ms", "anchor_p50_ms", "anchor_p99_ms", ...}

Every process is started here and stopped by its PID; each also dies with this process and
after a hard deadline.

    python -m tools.bench server                      # the suite
    python -m tools.bench.server --connections 1000 --depth 1
"""

from __future__ import annotations

import argparse
import array
import asyncio
import functools
import json
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.bench.report import emit, note
from tools.controller_process import ControllerProcess
from tools.processes import bounded_child, free_port, stop_child

if TYPE_CHECKING:
    from protocol.client import KafkaClient
    from protocol.generated.messages.broker_registration_request import Feature

ROOT = Path(__file__).resolve().parents[2]
BROKERS = 1000
CONNECTIONS = 100
DEPTH = 32
WARMUP_S = 1.0
MEASURE_S = 2.5
ROUNDS = 2
CHILD_LIFETIME_S = 120
HEARTBEAT_V = 1
# A BrokerHeartbeat v1 answer: size(4) correlation id(4) tagged fields(1) throttle(4) error(2).
ERROR_CODE_AT = 13


# --- processes -----------------------------------------------------------------------------------


def _spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, preexec_fn=bounded_child(CHILD_LIFETIME_S),
                            stdin=subprocess.DEVNULL, **kwargs)


def _wait_for_line(proc: subprocess.Popen[bytes], path: Path, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        for line in text.splitlines():
            if needle in line:
                return line
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}:\n{text}")
        time.sleep(0.02)
    raise RuntimeError(f"{proc.args!r} did not print {needle!r} in {timeout}s")


def start_controller(workdir: Path) -> ControllerProcess:
    """A single-voter controller with a long session timeout (no fencing during the run)."""
    return ControllerProcess(workdir / "controller", {"broker.session.timeout.ms": "120000"},
                             server_args=["--log-level", "WARNING"], lifetime_s=CHILD_LIFETIME_S,
                             start_timeout_s=30).start()


def start_echo(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    out = workdir / "echo.out"
    with open(out, "wb") as stdout:
        proc = _spawn(["-m", "tools.bench.server", "echo", str(port)], stdout=stdout)
    _wait_for_line(proc, out, "echoing")
    return proc, port


# --- brokers -------------------------------------------------------------------------------------

def broker_features(client: KafkaClient) -> list[Feature]:
    """What a broker registering here says it supports: what the controller supports
    (ApiVersions v4 lists every feature, those starting at level 0 included), since a Kafka
    controller refuses a broker that lacks a finalized feature."""
    from protocol.generated.messages.api_versions_request import ApiVersionsRequest
    from protocol.generated.messages.api_versions_response import ApiVersionsResponse
    from protocol.generated.messages.broker_registration_request import Feature

    versions = client.request(ApiVersionsRequest(client_software_name="bench", client_software_version="1"), 4)
    assert isinstance(versions, ApiVersionsResponse)
    return [Feature(name=f.name, min_supported_version=f.min_version, max_supported_version=f.max_version)
            for f in versions.supported_features]


def register_brokers(port: int, cluster_id: str, count: int) -> list[bytes]:
    """Register and unfence ``count`` brokers; returns one steady-state heartbeat frame each."""
    from protocol.client import KafkaClient
    from protocol.generated.messages import ApiKey
    from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
    from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest, Listener
    from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
    from protocol.primitives import random_uuid

    with KafkaClient("127.0.0.1", port, client_id="bench", timeout=60) as client:
        features = broker_features(client)
        sent = []
        for broker_id in range(1, count + 1):
            frame, cid = client.encode_request(BrokerRegistrationRequest(
                broker_id=broker_id, cluster_id=cluster_id, incarnation_id=random_uuid(),
                listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=20000 + broker_id)],
                features=features, rack=None,
                log_dirs=[random_uuid()]), 4)
            client.sock.sendall(frame)
            sent.append(cid)
        epochs = {}
        for broker_id, cid in enumerate(sent, start=1):
            response = client.receive(ApiKey.BROKER_REGISTRATION, 4, cid)
            assert isinstance(response, BrokerRegistrationResponse)
            if response.error_code:
                raise RuntimeError(f"broker {broker_id}: registration failed with {response.error_code}")
            epochs[broker_id] = response.broker_epoch

        def heartbeat(broker_id: int) -> BrokerHeartbeatRequest:
            return BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epochs[broker_id],
                                          current_metadata_offset=epochs[broker_id])

        sent = [client.send(heartbeat(b), HEARTBEAT_V) for b in epochs]
        for broker_id, cid in zip(epochs, sent):
            beat = client.receive(ApiKey.BROKER_HEARTBEAT, HEARTBEAT_V, cid)
            assert isinstance(beat, BrokerHeartbeatResponse)
            if beat.error_code or beat.is_fenced:
                raise RuntimeError(f"broker {broker_id} was not unfenced: {beat}")
        # The load generator reuses one frame per broker; the correlation id is the broker id.
        frames = []
        for broker_id in epochs:
            client.correlation_id = broker_id - 1
            frames.append(client.encode_request(heartbeat(broker_id), HEARTBEAT_V)[0])
        return frames


def check_heartbeats(port: int, frames: list[bytes], sample: int = 50) -> None:
    """After the load: the brokers are still registered and unfenced."""
    from protocol.client import KafkaClient
    from protocol.generated.messages import ApiKey
    from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse

    with KafkaClient("127.0.0.1", port, client_id="bench-check", timeout=30) as client:
        for frame in frames[:: max(1, len(frames) // sample)]:
            client.sock.sendall(frame)
            cid = struct.unpack_from(">i", frame, 8)[0]
            response = client.receive(ApiKey.BROKER_HEARTBEAT, HEARTBEAT_V, cid)
            assert isinstance(response, BrokerHeartbeatResponse)
            if response.error_code or response.is_fenced:
                raise RuntimeError(f"heartbeat {cid} after the load: {response}")


# --- the load generator (a separate process) -----------------------------------------------------

@dataclass(slots=True)
class _LoadStats:
    """Shared by every connection of the load generator."""

    latencies: array.array[float] = field(default_factory=lambda: array.array("d"))
    count: int = 0
    errors: int = 0
    mismatches: int = 0
    recording: bool = False
    running: bool = True


class _LoadConnection(asyncio.Protocol):
    def __init__(self, frames: list[bytes], depth: int, stats: _LoadStats, corr_at: int,
                 check_error: bool) -> None:
        self.frames = frames
        self.depth = depth
        self.stats = stats
        self.corr_at = corr_at
        self.check_error = check_error
        self.next = 0
        self.buf = bytearray()
        self.in_flight: deque[tuple[float, bytes]] = deque()  # (sent at, correlation id)
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport is a Transport, but uvloop's do not subclass
        # asyncio.Transport, so there is no isinstance to narrow it with.
        self.transport = transport  # type: ignore[assignment]
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)

    def send(self, n: int) -> None:
        now = time.perf_counter()
        frames, out, count = self.frames, [], len(self.frames)
        for _ in range(n):
            frame = frames[self.next]
            self.next = (self.next + 1) % count
            out.append(frame)
            self.in_flight.append((now, frame[8:12]))
        assert self.transport is not None, "sending before the connection is made"
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        now = time.perf_counter()
        stats, in_flight, corr_at = self.stats, self.in_flight, self.corr_at
        recording = stats.recording
        pos, n, end = 0, 0, len(buf)
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if end - pos - 4 < size:
                break
            sent_at, corr = in_flight.popleft()
            if buf[pos + corr_at:pos + corr_at + 4] != corr:
                stats.mismatches += 1
            if self.check_error and buf[pos + ERROR_CODE_AT:pos + ERROR_CODE_AT + 2] != b"\0\0":
                stats.errors += 1
            if recording:
                stats.latencies.append(now - sent_at)
            pos += 4 + size
            n += 1
        if pos:
            del buf[:pos]
        if n:
            if recording:
                stats.count += n
            if stats.running:
                self.send(n)
            elif not in_flight and self.transport is not None:
                self.transport.close()


async def _load(spec: dict[str, Any]) -> dict[str, float]:
    frames = [bytes.fromhex(f) for f in spec["frames"]]
    connections, depth = spec["connections"], spec["depth"]
    stats = _LoadStats()
    loop = asyncio.get_running_loop()
    conns = []
    for c in range(connections):
        mine = frames[c::connections] or frames[c % len(frames):][:1]
        _, proto = await loop.create_connection(
            functools.partial(_LoadConnection, mine, depth, stats, spec["corr_at"], spec["check_error"]),
            "127.0.0.1", spec["port"])
        conns.append(proto)
    for proto in conns:
        proto.send(depth)
    await asyncio.sleep(spec["warmup"])
    stats.recording = True
    start = time.perf_counter()
    await asyncio.sleep(spec["seconds"])
    stats.recording = False
    elapsed = time.perf_counter() - start
    stats.running = False
    await asyncio.wait_for(asyncio.gather(*(p.closed for p in conns)), timeout=30)
    latencies = sorted(stats.latencies)

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else 0.0

    return {"rps": stats.count / elapsed, "count": stats.count, "errors": stats.errors,
            "mismatches": stats.mismatches, "p50_ms": pct(0.50), "p99_ms": pct(0.99)}


def loadgen_main(spec_path: str) -> int:
    import uvloop

    spec = json.loads(Path(spec_path).read_text())
    print(json.dumps(uvloop.run(_load(spec))), flush=True)
    return 0


def drive(workdir: Path, port: int, frames: list[bytes], connections: int, depth: int,
          corr_at: int, check_error: bool, seconds: float = MEASURE_S) -> dict[str, Any]:
    spec = workdir / f"load-{port}.json"
    spec.write_text(json.dumps({"port": port, "frames": [f.hex() for f in frames],
                                "connections": connections, "depth": depth, "corr_at": corr_at,
                                "check_error": check_error, "warmup": WARMUP_S, "seconds": seconds}))
    proc = _spawn(["-m", "tools.bench.server", "loadgen", str(spec)], stdout=subprocess.PIPE)
    try:
        out, _ = proc.communicate(timeout=seconds + WARMUP_S + 60)
    finally:
        stop_child(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"the load generator failed with {proc.returncode}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    if result["mismatches"] or result["errors"]:
        raise RuntimeError(f"bad answers under load: {result}")
    return result


# --- the anchor: a bare uvloop echo server ------------------------------------------------------

class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport is a Transport, but uvloop's do not subclass
        # asyncio.Transport, so there is no isinstance to narrow it with.
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buf = bytearray()
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if end - pos - 4 < size:
                break
            pos += 4 + size
        if pos:
            self.transport.write(bytes(buf[:pos]))  # every whole frame, back as it came
            del buf[:pos]


def echo_main(port: int) -> int:
    import uvloop

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", port, backlog=4096)
        print(f"echoing on 127.0.0.1:{port}", flush=True)
        async with server:
            await server.serve_forever()

    try:
        uvloop.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


# --- the suite -----------------------------------------------------------------------------------

def raise_fd_limit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 8192:
        target = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def run(connections: int = CONNECTIONS, depth: int = DEPTH, brokers: int = BROKERS,
        rounds: int = ROUNDS) -> dict[str, Any]:
    raise_fd_limit()  # inherited by the load generator
    controller = echo = None
    with tempfile.TemporaryDirectory(prefix="kraftwire-bench-") as tmp:
        workdir = Path(tmp)
        try:
            controller = start_controller(workdir)
            port = controller.port
            assert controller.cluster_id is not None, "an active controller has told its cluster id"
            frames = register_brokers(port, controller.cluster_id, brokers)
            echo, echo_port = start_echo(workdir)
            ours, anchor = [], []
            for _ in range(rounds):
                ours.append(drive(workdir, port, frames, connections, depth, 4, True))
                anchor.append(drive(workdir, echo_port, frames, connections, depth, 8, False))
            check_heartbeats(port, frames)
        finally:
            stop_child(echo)
            if controller is not None:
                controller.stop()
    best = max(ours, key=lambda r: r["rps"])
    best_anchor = max(anchor, key=lambda r: r["rps"])
    note(f"server: rounds ours={[round(r['rps']) for r in ours]} "
         f"echo={[round(r['rps']) for r in anchor]} req/s")
    return emit("server.heartbeat_rtt", best["rps"], best_anchor["rps"], "req/s",
                anchor_is="a bare uvloop server echoing the same frames to the same load generator",
                p50_ms=round(best["p50_ms"], 3), p99_ms=round(best["p99_ms"], 3),
                anchor_p50_ms=round(best_anchor["p50_ms"], 3),
                anchor_p99_ms=round(best_anchor["p99_ms"], 3),
                brokers=brokers, connections=connections, depth=depth)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.server")
    sub = parser.add_subparsers(dest="command")
    echo = sub.add_parser("echo", help="(internal) the anchor echo server")
    echo.add_argument("port", type=int)
    load = sub.add_parser("loadgen", help="(internal) the load generator")
    load.add_argument("spec")
    parser.add_argument("--connections", type=int, default=CONNECTIONS)
    parser.add_argument("--depth", type=int, default=DEPTH)
    parser.add_argument("--brokers", type=int, default=BROKERS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    if args.command == "echo":
        return echo_main(args.port)
    if args.command == "loadgen":
        return loadgen_main(args.spec)
    run(args.connections, args.depth, args.brokers, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
