"""A SASL listener before and around login, over real sockets: frames capped at
sasl.server.max.receive.size from their size prefix, bytes of clients that never log in kept
out of queued.max.request.bytes, SaslHandshake v0 with unframed tokens, and the requests that
come out of turn answered ILLEGAL_SASL_STATE, as Kafka answers them."""

from __future__ import annotations

import socket
import struct

import pytest

from protocol.client import ConnectionClosed, KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages import ApiKey
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.security.clients import ADMIN, ADMIN_PASSWORD, AUTHENTICATE_V, HANDSHAKE_V, PLAIN_JAAS, plain_login

MAX_RECEIVE = 4096
QUEUED = 200_000


@pytest.fixture(scope="module")
def sasl_controller(tmp_path_factory: pytest.TempPathFactory):
    from tests.conftest import ControllerProcess
    proc = ControllerProcess(tmp_path_factory.mktemp("sasl-bounds"), {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.server.max.receive.size": str(MAX_RECEIVE), "queued.max.request.bytes": str(QUEUED),
    })
    try:
        yield proc.start()
    finally:
        proc.stop()


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(30)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_large_frame_before_login_closes_at_its_size_prefix(sasl_controller) -> None:
    sock = socket.create_connection((sasl_controller.host, sasl_controller.port))
    try:
        # Only the prefix is sent: the server must judge it without waiting for the body.
        sock.sendall(struct.pack(">i", 100 * 1024 * 1024))
        assert closed_by_server(sock)
    finally:
        sock.close()
    assert "exceeds the limit of 4096" in sasl_controller.stderr_text()


def test_after_login_frames_may_be_larger(sasl_controller) -> None:
    client = KafkaClient(sasl_controller.host, sasl_controller.port)
    try:
        assert plain_login(client, ADMIN, ADMIN_PASSWORD).error_code == 0
        # An ApiVersions padded past the pre-login cap (bytes after the body are ignored).
        request = client.request(ApiVersionsRequest(client_software_name="x" * (2 * MAX_RECEIVE)), 3)
        assert request.error_code == 0
    finally:
        client.close()


def test_clients_that_never_log_in_do_not_hold_the_shared_bound(sasl_controller) -> None:
    """Strangers each park most of a pre-login frame; together they hold more than
    queued.max.request.bytes, and a logged-in client is still read and served."""
    strangers = [socket.create_connection((sasl_controller.host, sasl_controller.port)) for _ in range(60)]
    client = KafkaClient(sasl_controller.host, sasl_controller.port)
    try:
        for s in strangers:
            s.sendall(struct.pack(">i", MAX_RECEIVE) + bytes(MAX_RECEIVE - 10))
        assert 60 * (MAX_RECEIVE - 10) > QUEUED
        assert plain_login(client, ADMIN, ADMIN_PASSWORD).error_code == 0
        padded = client.request(ApiVersionsRequest(client_software_name="y" * 30_000), 3)
        assert padded.error_code == 0
    finally:
        client.close()
        for s in strangers:
            s.close()


def test_api_versions_lists_sasl_handshake_v0_and_v1(sasl_controller) -> None:
    client = KafkaClient(sasl_controller.host, sasl_controller.port)
    try:
        versions = {k.api_key: (k.min_version, k.max_version) for k in client.request(ApiVersionsRequest(), 3).api_keys}
        assert versions[ApiKey.SASL_HANDSHAKE] == (0, 1)
    finally:
        client.close()


def test_sasl_handshake_v0_then_unframed_tokens(sasl_controller) -> None:
    client = KafkaClient(sasl_controller.host, sasl_controller.port)
    try:
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = f"\0{ADMIN}\0{ADMIN_PASSWORD}".encode()
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        (size,) = struct.unpack(">i", client.sock.recv(4))
        assert size == 0  # PLAIN's answer is an empty token
        assert client.request(ApiVersionsRequest(), 3).error_code == 0  # Kafka requests again
    finally:
        client.close()


def test_sasl_requests_out_of_turn(sasl_controller) -> None:
    client = KafkaClient(sasl_controller.host, sasl_controller.port)
    try:
        assert plain_login(client, ADMIN, ADMIN_PASSWORD).error_code == 0
        again = client.request(SaslHandshakeRequest(mechanism="PLAIN"), HANDSHAKE_V)
        assert again.error_code == Error.ILLEGAL_SASL_STATE
        replayed = client.request(SaslAuthenticateRequest(auth_bytes=f"\0{ADMIN}\0{ADMIN_PASSWORD}".encode()),
                                  AUTHENTICATE_V)
        assert replayed.error_code == Error.ILLEGAL_SASL_STATE
        assert client.request(ApiVersionsRequest(), 3).error_code == 0  # still logged in, still open
    finally:
        client.close()


def test_an_unsupported_mechanism_is_named_then_the_connection_closes(sasl_controller) -> None:
    client = KafkaClient(sasl_controller.host, sasl_controller.port)
    try:
        answer = client.request(SaslHandshakeRequest(mechanism="GSSAPI"), HANDSHAKE_V)
        assert answer.error_code == Error.UNSUPPORTED_SASL_MECHANISM and answer.mechanisms == ["PLAIN"]
        with pytest.raises((ConnectionClosed, ConnectionResetError)):
            client.request(ApiVersionsRequest(), 3)
    finally:
        client.close()


def test_wrong_passwords_are_logged_once_per_client_address(sasl_controller) -> None:
    for _ in range(5):
        client = KafkaClient(sasl_controller.host, sasl_controller.port)
        try:
            assert plain_login(client, ADMIN, "wrong").error_code == Error.SASL_AUTHENTICATION_FAILED
        finally:
            client.close()
    lines = [line for line in sasl_controller.stderr_text().splitlines() if "SASL authentication from" in line]
    assert len(lines) == 1, lines
