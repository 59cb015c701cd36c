"""One connection's SASL state, as Kafka's SaslServerAuthenticator keeps it: ApiVersions and
SaslHandshake first, then SaslAuthenticate rounds until the mechanism is done; after that the
session lasts ``connections.max.reauth.ms`` (KIP-368) unless the client authenticates again.

A SaslHandshake v0 is followed by the mechanism's tokens as bare frames, not SaslAuthenticate
requests, as in Kafka before KIP-152. SaslHandshake and SaslAuthenticate on an authenticated
connection are in the wrong state (ILLEGAL_SASL_STATE), unless sessions expire, when a
SaslHandshake begins a re-authentication."""

from __future__ import annotations

from enum import Enum
from typing import Callable, Protocol

from protocol.generated.messages import ApiKey
from server.security.errors import AuthenticationFailed
from server.security.plain import PlainServer
from server.security.scram import MECHANISMS, ScramCredential, ScramServer, TokenLookup

# Requests a client may send before it has authenticated.
BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# The largest SASL token read: the mechanisms offered need a few hundred bytes (a user name, a
# nonce, a proof), and a client's token must never make the server build an answer of its size.
MAX_TOKEN_BYTES = 16384


class IllegalSaslState(Exception):
    """A SASL request the session's state does not allow: answered ILLEGAL_SASL_STATE."""


class Mechanism(Protocol):
    username: str
    complete: bool
    token_authenticated: bool

    def respond(self, message: bytes) -> bytes: ...


class State(Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class SaslSession:
    def __init__(self, mechanisms: tuple[str, ...], plain_users: dict[str, str],
                 scram_lookup: Callable[[str, str], ScramCredential | None], reauth_ms: int,
                 token_lookup: TokenLookup | None = None) -> None:
        self.mechanisms = mechanisms
        self.plain_users = plain_users
        self.scram_lookup = scram_lookup
        self.token_lookup = token_lookup
        self.reauth_ms = reauth_ms
        self.state = State.HANDSHAKE
        self.username: str | None = None  # the authenticated user, kept through re-authentication
        self.token_authenticated = False  # logged in with a delegation token (as its owner)
        self.expires_at: float | None = None  # monotonic seconds
        self._server: Mechanism | None = None
        self.mechanism: str | None = None  # the one chosen by the last handshake
        self.bare_tokens = False  # after a SaslHandshake v0: tokens come as bare frames

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

    def describe(self) -> str:
        """The mechanism and the user the client claimed, for a log line."""
        server = self._server
        user = server.username if server is not None and server.username else self.username
        return f"mechanism {self.mechanism or 'none'}" + (f", user {user!r}" if user else "")

    def handshake(self, mechanism: str, version: int = 1) -> bool:
        """Choose the mechanism; False when it is not enabled. Raises IllegalSaslState when
        the connection has authenticated and sessions do not expire (nothing to renew)."""
        if self.state is State.AUTHENTICATED and self.expires_at is None:
            raise IllegalSaslState("SaslHandshake request received after successful authentication")
        if self.state is State.AUTHENTICATE:
            raise IllegalSaslState("SaslHandshake request received during SASL authentication")
        self.mechanism = mechanism
        if mechanism not in self.mechanisms:
            return False
        if mechanism == "PLAIN":
            self._server = PlainServer(self.plain_users)
        elif mechanism in MECHANISMS:
            self._server = ScramServer(mechanism, self.scram_lookup, self.token_lookup)
        else:
            return False
        self.state = State.AUTHENTICATE
        self.bare_tokens = version == 0
        return True

    def authenticate(self, token: bytes, now: float) -> tuple[bytes, int]:
        """The server's answer and the session lifetime in ms (0: unlimited); raises
        AuthenticationFailed."""
        server = self._server
        if self.state is State.AUTHENTICATED:
            raise IllegalSaslState("SaslAuthenticate request received after successful authentication")
        if self.state is not State.AUTHENTICATE or server is None:
            raise IllegalSaslState("SaslAuthenticate request received before SaslHandshake")
        if len(token) > MAX_TOKEN_BYTES:
            raise AuthenticationFailed(f"SASL token of {len(token)} bytes exceeds the limit of {MAX_TOKEN_BYTES}")
        answer = server.respond(token)
        if not server.complete:
            return answer, 0
        if self.username is not None and server.username != self.username:
            # Kafka refuses a re-authentication as somebody else.
            raise AuthenticationFailed("re-authentication must keep the same principal")
        self.username = server.username
        self.token_authenticated = server.token_authenticated
        self.state = State.AUTHENTICATED
        self._server = None
        self.bare_tokens = False
        self.expires_at = now + self.reauth_ms / 1000 if self.reauth_ms > 0 else None
        return answer, self.reauth_ms
