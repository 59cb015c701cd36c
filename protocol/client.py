"""A small blocking Kafka client over one socket, driven by the generated codecs.

Tests, the command-line tools and the benchmarks' load generators use it to speak to a
controller exactly as a broker or an admin client would.
"""

from __future__ import annotations

import socket

from protocol.api_keys import APIS
from protocol.errors import DecodeError
from protocol.framing import begin_frame, end_frame
from protocol.generated.messages.response_header import ResponseHeader
from protocol.headers import encode_request_header
from protocol.message import Message, api_key_of
from protocol.primitives import INT32


class ConnectionClosed(Exception):
    pass


class KafkaClient:
    def __init__(self, host: str, port: int, client_id: str = "kraftwire-client", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "KafkaClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode_request(self, request: Message, version: int) -> tuple[bytes, int]:
        self.correlation_id += 1
        out = begin_frame()
        encode_request_header(out, api_key_of(request), version, self.correlation_id, self.client_id)
        request.encode_into(out, version)
        return end_frame(out), self.correlation_id

    def send(self, request: Message, version: int) -> int:
        frame, correlation_id = self.encode_request(request, version)
        self.sock.sendall(frame)
        return correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int | None = None) -> Message:
        frame = self.read_frame()
        api = APIS[api_key]
        header, pos = ResponseHeader.decode(frame, api.response_header_version(version))
        if correlation_id is not None and header.correlation_id != correlation_id:
            raise DecodeError(api.response.NAME, version, 0,
                              f"correlation id {header.correlation_id}, expected {correlation_id}")
        response, end = api.response.decode(frame, version, pos)
        if end != len(frame):
            raise DecodeError(api.response.NAME, version, end, "trailing bytes")
        return response

    def request(self, request: Message, version: int) -> Message:
        correlation_id = self.send(request, version)
        return self.receive(api_key_of(request), version, correlation_id)

    def read_frame(self) -> bytes:
        (size,) = INT32.unpack(self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionClosed("the server closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def parse_addresses(spec: str) -> list[tuple[str, int]]:
    """``host:port`` or Kafka's voter form ``id@host:port``, comma separated; ValueError names
    the item that is neither."""
    addresses = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        host, sep, port = item.rpartition("@")[2].rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"{item!r} is not HOST:PORT")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError("no address given")
    return addresses
