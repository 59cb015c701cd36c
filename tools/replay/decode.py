"""Kafka flows -> one row per frame, decoded with the generated codecs and judged by the rules.

Within a flow, a response is matched to its request by correlation id and decoded with that
request's API key and version. Every frame gets a row whether or not it decodes; what is
wrong with it is in its row's `violations` and, with details, in `Violation`s.

    for item in decode_capture("traffic.pcapng", "traffic.pcapng"):
        ...  # FrameRow, Violation, FlowRow and ControllerEvent items, in capture order

`validate` gathers them and adds the rules that span flows.
"""
from __future__ import annotations

import os
import struct
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from protocol.api_keys import APIS, Api
from protocol.error_codes import Error
from protocol.errors import DecodeError
from protocol.generated.messages import (
    ApiKey,
    ApiVersionsResponse,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    DescribeClusterResponse,
    MetadataResponse,
)
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.response_header import ResponseHeader
from protocol.message import Message
from tools.replay.flows import FlowEnd, FlowFrame, FlowItem, FlowStart, kafka_flows
from tools.replay.framing import REQUEST
from tools.replay.rules import INFO, ControllerEvent, Violation, controller_violations, violation
from tools.replay.streams import Source
from tools.replay.walk import bad_batches, inspect

OK = "ok"
DECODE_ERROR = "decode_error"
UNKNOWN_API_KEY = "unknown_api_key"
UNSUPPORTED_VERSION = "unsupported_version"
UNMATCHED = "unmatched"  # a response no request of the flow asked for
UNDECODED = "undecoded"  # the response to a request that could not be read

_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class FrameRow(NamedTuple):
    capture: str
    flow: str
    frame: int  # position of the frame in its flow, both directions counted
    direction: str  # "request" or "response"
    timestamp_ns: int
    api_key: int | None
    api_name: str | None
    api_version: int | None
    correlation_id: int
    client_id: str | None  # a response carries its request's
    size: int  # bytes on the wire, size prefix included
    latency_ms: float | None  # responses: time since their request
    status: str
    violations: list[str]  # names of the rules the frame breaks


class FlowRow(NamedTuple):
    capture: str
    flow: str
    client: str
    server: str
    kafka: bool
    start_ns: int
    end_ns: int
    requests: int
    responses: int
    unanswered: int  # requests still waiting for a response when the flow ended
    bytes_to_server: int
    bytes_to_client: int
    gap_bytes: int
    client_ids: list[str]
    violation_count: int
    end_reason: str


# What decoding one frame yields.
_Output = FrameRow | Violation | ControllerEvent


class _Request(NamedTuple):
    """A request waiting for its response."""

    frame: int  # the request's frame position in the flow
    api: Api | None
    api_key: int
    version: int
    timestamp_ns: int
    client_id: str | None
    decodable: bool  # whether its response can be decoded
    broker_id: int | None  # BrokerRegistration: whose epoch the response grants


