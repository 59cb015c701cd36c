"""Request and response headers.

The generated header classes do the encoding; this module picks the header version for an
API version and parses the fixed prefix (key, version, correlation id) before anything else,
because the prefix is what decides how the rest of the frame is read.
"""

from __future__ import annotations

from protocol.api_keys import APIS
from protocol.errors import DecodeError
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.response_header import ResponseHeader
from protocol.primitives import INT16, INT32

_PREFIX = INT16.size * 2 + INT32.size


def peek_request_prefix(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) from the first 8 bytes of a request frame."""
    if len(frame) < _PREFIX:
        raise DecodeError("RequestHeader", None, len(frame), "frame is shorter than a request header")
    key, version = INT16.unpack_from(frame, 0)[0], INT16.unpack_from(frame, 2)[0]
    return key, version, INT32.unpack_from(frame, 4)[0]


def encode_request_header(out: bytearray, api_key: int, version: int, correlation_id: int,
                          client_id: str | None) -> None:
    header = RequestHeader(api_key, version, correlation_id, client_id)
    header.encode_into(out, APIS[api_key].request_header_version(version))


def encode_response_header(out: bytearray, api_key: int, version: int, correlation_id: int) -> None:
    header_version = APIS[api_key].response_header_version(version)
    ResponseHeader(correlation_id).encode_into(out, header_version)
