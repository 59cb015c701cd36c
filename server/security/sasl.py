"""One connection's SASL state, as Kafka's SaslServerAuthenticator keeps it: ApiVersions and
SaslHandshake first, then SaslAuthenticate rounds until the mechanism is done; after that the
session lasts ``connections.max.reauth.ms`` (KIP-368) unless the client authenticates again."""

from __future__ import annotations

from enum import Enum
from typing import Callable, Protocol

from protocol.generated.messages import ApiKey
from server.security.errors import AuthenticationFailed
from server.security.plain import PlainServer
from server.security.scram import MECHANISMS, ScramCredential, ScramServer

# The largest SASL token read: every mechanism served sends a few hundred bytes at most.
MAX_TOKEN_BYTES = 16384

# Requests a client may send before it has authenticated.
BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class Mechanism(Protocol):
    username: str
    complete: bool

    def respond(self, message: bytes) -> bytes: ...


class State(Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class IllegalSaslState(Exception):
    """A SASL request the session's state does not allow: answered ILLEGAL_SASL_STATE."""


class SaslSession:
    def __init__(self, mechanisms: tuple[str, ...], plain_users: dict[str, str],
                 scram_lookup: Callable[[str, str], ScramCredential | None], reauth_ms: int) -> None:
        self.mechanisms = mechanisms
        self.plain_users = plain_users
        self.scram_lookup = scram_lookup
        self.reauth_ms = reauth_ms
        self.state = State.HANDSHAKE
        self.username: str | None = None  # the authenticated user, kept through re-authentication
        self.expires_at: float | None = None  # monotonic seconds
        # After a SaslHandshake v0 the tokens come as bare size-prefixed frames, no headers.
        self.unframed = False
        self._server: Mechanism | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is State.AUTHENTICATED

    def fail(self) -> None:
        """Authentication failed: nothing more is accepted on this connection."""
        self.state = State.FAILED
        self._server = None

    def allows(self, api_key: int, now: float) -> str | None:
        """Why a request may not be sent now (the connection is then closed), or None."""
        if self.state is State.AUTHENTICATED:
            if self.expires_at is not None and now >= self.expires_at and api_key not in BEFORE_AUTHENTICATION:
                return "its SASL session expired without re-authentication (connections.max.reauth.ms)"
            return None
        if self.state is State.FAILED:
            return "request after failed SASL authentication"
        if api_key not in BEFORE_AUTHENTICATION:
            return f"API key {api_key} sent before SASL authentication"
        return None

    def handshake(self, mechanism: str, version: int = 1) -> bool:
        """Choose the mechanism; False when it is not enabled. Raises IllegalSaslState for a
        handshake in the middle of an exchange, or after login where the session is not one
        that must re-authenticate (KIP-368: connections.max.reauth.ms)."""
        if self.state is State.AUTHENTICATE or (self.state is State.AUTHENTICATED and self.reauth_ms <= 0):
            raise IllegalSaslState("SaslHandshake after the SASL handshake was done")
        if mechanism not in self.mechanisms:
            return False
        if mechanism == "PLAIN":
            self._server = PlainServer(self.plain_users)
        elif mechanism in MECHANISMS:
            self._server = ScramServer(mechanism, self.scram_lookup)
        else:
            return False
        self.state = State.AUTHENTICATE
        self.unframed = version == 0
        return True

    def authenticate(self, token: bytes, now: float) -> tuple[bytes, int]:
        """The server's answer and the session lifetime in ms (0: unlimited); raises
        AuthenticationFailed."""
        server = self._server
        if self.state is State.AUTHENTICATED:
            raise IllegalSaslState("SaslAuthenticate after successful authentication")
        if self.state is not State.AUTHENTICATE or server is None:
            raise AuthenticationFailed("SaslAuthenticate before SaslHandshake")
        if len(token) > MAX_TOKEN_BYTES:
            raise AuthenticationFailed(f"SASL token of {len(token)} bytes exceeds {MAX_TOKEN_BYTES}")
        answer = server.respond(token)
        if not server.complete:
            return answer, 0
        if self.username is not None and server.username != self.username:
            # Kafka refuses a re-authentication as somebody else.
            raise AuthenticationFailed("re-authentication must keep the same principal")
        self.username = server.username
        self.state = State.AUTHENTICATED
        self.unframed = False
        self._server = None
        self.expires_at = now + self.reauth_ms / 1000 if self.reauth_ms > 0 else None
        return answer, self.reauth_ms