class FlowDecoder:
    """Decodes the frames of one flow, in order."""

    def __init__(self, capture: str, flow: str) -> None:
        self.capture = capture
        self.flow = flow
        self.frames = 0
        self.requests = 0
        self.responses = 0
        self.violations = 0
        self.skipped = 0  # requests overtaken by a later one's response
        self.client_ids: dict[str, None] = {}
        self.outstanding: dict[int, _Request] = {}  # by correlation id, in request order
        # api key -> (min, max) from the server's ApiVersions answer in this flow
        self.advertised: dict[int, tuple[int, int]] | None = None

    def frame(self, direction: str, timestamp_ns: int, data: bytes) -> list[_Output]:
        out: list[_Output] = []
        index = self.frames
        self.frames += 1
        if direction == REQUEST:
            self.requests += 1
            row = self._request(index, timestamp_ns, data, out)
        else:
            self.responses += 1
            row = self._response(index, timestamp_ns, data, out)
        self.violations += len(row.violations)
        out.append(row)
        return out

    def summary(self, end: FlowEnd) -> FlowRow:
        return FlowRow(
            self.capture, end.flow, end.client, end.server, end.kafka, end.start_ns, end.end_ns, self.requests,
            self.responses, len(self.outstanding) + self.skipped, end.bytes_to_server, end.bytes_to_client, end.gap_bytes,
            list(self.client_ids), self.violations, end.reason,
        )

    # --- requests ----------------------------------------------------------------------------------

    def _request(self, index: int, ts: int, data: bytes, out: list[_Output]) -> FrameRow:
        rules: list[str] = []
        key, version, correlation_id = _PREFIX.unpack_from(data, 0)
        api = APIS.get(key)
        status = OK

        def broken(rule: str, offset: int | None, detail: str, severity: str | None = None) -> None:
            rules.append(rule)
            out.append(violation(self.capture, self.flow, index, ts, rule, offset, detail, severity))

        # No Kafka request has a negative API key or version: such a frame is a client's
        # garbage, not an API these codecs leave out.
        garbage = key < 0 or version < 0
        if self.advertised is not None and not garbage:
            advertised = self.advertised.get(key)
            if advertised is None:
                broken("version_not_advertised", 2, f"API key {key} is not in the server's ApiVersions")
            elif not advertised[0] <= version <= advertised[1]:
                broken("version_not_advertised", 2,
                       f"{_name(api, key)} v{version}, the server advertised v{advertised[0]}-{advertised[1]}")
        decodable = api is not None and api.min_version <= version <= api.max_version
        read = _read_request(data, api, version, decodable)
        client_id = read.client_id
        if read.header_error is not None:
            status = DECODE_ERROR
            broken("decode_error", *read.header_error)
        elif client_id is not None:
            self.client_ids[client_id] = None
        if garbage:
            if status == OK:
                status = DECODE_ERROR
                broken("decode_error", 0 if key < 0 else 2, f"API key {key} v{version} is not a Kafka request's")
        elif api is None:
            if status == OK:
                status = UNKNOWN_API_KEY
            # A key the server advertised is real Kafka that these codecs leave out.
            known = self.advertised is not None and key in self.advertised
            broken("unknown_api_key", 0, f"API key {key} v{version}" + (" (advertised by the server)" if known else ""),
                   INFO if known else None)
        elif not decodable:
            if status == OK:
                status = UNSUPPORTED_VERSION
            broken("unsupported_version", 2, f"{api.name} v{version}; the codecs know v{api.min_version}-{api.max_version}")
        elif read.body is not None:
            for problem in read.body.problems:
                broken(*problem)
            if not read.body.decoded:
                status = DECODE_ERROR
        registering = None  # whose epoch the response will grant
        facts = read.body.facts if read.body is not None else None
        if facts is not None:
            kind, broker_id, epoch, cluster_id = facts
            out.append(ControllerEvent(self.capture, ts, self.flow, index, kind, broker_id, epoch, cluster_id, 0))
            if kind == "register":
                registering = broker_id
        if not garbage:  # Kafka answers garbage by closing the connection, so no answer is due
            self.outstanding[correlation_id] = _Request(index, api, key, version, ts, client_id, decodable,
                                                        registering)
        return FrameRow(self.capture, self.flow, index, "request", ts, key, _name(api, key), version, correlation_id,
                        client_id, len(data) + 4, None, status, rules)

    # --- responses ---------------------------------------------------------------------------------

    def _response(self, index: int, ts: int, data: bytes, out: list[_Output]) -> FrameRow:
        rules: list[str] = []
        (correlation_id,) = _INT32.unpack_from(data, 0)

        def broken(rule: str, offset: int | None, detail: str, severity: str | None = None) -> None:
            rules.append(rule)
            out.append(violation(self.capture, self.flow, index, ts, rule, offset, detail, severity))

        outstanding = self.outstanding
        request = outstanding.get(correlation_id)
        if request is None:
            broken("response_without_request", 0, f"no request of this flow has correlation id {correlation_id}")
            return FrameRow(self.capture, self.flow, index, "response", ts, None, None, None, correlation_id, None,
                            len(data) + 4, None, UNMATCHED, rules)
        if next(iter(outstanding)) != correlation_id:
            # Kafka answers a connection's requests in order: the earlier ones this response
            # overtook will not be answered in order any more, so they are judged once, here.
            skipped = []
            for earlier, pending in list(outstanding.items()):
                if pending.frame >= request.frame:
                    break
                skipped.append(earlier)
                del outstanding[earlier]
            self.skipped += len(skipped)
            broken("correlation_id_out_of_order", 0,
                   f"answers correlation id {correlation_id} before the earlier {skipped}")
        del outstanding[correlation_id]
        api, key = request.api, request.api_key
        if api is None or not request.decodable:
            status = UNDECODED if api is None else UNSUPPORTED_VERSION
        else:
            body = _read_response(data, api, request.version)
            for problem in body.problems:
                broken(*problem)
            status = OK if body.decoded else DECODE_ERROR
            self._learn(body.facts, request, index, ts, out)
        return FrameRow(self.capture, self.flow, index, "response", ts, key, _name(api, key), request.version,
                        correlation_id, request.client_id, len(data) + 4, (ts - request.timestamp_ns) / 1e6,
                        status, rules)

    def _learn(self, facts: Any, request: _Request, index: int, ts: int, out: list[_Output]) -> None:
        """What a response tells the rules: the advertised versions, epochs, the cluster id."""
        if isinstance(facts, dict):
            self.advertised = facts
        elif facts is not None:
            kind, epoch, cluster_id, error_code = facts
            broker_id = request.broker_id if kind == "registered" else None
            out.append(ControllerEvent(self.capture, ts, self.flow, index, kind, broker_id, epoch, cluster_id,
                                       error_code))


