"""Re-sending a capture's requests to a live server and comparing the answers.

Each Kafka flow of the capture gets a fresh connection; its requests go out in their captured
order, byte for byte, and each answer is matched by correlation id to the captured one.
Answers are compared field by field on their decoded form (`Message.to_dict()`), an
Envelope's forwarded answer included (decoded as the API and version of the request it carried).

Only `throttle_time_ms` is ignored by default: it reflects the server's load at that moment,
never the meaning of the answer. Everything else that differs is reported, including what
depends on the server's state (broker epochs, topic ids, the cluster id, leader epochs):
when replaying against another server that is exactly what one wants to see; `ignore` names
more fields to skip.

`clean=True` replays a capture against another, fresh, cluster so that only real differences
remain: the requests of all flows go out in their captured time order (brokers register
before they heartbeat, as they did), the captured cluster id is swapped for the target's in
requests and captured answers alike, each broker epoch the target grants at registration
stands in for the captured one, and the fields a fresh cluster legitimately answers with
other values (`CLEAN_IGNORED`: generated topic ids, metadata log offsets, epochs and records,
where a Fetch diverges, the features' epoch) are not compared.
"""
from __future__ import annotations

import re
import socket
import struct
from collections import Counter
from typing import Any, Iterable, NamedTuple

from protocol.api_keys import APIS
from protocol.error_codes import Error
from protocol.errors import DecodeError
from protocol.generated.messages import ApiKey
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.response_header import ResponseHeader
from protocol.message import Message
from tools.replay.flows import FlowFrame, FlowStart, kafka_flows
from tools.replay.framing import REQUEST
from tools.replay.report import table
from tools.replay.streams import Source

DEFAULT_IGNORED = frozenset({"throttle_time_ms"})
# A fresh cluster's metadata log has other epochs and offsets (no-op records come with time):
# where a Fetch diverges from it, or which snapshot it names, is its own as much as its records.
CLEAN_IGNORED = frozenset({"topic_id", "records", "high_watermark", "last_stable_offset", "log_start_offset",
                           "finalized_features_epoch", "leader_epoch", "current_leader", "diverging_epoch",
                           "snapshot_id"})
_PREFIX = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")
_INT64_MAX = (1 << 63) - 1


class Exchange(NamedTuple):
    """One captured request and the captured answer to it, if any."""

    api_key: int
    version: int
    correlation_id: int
    request: bytes
    response: bytes | None
    timestamp_ns: int


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
                exchanges_.append(Exchange(key, version, correlation_id, item.data, None, item.timestamp_ns))
            else:
                index = pending.pop(_INT32.unpack_from(item.data)[0], None)
                if index is not None:
                    exchanges_[index] = exchanges_[index]._replace(response=item.data)
    return flows


def send(source: Source, host: str, port: int, ports: Iterable[int] | None = None, ignore: Iterable[str] = (),
         timeout: float = 10.0, clean: bool = False) -> Report:
    ignored = DEFAULT_IGNORED | set(ignore) | (CLEAN_IGNORED if clean else set())
    captured = exchanges(source, ports)
    differences: list[Difference] = []
    failures: dict[str, str] = {}
    sent = compared = 0
    mapping = _Mapping(_cluster_id(host, port, timeout) if clean else None)
    # Flow by flow, or (clean) every flow's requests in captured time order over connections
    # held open side by side.
    order = sorted(((e.timestamp_ns, flow, i) for flow, es in captured.items() for i, e in enumerate(es))) if clean \
        else [(0, flow, i) for flow, es in captured.items() for i in range(len(es))]
    connections: dict[str, _Answers] = {}
    try:
        for _, flow, index in order:
            if flow in failures:
                continue
            exchange = captured[flow][index]
            try:
                answers = connections.get(flow)
                if answers is None:
                    answers = connections[flow] = _Answers(socket.create_connection((host, port), timeout=timeout))
                request = mapping.request(exchange) if clean else exchange.request
                answers.sock.sendall(_INT32.pack(len(request)) + request)
                sent += 1
                if exchange.response is None:
                    continue  # nothing to compare with: the answer, if any, is skipped below
                live = answers.wait_for(exchange.correlation_id)
                compared += 1
                if clean:
                    mapping.learn(exchange, live)
                    exchange = exchange._replace(response=mapping.response(exchange))
                differences += [d for d in compare(flow, exchange, live, ignored)
                                if not (clean and _is_target_port(d, flow, port))]
            except OSError as exc:  # ConnectionError and BrokenPipeError included: the flow ends here
                failures[flow] = f"{type(exc).__name__}: {exc}"
                if flow in connections:
                    connections.pop(flow).sock.close()
    finally:
        for answers in connections.values():
            answers.sock.close()
    return Report(len(captured), sent, compared, differences, list(failures.items()))


