"""Raw protocol clients over TLS and SASL, for requests no stock client sends to a controller;
and the secured controller of docs/security.md's cluster end to end."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from protocol.client import KafkaClient
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.generated.messages.sasl_handshake_response import SaslHandshakeResponse
from protocol.message import Message
from tests.support.certs import Pki
from tests.support.wire import closed_by_peer
from tools.controller_process import ControllerProcess

HANDSHAKE_V = 1
AUTHENTICATE_V = 2
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
              'user_broker="broker-secret";')

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
PASSWORDS = {"admin": "admin-secret", "broker": "broker-secret", "alice": "alice-secret", "bob": "bob-secret"}
USERS = " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
TOKEN_SECRET = "the-delegation-token-secret"  # the same on the controller and the brokers, as in Kafka


def secured_controller_properties(pki: Pki) -> dict[str, str]:
    """docs/security.md's secured controller: SASL_SSL, PLAIN users, StandardAuthorizer."""
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.controller.plain.sasl.jaas.config": f"{PLAIN_MODULE} required {USERS};",
        "authorizer.class.name": AUTHORIZER,
        # The brokers log in as broker: CLUSTER_ACTION lets them register and forward.
        "super.users": "User:admin;User:broker",
        "delegation.token.secret.key": TOKEN_SECRET,
    }


def tls_client(host: str, port: int, ca: Path, cert: Path | None = None, key: Path | None = None) -> KafkaClient:
    client = KafkaClient(host, port)
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key) if key else None)
    client.sock = context.wrap_socket(client.sock, server_hostname=host)
    return client


def plain_login(client: KafkaClient, user: str, password: str) -> SaslAuthenticateResponse:
    handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), HANDSHAKE_V)
    assert isinstance(handshake, SaslHandshakeResponse) and handshake.error_code == 0, handshake
    response = client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()),
                              AUTHENTICATE_V)
    assert isinstance(response, SaslAuthenticateResponse)
    return response


def sasl_client(host: str, port: int, user: str, password: str) -> KafkaClient:
    """A SASL_PLAINTEXT connection logged in with PLAIN."""
    client = KafkaClient(host, port)
    response = plain_login(client, user, password)
    assert response.error_code == 0, response.error_message
    return client


def scram_client(user: str, password: str, mechanism: str, token: bool = False) -> Any:
    """kafka-python's own SCRAM client; with ``token``, one that logs in with a delegation token
    as Kafka's Java client does (ScramExtensions: ``tokenauth=true`` after the nonce, the token
    id as user, the HMAC in base64 as password), which kafka-python does not offer."""
    from kafka.net.sasl.scram import ScramClient

    class TokenScramClient(ScramClient):  # type: ignore[misc]
        def first_message(self) -> bytes:
            bare: bytes = b"n=" + self.user + b",r=" + self.nonce + b",tokenauth=true"
            self.auth_message += bare
            return b"n,," + bare

    return (TokenScramClient if token else ScramClient)(user, password, mechanism)


def scram_login(client: KafkaClient, mechanism: str, user: str, password: str,
                token: bool = False) -> SaslAuthenticateResponse:
    """Both SCRAM rounds with kafka-python's own SCRAM client; the first failing (or the last)
    SaslAuthenticate response. The server's signature is checked when the login succeeds."""
    scram = scram_client(user, password, mechanism, token)
    handshake = client.request(SaslHandshakeRequest(mechanism=mechanism), HANDSHAKE_V)
    assert isinstance(handshake, SaslHandshakeResponse) and handshake.error_code == 0, handshake
    first = client.request(SaslAuthenticateRequest(auth_bytes=scram.first_message()), AUTHENTICATE_V)
    assert isinstance(first, SaslAuthenticateResponse)
    if first.error_code:
        return first
    scram.process_server_first_message(first.auth_bytes)
    final = client.request(SaslAuthenticateRequest(auth_bytes=scram.final_message()), AUTHENTICATE_V)
    assert isinstance(final, SaslAuthenticateResponse)
    if final.error_code == 0:
        scram.process_server_final_message(final.auth_bytes)  # raises on a wrong server signature
    return final


def assert_closed_by_server(client: KafkaClient, controller: ControllerProcess,
                            request: Message | None = None, version: int = 0) -> None:
    """The server closes the connection itself (after reading ``request``, when one is given)
    and goes on serving: a stopped server closes connections too. Whether the client sees an
    orderly end or a reset depends on what it sent after the server decided, so both count."""
    if request is not None:
        client.send(request, version)
    assert closed_by_peer(client.sock, timeout=60), "the server kept the connection open"
    assert controller.running, controller.stderr_text()[-2000:]