class _Body(NamedTuple):
    """What reading a message body found: whether it decoded, the rules it breaks as
    (rule, offset, detail), and the facts the cross-flow rules and the flow's later frames
    need from it (see `_request_facts` and `_response_facts`)."""

    decoded: bool
    problems: tuple[tuple[str, int | None, str], ...]
    facts: Any


class _RequestRead(NamedTuple):
    header_error: tuple[int | None, str] | None  # (offset, detail) when the header does not decode
    client_id: str | None
    body: _Body | None  # None when the body is not read


class _Reads:
    """Frames read before, by their bytes less the correlation id: a frame's verdict depends on
    nothing else, and a capture's frames repeat (heartbeats, their answers, metadata between
    changes), so each distinct one is decoded once per worker. Bounded by the bytes it keys."""

    LIMIT_BYTES = 64 << 20
    LARGEST = 1 << 20  # frames larger than this are read every time

    def __init__(self) -> None:
        self.entries: dict[tuple[int, int, bytes], Any] = {}
        self.bytes = 0

    def get(self, key: tuple[int, int, bytes]) -> Any:
        return self.entries.get(key)

    def put(self, key: tuple[int, int, bytes], value: Any) -> None:
        size = len(key[2])
        if size > self.LARGEST:
            return
        if self.bytes + size > self.LIMIT_BYTES:
            self.entries.clear()
            self.bytes = 0
        self.entries[key] = value
        self.bytes += size


_READS = _Reads()


def _read_request(data: bytes, api: Api | None, version: int, decodable: bool) -> _RequestRead:
    key = (-1, -1, data[:4] + data[8:])  # the API key and version are in the bytes
    read: _RequestRead | None = _READS.get(key)
    if read is None:
        read = _read_request_uncached(data, api, version, decodable)
        _READS.put(key, read)
    return read


def _read_request_uncached(data: bytes, api: Api | None, version: int, decodable: bool) -> _RequestRead:
    # An unknown API's header is read as v1, as Kafka reads one to answer it.
    header_version = api.request_header_version(version) if api is not None else 1
    try:
        header, pos = RequestHeader.decode(data, header_version)
    except DecodeError as exc:
        return _RequestRead((exc.offset, str(exc)), None, None)
    if not decodable or api is None:
        return _RequestRead(None, header.client_id, None)
    return _RequestRead(None, header.client_id, _body(api.request, version, data, pos, header, _request_facts))


def _read_response(data: bytes, api: Api, version: int) -> _Body:
    key = (api.key, version, data[4:])
    body: _Body | None = _READS.get(key)
    if body is None:
        body = _read_response_uncached(data, api, version)
        _READS.put(key, body)
    return body


def _read_response_uncached(data: bytes, api: Api, version: int) -> _Body:
    try:
        header, pos = ResponseHeader.decode(data, api.response_header_version(version))
    except DecodeError as exc:
        return _Body(False, (("decode_error", exc.offset, str(exc)),), None)
    if api.key == ApiKey.API_VERSIONS and _error_code(data, pos) == Error.UNSUPPORTED_VERSION:
        # A server that does not know the version answers with v0, so the client can read it.
        version = 0
    return _body(api.response, version, data, pos, header, _response_facts)