def _is_target_port(difference: Difference, flow: str, port: int) -> bool:
    """A port the server gave as its own address: the captured server's where the target says its own."""
    captured_port = flow.split(" -> ")[-1].split(" ")[0].rpartition(":")[2]
    return (difference.path.endswith("port") and difference.live == port
            and str(difference.captured) == captured_port)


def _cluster_id(host: str, port: int, timeout: float) -> str | None:
    """The target's cluster id, as its Metadata answer says."""
    from protocol.client import KafkaClient
    from protocol.generated.messages.metadata_request import MetadataRequest
    from protocol.generated.messages.metadata_response import MetadataResponse

    with KafkaClient(host, port, client_id="kraftwire-replay", timeout=timeout) as client:
        answer = client.request(MetadataRequest(topics=[]), 12)
    return answer.cluster_id if isinstance(answer, MetadataResponse) else None


class _Mapping:
    """Captured values -> the target's: its cluster id, and the broker epochs it granted."""

    def __init__(self, cluster_id: str | None) -> None:
        self.cluster_id = cluster_id
        self.epochs: dict[int, int] = {}

    def request(self, exchange: Exchange) -> bytes:
        """The request with the target's cluster id and broker epoch in place of the captured ones."""
        api = APIS.get(exchange.api_key)
        if api is None or not api.min_version <= exchange.version <= api.max_version:
            return exchange.request
        try:
            _, pos = RequestHeader.decode(exchange.request, api.request_header_version(exchange.version))
            body, _ = api.request.decode(exchange.request, exchange.version, pos)
        except DecodeError:
            return exchange.request
        changed = self._swap(body)
        if exchange.api_key == ApiKey.BROKER_HEARTBEAT and exchange.response is not None:
            # A broker the captured cluster found caught up is caught up with the target too:
            # its offset in another log means nothing there, so it claims the whole log.
            answer = decode_response(exchange.api_key, exchange.version, exchange.response)
            if answer and answer.get("is_caught_up"):
                setattr(body, "current_metadata_offset", _INT64_MAX)
                changed = True
        return exchange.request[:pos] + body.encode(exchange.version) if changed else exchange.request

    def _swap(self, body: Message) -> bool:
        """Put the target's cluster id and broker epoch into `body`; whether anything changed."""
        changed = False
        cluster_id = getattr(body, "cluster_id", None)
        if isinstance(cluster_id, str) and self.cluster_id is not None and cluster_id != self.cluster_id:
            setattr(body, "cluster_id", self.cluster_id)
            changed = True
        epoch = getattr(body, "broker_epoch", None)
        if epoch in self.epochs:
            setattr(body, "broker_epoch", self.epochs[epoch])
            changed = True
        return changed

    def learn(self, exchange: Exchange, live: bytes) -> None:
        if exchange.api_key != ApiKey.BROKER_REGISTRATION or exchange.response is None:
            return
        before = decode_response(exchange.api_key, exchange.version, exchange.response)
        after = decode_response(exchange.api_key, exchange.version, live)
        if before and after and before.get("error_code") == after.get("error_code") == 0:
            self.epochs[before["broker_epoch"]] = after["broker_epoch"]

    def response(self, exchange: Exchange) -> bytes | None:
        """The captured answer as the target would say it: its cluster id and epochs."""
        decoded = _decoded(exchange)
        if decoded is None or exchange.response is None:
            return exchange.response
        _, body, pos = decoded
        return exchange.response[:pos] + body.encode(exchange.version) if self._swap(body) else exchange.response


