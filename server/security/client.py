"""The client side of a secured connection: what a controller uses to reach the other voters,
and what the tools use to reach a controller (Kafka's client settings ``security.protocol``,
``ssl.*``, ``sasl.mechanism`` and ``sasl.jaas.config``).

The SASL mechanisms here are the client halves of those in plain.py and scram.py: PLAIN sends
the credentials at once; SCRAM proves the password without sending it and checks that the
server knows the credential too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from dataclasses import dataclass, field
from functools import cached_property

from server.security.errors import AuthenticationFailed
from server.security.plain import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas
from server.security.scram import MECHANISMS, MIN_ITERATIONS, salted_password
from server.security.settings import SASL_PROTOCOLS, SUPPORTED_MECHANISMS, TLS_PROTOCOLS, SecurityProtocol
from server.security.tls import TlsSettings, load_keystore

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's ssl.endpoint.identification.algorithm: "https" checks the server's name, "" does not.
ENDPOINT_IDENTIFICATION = ("https", "")


@dataclass(frozen=True)
class ClientSecurity(SecurityProtocol):
    protocol: str = "PLAINTEXT"
    tls: TlsSettings = field(default_factory=TlsSettings)  # truststore; keystore for client certificates
    check_hostname: bool = True
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = ""

    @cached_property
    def ssl_context(self) -> ssl.SSLContext | None:
        """Built once per settings; ssl.SSLError or OSError when the stores cannot be read."""
        return client_context(self.tls, self.check_hostname) if self.uses_tls else None

    def mechanism(self) -> "PlainClient | ScramClient":
        if self.sasl_mechanism == "PLAIN":
            return PlainClient(self.sasl_username, self.sasl_password)
        return ScramClient(self.sasl_mechanism, self.sasl_username, self.sasl_password)


def client_context(settings: TlsSettings, check_hostname: bool) -> ssl.SSLContext:
    """Verifies the server against the truststore (the system's CAs without one) and presents
    the keystore, when there is one, to servers that ask for a client certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    _load_truststore(context, settings)
    load_keystore(context, settings)
    return context


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> None:
    if settings.truststore_location is not None:
        context.load_verify_locations(cafile=settings.truststore_location)
    elif settings.truststore_certificates is not None:
        context.load_verify_locations(cadata=settings.truststore_certificates)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)


def jaas_credentials(jaas: str, mechanism: str) -> tuple[str, str]:
    """The username and password a ``sasl.jaas.config`` gives a client of ``mechanism``;
    ValueError with the reason when it gives none."""
    module, options = parse_jaas(jaas)
    expected = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    if module != expected:
        raise ValueError(f"{mechanism} needs {expected}, got {module}")
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ValueError('needs username="..." and password="..." for the client side')
    return username, password


class ClientSettingsError(ValueError):
    """A client setting that cannot be used, naming its key."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


def client_security_from_properties(props: dict[str, str]) -> ClientSecurity:
    """Kafka's client properties (an admin client's --command-config file) as ClientSecurity;
    ClientSettingsError names the key that is wrong. Other keys are left to the caller."""
    raw = {key: value.strip() for key, value in props.items()}
    protocol = (raw.get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientSettingsError("security.protocol", f"expected one of {', '.join(PROTOCOLS)}, got {protocol}")
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if (raw.get(key) or "PEM").upper() != "PEM":
            raise ClientSettingsError(key, f"only PEM stores are supported, got {raw[key]}")
    algorithm = raw.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ENDPOINT_IDENTIFICATION:
        raise ClientSettingsError("ssl.endpoint.identification.algorithm", f"expected https or empty, got {algorithm!r}")
    tls = TlsSettings(raw.get("ssl.keystore.location"), raw.get("ssl.keystore.key"),
                      raw.get("ssl.keystore.certificate.chain"), raw.get("ssl.key.password"),
                      raw.get("ssl.truststore.location"), raw.get("ssl.truststore.certificates"))
    mechanism, username, password = "", "", ""
    if protocol in SASL_PROTOCOLS:
        mechanism = (raw.get("sasl.mechanism") or "GSSAPI").upper()
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ClientSettingsError("sasl.mechanism", f"{mechanism} is not supported; use one of "
                                                        f"{', '.join(SUPPORTED_MECHANISMS)}")
        jaas = raw.get("sasl.jaas.config")
        if not jaas:
            raise ClientSettingsError("sasl.jaas.config", f"is required for {protocol}")
        try:
            username, password = jaas_credentials(jaas, mechanism)
        except ValueError as exc:
            raise ClientSettingsError("sasl.jaas.config", str(exc)) from None
    if protocol in TLS_PROTOCOLS:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        for key, load in (("ssl.truststore.location", _load_truststore), ("ssl.keystore.location", load_keystore)):
            try:
                load(context, tls)
            except (ssl.SSLError, OSError) as exc:
                raise ClientSettingsError(key, f"cannot be used: {exc}") from None
    return ClientSecurity(protocol, tls, algorithm == "https", mechanism, username, password)


class PlainClient:
    """RFC 4616: one message, authorization id left empty (the user itself)."""

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self.password = password
        self.complete = False

    def first(self) -> bytes:
        return b"\0" + self.username.encode() + b"\0" + self.password.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        self.complete = True
        return None


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """RFC 5802 client: client-first, then client-final with the proof; the server's final
    message must carry the signature only a holder of the credential can make."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism][1]
        self.username = username
        self.password = password
        self.complete = False
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        """The next message for the server's ``challenge``; None once the exchange is done."""
        text = challenge.decode(errors="replace")
        if self._server_signature:
            self._final(text)
            return None
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise AuthenticationFailed(f"malformed SCRAM server-first message {text!r}")
        if int(iterations) < MIN_ITERATIONS:
            raise AuthenticationFailed(f"SCRAM iteration count {iterations} is below {MIN_ITERATIONS}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(salt), int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self.hash_name).digest()
        signature = hmac.new(hashlib.new(self.hash_name, client_key).digest(), auth_message, self.hash_name).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        server_key = hmac.new(salted, b"Server Key", self.hash_name).digest()
        self._server_signature = hmac.new(server_key, auth_message, self.hash_name).digest()
        return f"{without_proof},p={proof}".encode()

    def _final(self, text: str) -> None:
        if text.startswith("e="):
            raise AuthenticationFailed(f"SCRAM server error: {text[2:]}")
        try:
            verifier = base64.b64decode(text.removeprefix("v="), validate=True)
        except ValueError:
            raise AuthenticationFailed(f"malformed SCRAM server-final message {text!r}") from None
        if not text.startswith("v=") or not hmac.compare_digest(verifier, self._server_signature):
            raise AuthenticationFailed("the server's SCRAM signature is wrong: it does not hold the credential")
        self.complete = True
