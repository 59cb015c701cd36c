"""Real clients over real TLS and SASL against a controller process.

kafka-python and confluent-kafka (librdkafka) log in with SCRAM-SHA-512 and PLAIN over
SASL_SSL; kcat lists metadata over TLS with a client certificate. The failures a client must
see are checked too: a wrong password, an unknown user, a session past connections.max.reauth.ms,
a plaintext client on a TLS port, and a TLS client whose certificate nobody trusted.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.support.certs import Pki, make_pki
from tests.support.secured_clients import (
    ADMIN, ADMIN_PASSWORD, PLAIN_JAAS, assert_closed_by_server, plain_login, sasl_client, scram_login, tls_client)
from tools.processes import poll

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def sasl_ssl_props(pki: Pki, **extra: str) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin;User:carol",
        **extra,
    }


def admin(controller, pki: Pki, mechanism: str, user: str, password: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=f"{controller.host}:{controller.port}", security_protocol="SASL_SSL",
        ssl_cafile=str(pki.ca), sasl_mechanism=mechanism, sasl_plain_username=user,
        sasl_plain_password=password, request_timeout_ms=10000)


@pytest.fixture(scope="module")
def sasl_ssl_controller(pki: Pki, tmp_path_factory: pytest.TempPathFactory):
    from tools.controller_process import ControllerProcess
    proc = ControllerProcess(tmp_path_factory.mktemp("sasl-ssl"), sasl_ssl_props(pki))
    try:
        yield proc.start()
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def scram_user(sasl_ssl_controller, pki: Pki) -> tuple[str, str]:
    """carol (a super user) gets a SCRAM-SHA-512 credential, set by the PLAIN admin."""
    client = admin(sasl_ssl_controller, pki, "PLAIN", ADMIN, ADMIN_PASSWORD)
    try:
        result = client.alter_user_scram_credentials([
            UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_512, "carol-secret", iterations=8192)])
        assert result == {"carol": None}
        described = client.describe_user_scram_credentials(["carol"])
        assert described["carol"]["error"] is None
        assert [(i["mechanism"], i["iterations"]) for i in described["carol"]["credential_infos"]] == [
            (ScramMechanism.SCRAM_SHA_512, 8192)]
    finally:
        client.close()
    return "carol", "carol-secret"


def test_kafka_python_scram_sha_512_over_tls(sasl_ssl_controller, pki: Pki, scram_user) -> None:
    client = admin(sasl_ssl_controller, pki, "SCRAM-SHA-512", *scram_user)
    try:
        cluster = client.describe_cluster()
        assert cluster["cluster_id"] == sasl_ssl_controller.cluster_id
        assert set(client.describe_user_scram_credentials()) == {"carol"}
    finally:
        client.close()


def test_kafka_python_plain_over_tls(sasl_ssl_controller, pki: Pki) -> None:
    client = admin(sasl_ssl_controller, pki, "PLAIN", ADMIN, ADMIN_PASSWORD)
    try:
        assert client.describe_cluster()["cluster_id"] == sasl_ssl_controller.cluster_id
    finally:
        client.close()


@pytest.mark.parametrize("mechanism,user,password,message", [
    ("SCRAM-SHA-512", "carol", "carol-secret", None),
    ("SCRAM-SHA-512", "carol", "wrong", "Invalid user credentials"),
    ("SCRAM-SHA-256", "carol", "carol-secret", "Invalid user credentials"),  # no SHA-256 credential
    ("SCRAM-SHA-512", "nobody", "x", "Invalid user credentials"),
    ("PLAIN", ADMIN, ADMIN_PASSWORD, None),
    ("PLAIN", ADMIN, "wrong", "Invalid username or password"),
    ("PLAIN", "nobody", "x", "Invalid username or password"),
])
def test_logins_with_wrong_password_or_unknown_user_fail(sasl_ssl_controller, pki: Pki, scram_user, mechanism: str,
                                                         user: str, password: str, message: str | None) -> None:
    client = tls_client(sasl_ssl_controller.host, sasl_ssl_controller.port, pki.ca)
    try:
        if mechanism == "PLAIN":
            response = plain_login(client, user, password)
        else:
            response = scram_login(client, mechanism, user, password)
        if message is None:
            assert response.error_code == 0
            assert client.request(DescribeClusterRequest(), 1).error_code == 0  # a super user
        else:
            assert response.error_code == Error.SASL_AUTHENTICATION_FAILED
            assert message in response.error_message
    finally:
        client.close()


def test_failed_login_answers_the_error_then_closes(sasl_ssl_controller, pki: Pki) -> None:
    client = tls_client(sasl_ssl_controller.host, sasl_ssl_controller.port, pki.ca)
    try:
        response = plain_login(client, ADMIN, "wrong")
        assert response.error_code == Error.SASL_AUTHENTICATION_FAILED
        assert "Invalid username or password" in response.error_message
        assert_closed_by_server(client, sasl_ssl_controller, ApiVersionsRequest(), 3)
    finally:
        client.close()


def test_requests_before_authentication_close_the_connection(sasl_ssl_controller, pki: Pki) -> None:
    client = tls_client(sasl_ssl_controller.host, sasl_ssl_controller.port, pki.ca)
    try:
        assert client.request(ApiVersionsRequest(), 3).error_code == 0  # allowed first
        assert_closed_by_server(client, sasl_ssl_controller, DescribeClusterRequest(), 1)
    finally:
        client.close()


def test_plaintext_client_on_a_tls_port_gets_nothing(sasl_ssl_controller) -> None:
    client = KafkaClient(sasl_ssl_controller.host, sasl_ssl_controller.port, timeout=60)
    try:
        assert_closed_by_server(client, sasl_ssl_controller, ApiVersionsRequest(), 3)
    finally:
        client.close()


def test_confluent_kafka_scram_sha_512_and_plain(sasl_ssl_controller, pki: Pki, scram_user) -> None:
    import confluent_kafka
    import confluent_kafka.admin as confluent
    for mechanism, (user, password) in (("SCRAM-SHA-512", scram_user), ("PLAIN", (ADMIN, ADMIN_PASSWORD)),
                                        ("PLAIN", (ADMIN, "wrong"))):
        errors: list = []
        client = confluent.AdminClient({
            "bootstrap.servers": f"{sasl_ssl_controller.host}:{sasl_ssl_controller.port}",
            "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "error_cb": errors.append, "log_level": 0})
        if password == "wrong":
            with pytest.raises(confluent_kafka.KafkaException):
                client.list_topics(timeout=3)
            def refused() -> bool:
                client.poll(0.2)  # delivers the errors librdkafka reported meanwhile
                return any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors)

            poll(refused, 60, message="librdkafka to report the failed login")
            continue
        metadata = client.list_topics(timeout=10)
        assert metadata.cluster_id == sasl_ssl_controller.cluster_id


def test_session_past_reauth_time_is_closed(controller_factory) -> None:
    controller = controller_factory({
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS, "connections.max.reauth.ms": "1000"})
    client = KafkaClient(controller.host, controller.port)
    try:
        response = plain_login(client, ADMIN, ADMIN_PASSWORD)
        assert response.error_code == 0 and response.session_lifetime_ms == 1000
        assert client.request(MetadataRequest(topics=[]), 12).cluster_id == controller.cluster_id
        # The time passing is what is tested: the session's 1000 ms lifetime runs out.
        time.sleep(1.2)
        assert_closed_by_server(client, controller, MetadataRequest(topics=[]), 12)
        controller.wait_for_stderr(r"closing connection from \S+: its SASL session expired", timeout=60)
    finally:
        client.close()
    # Re-authenticating in time keeps the session.
    client = sasl_client(controller.host, controller.port, ADMIN, ADMIN_PASSWORD)
    try:
        # The time passing is what is tested: 1.2 s in all, past the first login's 1000 ms
        # lifetime, which the login in between renews (without it, the case above).
        time.sleep(0.6)
        assert plain_login(client, ADMIN, ADMIN_PASSWORD).error_code == 0
        time.sleep(0.6)
        assert client.request(MetadataRequest(topics=[]), 12).cluster_id == controller.cluster_id
    finally:
        client.close()


@pytest.fixture(scope="module")
def mtls_controller(pki: Pki, tmp_path_factory: pytest.TempPathFactory):
    from tools.controller_process import ControllerProcess
    proc = ControllerProcess(tmp_path_factory.mktemp("mtls"), {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.keystore.key": pki.server_key.read_text().replace("\n", "\\n"),
        "ssl.keystore.certificate.chain": pki.server_cert.read_text().replace("\n", "\\n"),
        "ssl.truststore.location": str(pki.ca), "ssl.client.auth": "required",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:CN=broker-1,O=kraftwire-test",
    })
    try:
        yield proc.start()
    finally:
        proc.stop()


def test_client_certificate_is_the_principal(mtls_controller, pki: Pki) -> None:
    client = tls_client(mtls_controller.host, mtls_controller.port, pki.ca, pki.client_cert, pki.client_key)
    try:
        # DescribeCluster needs ALTER on CLUSTER: only the super user has it.
        assert client.request(DescribeClusterRequest(), 1).error_code == 0
    finally:
        client.close()


def test_tls_client_without_a_trusted_certificate_is_refused(mtls_controller, pki: Pki) -> None:
    for cert, key in ((None, None), (pki.stranger_cert, pki.stranger_key)):
        # TLS 1.3: the client's side of the handshake completes; the server then refuses it.
        client = tls_client(mtls_controller.host, mtls_controller.port, pki.ca, cert, key)
        try:
            assert_closed_by_server(client, mtls_controller, ApiVersionsRequest(), 3)
        finally:
            client.close()


def kcat_list(controller, **settings: str) -> subprocess.CompletedProcess[str]:
    """kcat -L -J against the controller, with librdkafka settings given as -X KEY=VALUE."""
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    options = [arg for key, value in settings.items() for arg in ("-X", f"{key.replace('_', '.')}={value}")]
    return subprocess.run([kcat, "-b", f"{controller.host}:{controller.port}", "-L", "-J", *options, "-m", "10"],
                          capture_output=True, text=True, timeout=30)


def test_kcat_lists_metadata_over_tls(mtls_controller, pki: Pki) -> None:
    out = kcat_list(mtls_controller, security_protocol="SSL", ssl_ca_location=str(pki.ca),
                    ssl_certificate_location=str(pki.client_cert), ssl_key_location=str(pki.client_key))
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    assert listing["brokers"] == [{"id": 3000, "name": f"127.0.0.1:{mtls_controller.port}"}]


# --- SASL states and bounds, as Kafka's SaslServerAuthenticator and ControllerApis ---------------

def sasl_plaintext_props(**extra: str) -> dict[str, str]:
    return {"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
            "authorizer.class.name": AUTHORIZER, "super.users": "User:admin;User:carol", **extra}


def test_api_versions_before_login_lists_the_sasl_apis_as_kafka(sasl_ssl_controller, pki: Pki) -> None:
    client = tls_client(sasl_ssl_controller.host, sasl_ssl_controller.port, pki.ca)
    try:
        listed = {k.api_key: (k.min_version, k.max_version) for k in client.request(ApiVersionsRequest(), 3).api_keys}
        assert listed[17] == (0, 1)  # SaslHandshake: librdkafka 2.0 refuses SASL without it
        assert listed[36] == (0, 2)  # SaslAuthenticate
    finally:
        client.close()


def test_kcat_logs_in_with_sasl_plain_over_tls(sasl_ssl_controller, pki: Pki) -> None:
    out = kcat_list(sasl_ssl_controller, security_protocol="SASL_SSL", ssl_ca_location=str(pki.ca),
                    sasl_mechanism="PLAIN", sasl_username=ADMIN, sasl_password=ADMIN_PASSWORD)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["brokers"] == [{"id": 3000, "name": f"127.0.0.1:{sasl_ssl_controller.port}"}]


def test_kcat_logs_in_with_scram_over_tls(sasl_ssl_controller, pki: Pki, scram_user) -> None:
    """Debian's kcat (librdkafka 2.0.2) repeats the client nonce in its final message; Kafka
    3.9's ScramSaslServer lets it log in, as the server's nonce ends it."""
    user, password = scram_user
    out = kcat_list(sasl_ssl_controller, security_protocol="SASL_SSL", ssl_ca_location=str(pki.ca),
                    sasl_mechanism="SCRAM-SHA-512", sasl_username=user, sasl_password=password)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["brokers"] == [{"id": 3000, "name": f"127.0.0.1:{sasl_ssl_controller.port}"}]


def test_sasl_requests_after_login_are_in_the_wrong_state(sasl_ssl_controller, pki: Pki, scram_user) -> None:
    from kafka.net.sasl.scram import ScramClient

    client = tls_client(sasl_ssl_controller.host, sasl_ssl_controller.port, pki.ca)
    try:
        scram = ScramClient(*scram_user, "SCRAM-SHA-512")
        assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
        first = client.request(SaslAuthenticateRequest(auth_bytes=scram.first_message()), 2)
        scram.process_server_first_message(first.auth_bytes)
        final_message = scram.final_message()
        assert client.request(SaslAuthenticateRequest(auth_bytes=final_message), 2).error_code == 0
        # The final message replayed, and a new handshake (sessions do not expire here): both
        # answered ILLEGAL_SASL_STATE, and the session goes on.
        replayed = client.request(SaslAuthenticateRequest(auth_bytes=final_message), 2)
        assert replayed.error_code == Error.ILLEGAL_SASL_STATE
        assert replayed.error_message == "SaslAuthenticate request received after successful authentication"
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert handshake.error_code == Error.ILLEGAL_SASL_STATE
        assert client.request(DescribeClusterRequest(), 1).error_code == 0
    finally:
        client.close()


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones_then_closed(sasl_ssl_controller, pki: Pki) -> None:
    client = tls_client(sasl_ssl_controller.host, sasl_ssl_controller.port, pki.ca)
    try:
        handshake = client.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert handshake.error_code == Error.UNSUPPORTED_SASL_MECHANISM
        assert handshake.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert_closed_by_server(client, sasl_ssl_controller, ApiVersionsRequest(), 3)
    finally:
        client.close()


@pytest.mark.parametrize("first_message", [
    b"n,,n=carol,r=" + b"N" * 2000,  # a nonce over the bound, in a small message
    b"n,,n=carol,r=" + b"N" * 400_000,  # a message over the token bound, under the frame limit
], ids=["long-nonce", "huge-message"])
def test_an_oversized_scram_first_message_is_refused_without_its_nonce(sasl_ssl_controller, pki: Pki, scram_user,
                                                                       first_message: bytes) -> None:
    client = tls_client(sasl_ssl_controller.host, sasl_ssl_controller.port, pki.ca)
    try:
        assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
        answer = client.request(SaslAuthenticateRequest(auth_bytes=first_message), 2)
        assert answer.error_code == Error.SASL_AUTHENTICATION_FAILED
        assert answer.auth_bytes == b"" and len(answer.error_message or "") < 200
    finally:
        client.close()


def test_handshake_v0_takes_bare_tokens(controller_factory) -> None:
    controller = controller_factory(sasl_plaintext_props())
    client = KafkaClient(controller.host, controller.port)
    try:
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0)
        assert handshake.error_code == 0
        token = f"\0{ADMIN}\0{ADMIN_PASSWORD}".encode()
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert client.read_frame() == b""  # PLAIN's empty answer, as a bare frame
        assert client.request(DescribeClusterRequest(), 1).error_code == 0
    finally:
        client.close()


def test_a_client_retrying_a_wrong_password_is_logged_once(controller_factory) -> None:
    controller = controller_factory(sasl_plaintext_props())
    for _ in range(20):
        client = KafkaClient(controller.host, controller.port)
        try:
            assert plain_login(client, "alice", "wrong").error_code == Error.SASL_AUTHENTICATION_FAILED
            assert_closed_by_server(client, controller, ApiVersionsRequest(), 3)  # closed after the answer
        finally:
            client.close()
    lines = [line for line in controller.stderr_text().splitlines() if "Failed authentication" in line]
    assert len(lines) == 1, lines
    assert ("Failed authentication with /127.0.0.1 (mechanism PLAIN, user 'alice': "
            "Authentication failed: Invalid username or password)") in lines[0]


def test_a_failed_tls_handshake_is_logged_with_its_reason(controller_factory, pki: Pki) -> None:
    controller = controller_factory({"listener.security.protocol.map": "CONTROLLER:SSL",
                                     "ssl.keystore.location": str(pki.server),
                                     "ssl.truststore.location": str(pki.ca), "ssl.client.auth": "required"})
    client = tls_client(controller.host, controller.port, pki.ca)  # no client certificate
    try:
        assert_closed_by_server(client, controller, ApiVersionsRequest(), 3)
    finally:
        client.close()
    controller.wait_for_stderr(r"Failed authentication with /127\.0\.0\.1 \(SSL handshake failed: \S+", timeout=30)
    # The listener goes on serving clients that present a trusted certificate.
    client = tls_client(controller.host, controller.port, pki.ca, pki.client_cert, pki.client_key)
    try:
        assert client.request(ApiVersionsRequest(), 3).error_code == 0
    finally:
        client.close()


def test_sasl_requests_on_a_listener_without_sasl_are_in_the_wrong_state(controller) -> None:
    client = KafkaClient(controller.host, controller.port)
    try:
        listed = {k.api_key: (k.min_version, k.max_version) for k in client.request(ApiVersionsRequest(), 3).api_keys}
        assert listed[17] == (0, 1) and listed[36] == (0, 2)
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == Error.ILLEGAL_SASL_STATE
        assert client.request(SaslAuthenticateRequest(auth_bytes=b"\0a\0b"), 2).error_code == Error.ILLEGAL_SASL_STATE
        assert client.request(ApiVersionsRequest(), 3).error_code == 0  # served on
    finally:
        client.close()
