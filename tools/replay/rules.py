"""The validation rules: names, severities, and the rules that look across a whole capture.

Frame-level rules are applied by `decode` as it reads each flow; the controller protocol rules
below need every flow of a capture in time order, so they run on the small `ControllerEvent`s
that `decode` extracts. Layer problems (`problems.Problem`) become violations through
`problem_violation`.
"""
from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

from protocol.error_codes import Error

ERROR = "error"
WARNING = "warning"
INFO = "info"


class Rule(NamedTuple):
    name: str
    severity: str
    summary: str


RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        Rule("framing_error", ERROR, "the byte stream does not split into size-prefixed frames"),
        # kraftwire's codecs hold the APIs a controller and a test broker answer, so a real Kafka
        # API outside them (JoinGroup, OffsetCommit, ...) also lands here; `decode` lowers those to
        # INFO when the server advertised the key in the same flow.
        Rule("unknown_api_key", WARNING, "an API key the decoder has no codec for"),
        Rule("unsupported_version", WARNING, "an API version outside the codec's range: not decoded"),
        Rule("version_not_advertised", ERROR, "a version outside what the server advertised in ApiVersions"),
        Rule("decode_error", ERROR, "the bytes are not a valid encoding of the message"),
        # Kafka parses a message from the front of its frame and never looks at what follows
        # (RequestContext.parseRequest, and the clients' response parsing alike): legal, noted.
        Rule("trailing_bytes", INFO, "bytes left in the frame after the message, which Kafka ignores"),
        Rule("unknown_tagged_fields", INFO, "tagged fields the schema does not name"),
        Rule("response_without_request", ERROR, "a response whose correlation id no request used"),
        Rule("correlation_id_out_of_order", ERROR, "a response overtaking an earlier request's"),
        Rule("record_batch_crc_mismatch", ERROR, "a record batch whose CRC-32C does not match"),
        Rule("heartbeat_from_unregistered_broker", WARNING, "a heartbeat from a broker not registered in the capture"),
        Rule("stale_broker_epoch", WARNING, "a heartbeat with an epoch other than the broker's registered one"),
        Rule("cluster_id_mismatch", ERROR, "a registration naming another cluster than the capture's"),
        # Capture-level problems, reported by the capture, packet and TCP layers.
        Rule("empty_file", WARNING, "the capture file holds no bytes"),
        Rule("truncated_file", ERROR, "the capture file ends inside a record or block"),
        Rule("corrupt_capture", ERROR, "unreadable capture records or blocks, skipped"),
        Rule("unknown_link_type", WARNING, "packets of a link type the reader does not decode"),
        Rule("bad_packet", WARNING, "packets whose IP or TCP headers are damaged or fragmented"),
        Rule("gap", WARNING, "bytes of a TCP stream missing from the capture"),
        Rule("non_kafka_flow", INFO, "a TCP flow that does not carry Kafka requests"),
        Rule("unreadable_file", ERROR, "the capture file could not be opened or read"),
        Rule("decoder_failure", ERROR, "the decoder failed inside this capture; the rest of its share was skipped"),
    )
}
# The rules `controller_violations` judges across the flows of a capture.
CROSS_FLOW_RULES = ("heartbeat_from_unregistered_broker", "stale_broker_epoch", "cluster_id_mismatch")

# Capture and packet layer problem kinds -> rule.
_PROBLEM_RULES = {
    "empty_file": "empty_file",
    "truncated_file": "truncated_file",
    "truncated_record": "truncated_file",
    "truncated_block": "truncated_file",
    "unknown_format": "corrupt_capture",
    "corrupt_record": "corrupt_capture",
    "corrupt_block": "corrupt_capture",
    "unknown_interface": "corrupt_capture",
    "unknown_link_type": "unknown_link_type",
}


class Violation(NamedTuple):
    """One broken rule. `flow` and `frame` are None for problems of the capture as a whole;
    `offset` is a byte offset in the frame, the stream or the file, as `detail` says."""

    capture: str
    flow: str | None
    frame: int | None
    timestamp_ns: int | None
    rule: str
    severity: str
    offset: int | None
    detail: str


def violation(capture: str, flow: str | None, frame: int | None, timestamp_ns: int | None, rule: str,
              offset: int | None, detail: str, severity: str | None = None) -> Violation:
    return Violation(capture, flow, frame, timestamp_ns, rule, severity or RULES[rule].severity, offset, detail)


def problem_violation(capture: str, kind: str, offset: int, detail: str) -> Violation:
    """A capture or packet layer problem as a violation of the capture as a whole."""
    rule = _PROBLEM_RULES.get(kind, "bad_packet")
    return violation(capture, None, None, None, rule, offset, f"{kind}: {detail}")


class ControllerEvent(NamedTuple):
    """A registration or heartbeat seen in a capture, for the rules that span flows.

    kind: "register" (request: broker id, cluster id), "registered" (its response: broker id,
    the epoch granted, error code), "heartbeat" (request: broker id, epoch), or "cluster"
    (a response stating the server's cluster id).
    """

    capture: str
    timestamp_ns: int
    flow: str
    frame: int
    kind: str
    broker_id: int | None
    epoch: int | None
    cluster_id: str | None
    error_code: int


def controller_violations(events: Iterable[ControllerEvent]) -> Iterator[Violation]:
    """Judge one capture's registrations and heartbeats, replayed in time order.

    The rules know only what the capture shows: a broker that registered before the capture
    began is "unregistered" here, which is why those rules warn rather than fail.
    """
    # broker id -> epoch granted (None: answer not seen). A registration answer whose request
    # did not decode names no broker, so the id may be None too.
    epochs: dict[int | None, int | None] = {}
    cluster_id: str | None = None
    for e in sorted(events, key=lambda e: (e.timestamp_ns, e.frame)):
        if e.kind == "cluster" and cluster_id is None:
            cluster_id = e.cluster_id
        elif e.kind == "register":
            if cluster_id is None:
                cluster_id = e.cluster_id
            elif e.cluster_id != cluster_id:
                yield violation(e.capture, e.flow, e.frame, e.timestamp_ns, "cluster_id_mismatch", None,
                                f"broker {e.broker_id} registers with cluster {e.cluster_id}, the capture's is {cluster_id}")
            epochs.setdefault(e.broker_id, None)
        elif e.kind == "registered" and e.error_code == Error.NONE:
            epochs[e.broker_id] = e.epoch
        elif e.kind == "heartbeat":
            if e.broker_id not in epochs:
                yield violation(e.capture, e.flow, e.frame, e.timestamp_ns, "heartbeat_from_unregistered_broker", None,
                                f"no BrokerRegistration of broker {e.broker_id} earlier in the capture")
            elif epochs[e.broker_id] is not None and e.epoch != epochs[e.broker_id]:
                yield violation(e.capture, e.flow, e.frame, e.timestamp_ns, "stale_broker_epoch", None,
                                f"broker {e.broker_id} heartbeats with epoch {e.epoch}, registered with {epochs[e.broker_id]}")