def _decoded(exchange: Exchange) -> tuple[Message, Message, int] | None:
    api = APIS.get(exchange.api_key)
    if api is None or exchange.response is None or not api.min_version <= exchange.version <= api.max_version:
        return None
    if exchange.api_key == ApiKey.API_VERSIONS:
        return None  # answers with a fallback version of their own; nothing of the cluster in them
    try:
        header, pos = ResponseHeader.decode(exchange.response, api.response_header_version(exchange.version))
        body, _ = api.response.decode(exchange.response, exchange.version, pos)
    except DecodeError:
        return None
    return header, body, pos


class _Answers:
    """Reads response frames, skipping those not waited for."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

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
            chunk = self.sock.recv(min(n, 1 << 20))
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
    if exchange.api_key == ApiKey.ENVELOPE and before is not None and after is not None:
        _open_envelopes(exchange.request, before, after)
    if before is None or after is None:
        # Undecodable on either side: only the bytes after the correlation id can be compared.
        if captured[4:] == live[4:]:
            return []
        return [Difference(flow, exchange.correlation_id, name, "", captured.hex(), live.hex())]
    return [Difference(flow, exchange.correlation_id, name, path, a, b) for path, a, b in diff(before, after, ignored)]


def _open_envelopes(request: bytes, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Put the forwarded answers in place of their bytes, decoded as the forwarded request's
    API and version say, so they are compared field by field (and what a clean replay ignores,
    topic ids among it, is ignored in them too)."""
    inner = _envelope_request(request)
    if inner is None:
        return
    key, version = inner
    for answer in (before, after):
        data = answer.get("response_data")
        if isinstance(data, str):
            decoded = decode_response(key, version, bytes.fromhex(data))
            if decoded is not None:
                answer["response_data"] = decoded


def _envelope_request(request: bytes) -> tuple[int, int] | None:
    """The API key and version of the request an Envelope forwards, if it can be read."""
    api = APIS.get(ApiKey.ENVELOPE)
    version = _PREFIX.unpack_from(request)[1]
    if api is None or not api.min_version <= version <= api.max_version:
        return None
    try:
        _, pos = RequestHeader.decode(request, api.request_header_version(version))
        body, _ = api.request.decode(request, version, pos)
    except DecodeError:
        return None
    data = getattr(body, "request_data", None)
    if not isinstance(data, bytes) or len(data) < _PREFIX.size:
        return None
    key, inner_version, _ = _PREFIX.unpack_from(data)
    return key, inner_version


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


def render(report: Report, verbose: bool = False) -> str:
    """The totals, then the differences counted by API and field (``verbose``: one row each)."""
    lines = [f"{report.flows} flows, {report.sent} requests sent, {report.compared} answers compared, "
             f"{len(report.differences)} differences, {len(report.failures)} failed flows"]
    if report.differences and verbose:
        lines += ["", table(["flow", "correlation id", "api", "field", "captured", "live"],
                            [(d.flow, d.correlation_id, d.api, d.path, _short(d.captured), _short(d.live))
                             for d in report.differences])]
    elif report.differences:
        counts = Counter((d.api, _field(d.path)) for d in report.differences)
        first: dict[tuple[str, str], Difference] = {}
        for d in report.differences:
            first.setdefault((d.api, _field(d.path)), d)
        lines += ["", table(["api", "field", "differences", "first captured", "first live"],
                            [(api, fld, n, _short(first[api, fld].captured), _short(first[api, fld].live))
                             for (api, fld), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]),
                  "", "(--verbose lists every difference)"]
    if report.failures:
        lines += ["", table(["flow", "failure"], report.failures)]
    return "\n".join(lines)


def _field(path: str) -> str:
    """A field's path with its list indexes left out: ``topics[].error_code``."""
    return re.sub(r"\[\d+\]", "[]", path)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
