"""SaslHandshake and SaslAuthenticate served on a listener's connections: the part of Kafka's
SaslServerAuthenticator that answers requests. The controller's router and a test broker's
client listener both log their clients in with it; ``server.security.sasl`` keeps each
connection's state."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from protocol.error_codes import Error, describe
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.generated.messages.sasl_handshake_response import SaslHandshakeResponse
from protocol.primitives import INT32
from server.context import Principal
from server.controller.delegation_tokens import DelegationTokenControl
from server.controller.scram import ScramControl
from server.network import Connection
from server.security.errors import AuthenticationFailed
from server.security.sasl import IllegalSaslState, SaslSession
from server.security.scram import MECHANISMS, ScramCredential, TokenCredential, token_credential
from server.security.settings import SecurityConfig


class SaslLogins:
    """Logs a listener's clients in with the mechanisms its configuration enables: PLAIN users
    from its JAAS entry, SCRAM credentials and delegation tokens from the metadata ``scram`` and
    ``tokens`` give (looked up at each login, so what was added or removed since takes effect
    at once)."""

    def __init__(self, security: SecurityConfig, scram: Callable[[], ScramControl],
                 tokens: Callable[[], DelegationTokenControl]) -> None:
        self.security = security
        self._scram = scram
        self._tokens = tokens

    def session(self) -> SaslSession:
        """A new connection's SASL state."""
        s = self.security
        return SaslSession(s.sasl_mechanisms, s.plain_users, self.scram_credential, s.connections_max_reauth_ms,
                           self.token_credential)

    def token_credential(self, token_id: str, mechanism: str) -> TokenCredential:
        """A delegation token's holder logs in as its owner while the token lives."""
        found = self._tokens().live_token(token_id, int(time.time() * 1000))
        if isinstance(found, Error):
            raise AuthenticationFailed(f"Token Authentication failed: token {token_id!r}: {describe(found)}")
        token, token_hmac = found
        _, _, owner = token.owner.partition(":")
        return token_credential(mechanism, owner, token_hmac)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        record = self._scram().credentials.entries.get((user, MECHANISMS[mechanism][0]))
        if record is None:
            return None
        return ScramCredential(record.salt, record.stored_key, record.server_key, record.iterations)

    def handshake(self, conn: Connection, request: SaslHandshakeRequest, version: int) -> SaslHandshakeResponse:
        session = conn.sasl
        enabled = list(self.security.sasl_mechanisms)
        if session is None:
            return SaslHandshakeResponse(error_code=Error.ILLEGAL_SASL_STATE, mechanisms=enabled)
        try:
            chosen = session.handshake(request.mechanism, version)
        except IllegalSaslState:
            return SaslHandshakeResponse(error_code=Error.ILLEGAL_SASL_STATE, mechanisms=enabled)
        if not chosen:
            # As Kafka: the answer lists what is enabled, then the connection closes.
            session.fail()
            asyncio.get_running_loop().call_soon(
                conn.authentication_failed, f"Unsupported SASL mechanism {request.mechanism}")
            return SaslHandshakeResponse(error_code=Error.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
        return SaslHandshakeResponse(mechanisms=enabled)

    def authenticate(self, conn: Connection, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
        session = conn.sasl
        if session is None:  # a listener without SASL: as Kafka's, authenticated already
            return SaslAuthenticateResponse(
                error_code=Error.ILLEGAL_SASL_STATE,
                error_message="SaslAuthenticate request received after successful authentication")
        try:
            token, lifetime_ms = session.authenticate(request.auth_bytes, time.monotonic())
        except IllegalSaslState as exc:
            if not session.authenticated:
                # Out of order before login: nothing more is accepted, as in Kafka.
                session.fail()
                asyncio.get_running_loop().call_soon(conn.authentication_failed, f"{session.describe()}: {exc}")
            return SaslAuthenticateResponse(error_code=Error.ILLEGAL_SASL_STATE, error_message=str(exc))
        except AuthenticationFailed as exc:
            detail = f"{session.describe()}: {exc}"
            session.fail()
            # The answer goes out first; then the connection closes, as Kafka closes it.
            asyncio.get_running_loop().call_soon(conn.authentication_failed, detail)
            return SaslAuthenticateResponse(error_code=Error.SASL_AUTHENTICATION_FAILED, error_message=str(exc))
        if session.authenticated and session.username is not None:
            conn.authenticated(Principal("User", session.username, session.token_authenticated))
        return SaslAuthenticateResponse(auth_bytes=token, session_lifetime_ms=lifetime_ms)

    def bare_token(self, conn: Connection, token: bytes) -> bytes | None:
        """A SASL token after SaslHandshake v0: the answer is a bare frame too, and a failure
        closes the connection with no answer, as Kafka does."""
        session = conn.sasl
        assert session is not None  # only SASL connections expect bare tokens
        try:
            answer, _ = session.authenticate(token, time.monotonic())
        except (AuthenticationFailed, IllegalSaslState) as exc:
            detail = f"{session.describe()}: {exc}"
            session.fail()
            conn.authentication_failed(detail)
            return None
        if session.authenticated and session.username is not None:
            conn.authenticated(Principal("User", session.username, session.token_authenticated))
        return INT32.pack(len(answer)) + answer
