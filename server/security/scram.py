"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's brokers speak it: credentials as KIP-554
stores them, and the server side of the two-round exchange."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

from server.security.errors import AuthenticationFailed

# Kafka's ScramMechanism: its number in records and requests, hash, and iteration bounds.
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
MECHANISM_NAMES = {number: name for name, (number, _) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# A client nonce is echoed in the server's first message: bounded, so that the answer stays
# small whatever the client sends (Kafka's clients send 32 characters or so).
MAX_CLIENT_NONCE = 1024


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """What the server keeps: it can check a proof, and prove itself, but never learns the
    password."""
    hash_name = MECHANISMS[mechanism][1]
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted_password, b"Server Key"), iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    hash_name = MECHANISMS[mechanism][1]
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise AuthenticationFailed(f"malformed SCRAM message attribute {part!r}")
        out[key] = value
    return out


def _username(raw: str) -> str:
    # RFC 5802 escapes ',' and '=' in names.
    return raw.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One exchange: ``respond`` is called with each client message in turn; ``complete`` and
    ``username`` tell the outcome."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism][1]
        self.lookup = lookup
        self.username = ""
        self.complete = False
        self._step = 0
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def respond(self, message: bytes) -> bytes:
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM message is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._first(text)
        if self._step == 1:
            self._step = 2
            return self._final(text)
        raise AuthenticationFailed("unexpected SCRAM message after the exchange ended")

    def _first(self, text: str) -> bytes:
        gs2, sep, bare = text.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise AuthenticationFailed("malformed SCRAM client-first message")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or "m" in attrs:
            raise AuthenticationFailed("malformed SCRAM client-first message")
        if not attrs["r"] or len(attrs["r"]) > MAX_CLIENT_NONCE:
            raise AuthenticationFailed(f"SCRAM client nonce of {len(attrs['r'])} characters "
                                       f"(expected 1 to {MAX_CLIENT_NONCE})")
        self.username = _username(attrs["n"])
        if authzid and _username(authzid.removeprefix("a=")) != self.username:
            raise AuthenticationFailed("authorization id differs from the authenticated user")
        self._credential = self.lookup(self.username, self.mechanism)
        if self._credential is None:
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        self._client_first_bare = bare
        self._nonce = attrs["r"] + secrets.token_urlsafe(24)
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        attrs = _attributes(text)
        if attrs.get("r") != self._nonce or "p" not in attrs or "c" not in attrs:
            raise AuthenticationFailed("Authentication failed: invalid SCRAM client-final message")
        credential = self._credential
        assert credential is not None  # set by the first message
        without_proof = text[:text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.hash_name, credential.stored_key, auth_message)
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except ValueError:
            raise AuthenticationFailed("Authentication failed: malformed client proof") from None
        if len(proof) != len(signature):
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), credential.stored_key):
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        self.complete = True
        verifier = base64.b64encode(_hmac(self.hash_name, credential.server_key, auth_message)).decode()
        return f"v={verifier}".encode()
