"""Who a request comes from: the principal and address that authorization will judge.

A request a broker forwards in an Envelope is judged as its client's, not the broker's: the
client's principal and address travel in the Envelope, and the broker's are kept beside them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from protocol.errors import DecodeError
from protocol.generated.messages.default_principal_data import DefaultPrincipalData
from protocol.primitives import INT16


@dataclass(frozen=True)
class Principal:
    type: str
    name: str
    token_authenticated: bool = False


# What Kafka calls a client on a listener without authentication.
ANONYMOUS = Principal("User", "ANONYMOUS")


@dataclass(frozen=True)
class RequestContext:
    principal: Principal
    client_address: str
    # The broker that forwarded the request, for a request that came in an Envelope.
    forwarded_by: Principal | None = None


def forwarded_principal(data: bytes | None) -> Principal | None:
    """The client principal a broker serialized as Kafka's default principal builder does (an
    int16 version, then DefaultPrincipalData); None when it cannot be read."""
    if data is None or len(data) < INT16.size:
        return None
    (version,) = INT16.unpack_from(data)
    try:
        # Bytes after the principal are ignored, as Kafka ignores them.
        fields, _ = DefaultPrincipalData.decode(data, version, INT16.size)
    except DecodeError:
        return None
    return Principal(fields.type, fields.name, fields.token_authenticated)


def forwarded_address(data: bytes) -> str | None:
    """The client's IP address as a broker sends it (4 or 16 raw bytes); None otherwise."""
    if len(data) not in (4, 16):
        return None
    return str(ipaddress.ip_address(data))
