"""Envelope (API 58) as a broker sends it: the inner request built with kafka-python's schema
engine, wrapped with the client's serialized principal and address."""

from __future__ import annotations

import struct

from protocol.error_codes import Error
from tests.support.kafka_python_wire import decode_response, encode_request, exchange, kp

LOCALHOST_V4 = bytes([127, 0, 0, 1])


def principal_bytes(type_: str, name: str, version: int = 0) -> bytes:
    """A principal as Kafka's default principal builder serializes it: an int16 version, then
    DefaultPrincipalData (compact strings, a bool, no tagged fields)."""
    def compact(s: str) -> bytes:
        data = s.encode()
        return bytes([len(data) + 1]) + data
    return struct.pack(">h", version) + compact(type_) + compact(name) + b"\x00" + b"\x00"
ALICE = principal_bytes("User", "alice")


def envelope(inner: bytes, principal: bytes | None = ALICE, address: bytes = LOCALHOST_V4):
    return kp("EnvelopeRequest")[0](request_data=inner, request_principal=principal,
                                    client_host_address=address)


def forward(sock, inner_request, inner_correlation_id: int, *, outer_correlation_id: int = 900):
    """Forward one request and return the inner answer, read as the broker reads it."""
    answer = exchange(sock, envelope(encode_request(inner_request, inner_correlation_id)),
                      outer_correlation_id)
    assert answer.error_code == Error.NONE, answer
    name = type(inner_request).__name__.split("_v")[0].removesuffix("Request") + "Response"
    inner = decode_response(name, inner_request.API_VERSION, answer.response_data)
    assert inner.header.correlation_id == inner_correlation_id
    return inner


def create_topics(name: str, version: int = 7, partitions: int = 3):
    cls = kp("CreateTopicsRequest")
    return cls[version](topics=[cls.CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1,
                                                   assignments=[], configs=[])],
                        timeout_ms=5000, validate_only=False)
