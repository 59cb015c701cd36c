"""Requests built and responses read by kafka-python's own schema engine, over raw sockets.

The project's codecs are not used on this side, so a test that passes here shows the server
agrees with an independent implementation of the wire format, not just with itself.
"""

from __future__ import annotations

import socket
import struct
from functools import cache

from tests.support.wire import frame
from tools.bench.kafka_python_engine import kafka_python_class

CLIENT_ID = "kraftwire-kp-test"


@cache
def kp(name: str) -> type:
    """kafka-python's class for one of the project's message schemas (cached: building one
    compiles its codec)."""
    return kafka_python_class(name)


def encode_request(request, correlation_id: int, client_id: str = CLIENT_ID) -> bytes:
    """The request header and body, unframed: what a broker puts in an Envelope."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True))


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def decode_response(name: str, version: int, data: bytes):
    """A response with its header (``.header.correlation_id``), read by kafka-python."""
    return kp(name).decode(data, version=version, header=True)


def exchange(sock: socket.socket, request, correlation_id: int, trailing: bytes = b""):
    """Send one request (with ``trailing`` bytes after its body) and read its response."""
    sock.sendall(frame(encode_request(request, correlation_id) + trailing))
    name = type(request).__name__.split("_v")[0].removesuffix("Request") + "Response"
    response = decode_response(name, request.API_VERSION, read_frame(sock))
    assert response.header.correlation_id == correlation_id
    return response
