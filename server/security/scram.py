"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's brokers speak it: credentials as KIP-554
stores them, and the server side of the two-round exchange.

A client-first message may end with extensions (``,tokenauth=true``, Kafka's ScramExtensions):
with ``tokenauth=true`` the user name is a delegation token's id, the password its HMAC in
base64, and the client logs in as the token's owner (KIP-48)."""

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


def _attributes(message: str, extensions: dict[str, str] | None = None) -> dict[str, str]:
    """The one-letter attributes of a message; the longer keys that follow them go into
    ``extensions`` where the message may carry some (a client-first message)."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and key and extensions is not None and (len(key) > 1 or extensions):
            extensions[key] = value
        elif not sep or len(key) != 1:
            raise AuthenticationFailed(f"malformed SCRAM message attribute {part!r}")
        else:
            out[key] = value
    return out


def _username(raw: str) -> str:
    # RFC 5802 escapes ',' and '=' in names.
    return raw.replace("=2C", ",").replace("=3D", "=")


@dataclass(frozen=True)
class TokenCredential:
    """What a delegation token login checks: the token owner's user name, and the credential
    of the token's HMAC as a password."""

    owner: str
    credential: ScramCredential


def token_credential(mechanism: str, owner: str, token_hmac: bytes) -> TokenCredential:
    """The credential a token holder proves: its password is the HMAC in base64, as Kafka's
    DelegationTokenCache derives it."""
    salt = secrets.token_bytes(16)
    password = base64.b64encode(token_hmac).decode()
    salted = salted_password(mechanism, password, salt, MIN_ITERATIONS)
    return TokenCredential(owner, credential_from_salted_password(mechanism, salt, salted, MIN_ITERATIONS))


# (token id, mechanism) -> the token's credential; raises AuthenticationFailed for an unknown
# or expired token.
TokenLookup = Callable[[str, str], TokenCredential]


class ScramServer:
    """One exchange: ``respond`` is called with each client message in turn; ``complete`` and
    ``username`` tell the outcome (with a token, the user is the token's owner and
    ``token_authenticated`` is set)."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None],
                 token_lookup: TokenLookup | None = None) -> None:
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism][1]
        self.lookup = lookup
        self.token_lookup = token_lookup
        self.username = ""
        self.token_authenticated = False
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
        extensions: dict[str, str] = {}
        attrs = _attributes(bare, extensions)
        if "n" not in attrs or "r" not in attrs or "m" in attrs:
            raise AuthenticationFailed("malformed SCRAM client-first message")
        if not attrs["r"] or len(attrs["r"]) > MAX_CLIENT_NONCE:
            raise AuthenticationFailed(f"SCRAM client nonce of {len(attrs['r'])} characters "
                                       f"(expected 1 to {MAX_CLIENT_NONCE})")
        self.username = _username(attrs["n"])
        if authzid and _username(authzid.removeprefix("a=")) != self.username:
            raise AuthenticationFailed("authorization id differs from the authenticated user")
        if extensions.get("tokenauth", "").lower() == "true":
            if self.token_lookup is None:
                raise AuthenticationFailed("Token Authentication failed: delegation tokens are not enabled")
            token = self.token_lookup(self.username, self.mechanism)
            self.username, self._credential, self.token_authenticated = token.owner, token.credential, True
        else:
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
        # Kafka's ScramSaslServer wants the nonce to end with the server's: librdkafka before
        # 2.6.1 sends the client nonce twice in front of it, and Kafka lets that log in.
        if not attrs.get("r", "").endswith(self._nonce) or "p" not in attrs or "c" not in attrs:
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
