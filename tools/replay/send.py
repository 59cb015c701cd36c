"""Re-sending a capture's requests to a live server and comparing the answers.

Each Kafka flow of the capture gets a fresh connection; its requests go out in their captured
order, byte for byte, and each answer is matched by correlation id to the captured one.
Answers are compared field by field on their decoded form (`Message.to_dict()`).

Only `throttle_time_ms` is ignored by default: it reflects the server's load at that moment,
never the meaning of the answer. Everything else that differs is reported, including what
depends on the server's state (broker epochs, topic ids, the cluster id, leader epochs):
when replaying against another server that is exactly what one wants to see; `ignore` names
more fields to skip.
"""
from __future__ import annotations

import socket
import struct
from typing import Any, Iterable, NamedTuple

from protocol.api_keys import APIS
from protocol.error_codes import Error
from protocol.errors import DecodeError
from protocol.generated.messages import ApiKey
from protocol.generated.messages.response_header import ResponseHeader
from tools.replay.flows import FlowFrame, FlowStart, kafka_flows
from tools.replay.framing import REQUEST
from tools.replay.report import table
from tools.replay.streams import Source

DEFAULT_IGNORED = frozenset({"throttle_time_ms"})
_PREFIX = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")


class Exchange(NamedTuple):
    """One captured request and the captured answer to it, if any."""

    api_key: int
    version: int
    correlation_id: int
    request: bytes
    response: bytes | None


class Difference(NamedTuple):
    flow: str
    correlation_id: int
    api: str
    path: str  # where in the answer, e.g. "topics[0].error_code"; "" for the whole frame
    captured: Any
    live: Any


class Report(NamedTuple):
    flows: int
    sent: int
    compared: int
    differences: list[Difference]
    failures: list[tuple[str, str]]  # (flow, what went wrong)


def exchanges(source: Source, ports: Iterable[int] | None = None) -> dict[str, list[Exchange]]:
    """Each Kafka flow's requests in order, with their captured answers."""
    flows: dict[str, list[Exchange]] = {}
    waiting: dict[str, dict[int, int]] = {}  # flow -> correlation id -> index of its exchange
    for item in kafka_flows(source, "send", ports):
        if type(item) is FlowStart:
            flows[item.flow], waiting[item.flow] = [], {}
        elif type(item) is FlowFrame:
            # The framer guarantees a request's 8-byte prefix and a response's correlation id.
            pending, exchanges_ = waiting[item.flow], flows[item.flow]
            if item.direction == REQUEST:
                key, version, correlation_id = _PREFIX.unpack_from(item.data)
                pending[correlation_id] = len(exchanges_)
                exchanges_.append(Exchange(key, version, correlation_id, item.data, None))
            else:
                index = pending.pop(_INT32.unpack_from(item.data)[0], None)
                if index is not None:
                    exchanges_[index] = exchanges_[index]._replace(response=item.data)
    return flows


def send(source: Source, host: str, port: int, ports: Iterable[int] | None = None, ignore: Iterable[str] = (),
         timeout: float = 10.0) -> Report:
    ignored = DEFAULT_IGNORED | set(ignore)
    captured = exchanges(source, ports)
    differences: list[Difference] = []
    failures: list[tuple[str, str]] = []
    sent = compared = 0
    for flow, flow_exchanges in captured.items():
        try:
            with socket.create_connection((host, port), timeout=timeout) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                answers = _Answers(sock)
                for exchange in flow_exchanges:
                    sock.sendall(_INT32.pack(len(exchange.request)) + exchange.request)
                    sent += 1
                    if exchange.response is None:
                        continue  # nothing to compare with: the answer, if any, is skipped below
                    live = answers.wait_for(exchange.correlation_id)
                    compared += 1
                    differences += compare(flow, exchange, live, ignored)
        except (OSError, ConnectionError) as exc:
            failures.append((flow, f"{type(exc).__name__}: {exc}"))
    return Report(len(captured), sent, compared, differences, failures)


class _Answers:
    """Reads response frames, skipping those not waited for."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def wait_for(self, correlation_id: int) -> bytes:
        while True:
            frame = self._frame()
            if _INT32.unpack_from(frame)[0] == correlation_id:
                return frame

    def _frame(self) -> bytes:
        (size,) = _INT32.unpack(self._exactly(4))
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def decode_response(api_key: int, version: int, frame: bytes) -> dict[str, Any] | None:
    """The answer's fields, or None when it cannot be decoded."""
    api = APIS.get(api_key)
    if api is None or not api.min_version <= version <= api.max_version:
        return None
    try:
        _, pos = ResponseHeader.decode(frame, api.response_header_version(version))
        if api_key == ApiKey.API_VERSIONS and frame[pos:pos + 2] == Error.UNSUPPORTED_VERSION.to_bytes(2, "big"):
            version = 0
        body, _ = api.response.decode(frame, version, pos)
    except DecodeError:
        return None
    return body.to_dict()


def compare(flow: str, exchange: Exchange, live: bytes, ignored: frozenset[str] | set[str]) -> list[Difference]:
    captured = exchange.response
    if captured is None:
        raise ValueError(f"correlation id {exchange.correlation_id} has no captured answer to compare with")
    api = APIS.get(exchange.api_key)
    name = f"{api.name if api else f'key {exchange.api_key}'} v{exchange.version}"
    before = decode_response(exchange.api_key, exchange.version, captured)
    after = decode_response(exchange.api_key, exchange.version, live)
    if before is None or after is None:
        # Undecodable on either side: only the bytes after the correlation id can be compared.
        if captured[4:] == live[4:]:
            return []
        return [Difference(flow, exchange.correlation_id, name, "", captured.hex(), live.hex())]
    return [Difference(flow, exchange.correlation_id, name, path, a, b) for path, a, b in diff(before, after, ignored)]


def diff(a: Any, b: Any, ignored: frozenset[str] | set[str], path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, a's value, b's value) wherever two decoded messages differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in dict.fromkeys([*a, *b]):
            if key not in ignored:
                out += diff(a.get(key), b.get(key), ignored, f"{path}.{key}" if path else key)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [(f"{path}.length", len(a), len(b))]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, ignored, f"{path}[{i}]")
        return out
    return [] if a == b else [(path, a, b)]


def render(report: Report) -> str:
    lines = [f"{report.flows} flows, {report.sent} requests sent, {report.compared} answers compared, "
             f"{len(report.differences)} differences, {len(report.failures)} failed flows"]
    if report.differences:
        lines += ["", table(["flow", "correlation id", "api", "field", "captured", "live"],
                            [(d.flow, d.correlation_id, d.api, d.path, _short(d.captured), _short(d.live))
                             for d in report.differences])]
    if report.failures:
        lines += ["", table(["flow", "failure"], report.failures)]
    return "\n".join(lines)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