def _request_facts(body: Message) -> tuple[str, int, int | None, str | None] | None:
    """(event kind, broker id, epoch, cluster id) of a request the cross-flow rules follow."""
    if isinstance(body, BrokerRegistrationRequest):
        return "register", body.broker_id, None, body.cluster_id
    if isinstance(body, BrokerHeartbeatRequest):
        return "heartbeat", body.broker_id, body.broker_epoch, None
    return None


def _response_facts(body: Message) -> Any:
    """The versions an ApiVersions answer advertises, by API key; or (event kind, epoch,
    cluster id, error code) of an answer the cross-flow rules follow."""
    if isinstance(body, ApiVersionsResponse):
        if body.error_code == Error.NONE:
            return {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}
    elif isinstance(body, BrokerRegistrationResponse):
        return "registered", body.broker_epoch, None, body.error_code
    elif isinstance(body, (MetadataResponse, DescribeClusterResponse)) and body.cluster_id:
        return "cluster", None, body.cluster_id, 0
    return None


def _body(cls: type[Message], version: int, data: bytes, pos: int, header: Message,
          facts: Callable[[Message], Any]) -> _Body:
    """The body read, with its trailing bytes, unknown tags and record CRCs judged."""
    try:
        body, end = cls.decode(data, version, pos)
    except DecodeError as exc:
        return _Body(False, (("decode_error", exc.offset, str(exc)),), None)
    problems: list[tuple[str, int | None, str]] = []
    if end != len(data):
        problems.append(("trailing_bytes", end, f"{len(data) - end} bytes after {cls.NAME} v{version}"))
    tagged: list[str] = []
    records: list[bytes] = []
    if header.unknown_tagged_fields:
        tagged.append(f"{header.NAME}{sorted(header.unknown_tagged_fields)}")
    inspect(body, tagged, records)
    if tagged:
        problems.append(("unknown_tagged_fields", None, ", ".join(tagged)))
    for value in records:
        for at, base_offset in bad_batches(value):
            problems.append(("record_batch_crc_mismatch", None,
                             f"batch with base offset {base_offset} at byte {at} of a records field"))
    return _Body(True, tuple(problems), facts(body))


def _name(api: Api | None, key: int) -> str | None:
    return api.name if api is not None else None


def _error_code(data: bytes, pos: int) -> int | None:
    return _INT16.unpack_from(data, pos)[0] if len(data) - pos >= 2 else None


def decode_capture(source: Source, capture: str, ports: Iterable[int] | None = None
                   ) -> Iterator[FrameRow | Violation | FlowRow | ControllerEvent]:
    """Every frame row, violation, flow summary and controller event of one capture."""
    return decode_flows(kafka_flows(source, capture, ports), capture)


def decode_flows(items: Iterable[FlowItem], capture: str) -> Iterator[FrameRow | Violation | FlowRow | ControllerEvent]:
    """The rows of the flows of a capture (all of them, or one share's: see `index`)."""
    decoders: dict[str, FlowDecoder] = {}
    for item in items:
        if isinstance(item, FlowFrame):
            yield from decoders[item.flow].frame(item.direction, item.timestamp_ns, item.data)
        elif isinstance(item, Violation):
            if item.flow is not None and item.flow in decoders:
                decoders[item.flow].violations += 1
            yield item
        elif isinstance(item, FlowStart):
            decoders[item.flow] = FlowDecoder(capture, item.flow)
        else:
            decoder = decoders.pop(item.flow, None) or FlowDecoder(capture, item.flow)
            yield decoder.summary(item)


class Result(NamedTuple):
    frames: list[FrameRow]
    violations: list[Violation]
    flows: list[FlowRow]


def validate(source: Source, capture: str | None = None, ports: Iterable[int] | None = None) -> Result:
    """Decode one capture in this process and judge it by every rule."""
    if capture is None:
        capture = str(source) if isinstance(source, (str, os.PathLike)) else "<capture>"
    result = Result([], [], [])
    events: list[ControllerEvent] = []
    for item in decode_capture(source, capture, ports):
        if isinstance(item, FrameRow):
            result.frames.append(item)
        elif isinstance(item, Violation):
            result.violations.append(item)
        elif isinstance(item, FlowRow):
            result.flows.append(item)
        else:
            events.append(item)
    result.violations.extend(controller_violations(events))
    return result
