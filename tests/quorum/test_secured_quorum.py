"""Three voters on a SASL_SSL controller listener, with an authorizer: they reach each other
over TLS, log in with PLAIN as the controllers' user (a super user, so CLUSTER_ACTION is
allowed), elect a leader, commit a topic and fail over when the leader is killed, with a test
broker connected over SASL_SSL all along. A voter whose
password is wrong is refused by the others: it never fetches, and says why in its log.
"""

from __future__ import annotations

import asyncio
import base64
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialUpsertion)
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.create_topics_response import CreateTopicsResponse
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.metadata_response import MetadataResponse
from server.client_connection import AuthenticationError, ConnectionLost, KafkaConnection
from server.security.client import ClientSecurity, ScramClient
from server.security.errors import AuthenticationFailed
from server.security.scram import ScramServer, credential_from_salted_password, salted_password
from server.security.tls import TlsSettings
from tests.support.certs import Pki, make_pki
from tests.support.processes import BrokerProcess
from tests.support.wire import HEARTBEAT_V, REGISTRATION_V, registration_request
from tools.active_controller import NoActiveController, connect_active
from tools.controller_process import ROOT, ControllerProcess, QuorumProcesses
from tools.processes import poll

TIMEOUT_S = 10.0
CONTROLLER, CONTROLLER_PASSWORD = "controller", "controller-secret"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
GUEST, GUEST_PASSWORD = "guest", "guest-secret"  # may log in, but is no super user


def jaas(password: str, username: str = CONTROLLER) -> str:
    """The listener's PLAIN configuration: the users it accepts, and the one this voter logs in as."""
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{username}" password="{password}" user_{CONTROLLER}="{CONTROLLER_PASSWORD}" '
            f'user_{ADMIN}="{ADMIN_PASSWORD}" user_{GUEST}="{GUEST_PASSWORD}";')


def secured(pki: Pki) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": jaas(CONTROLLER_PASSWORD),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{CONTROLLER};User:{ADMIN}",
        "controller.quorum.election.timeout.ms": "300",
        "controller.quorum.fetch.timeout.ms": "600",
        "broker.session.timeout.ms": "30000",
        # Sessions end every few seconds: the voters must log in again on new connections.
        "connections.max.reauth.ms": "2000",
    }


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def admin_security(pki: Pki) -> ClientSecurity:
    return ClientSecurity("SASL_SSL", TlsSettings(truststore_location=str(pki.ca)), True, "PLAIN", ADMIN, ADMIN_PASSWORD)


def start(tmp_path: Path, pki: Pki, outsider_jaas: str | None = None) -> QuorumProcesses:
    """The quorum; with ``outsider_jaas`` its third voter logs in with those credentials."""
    quorum = QuorumProcesses(tmp_path / "quorum", 3, secured(pki), lifetime_s=180)
    if outsider_jaas is not None:
        member = quorum.members[sorted(quorum.members)[2]]
        member.properties["listener.name.controller.plain.sasl.jaas.config"] = outsider_jaas
    return quorum.start()


@pytest.fixture
def stopper() -> Iterator[list[QuorumProcesses]]:
    started: list[QuorumProcesses] = []
    yield started
    for quorum in started:
        quorum.stop()


def leader(quorum: QuorumProcesses, security: ClientSecurity, running: list[int] | None = None):
    """The active controller's DescribeQuorum answer, asked over SASL_SSL of the running voters."""
    addresses = [quorum.members[n].address for n in (running or quorum.running())]

    async def ask():
        active = await connect_active(addresses, security, TIMEOUT_S)
        active.connection.close()
        return active.quorum

    return asyncio.run(ask())


def request(member, security: ClientSecurity, message, version: int):
    async def send():
        conn = await KafkaConnection.open(member.host, member.port, "secured-quorum-test", TIMEOUT_S, security)
        try:
            return await conn.request(message, version, TIMEOUT_S)
        finally:
            conn.close()

    return asyncio.run(send())


def create_topic(member, security: ClientSecurity, name: str) -> int:
    try:
        response = request(member, security, CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=-1)], timeout_ms=5000), 7)
    except (OSError, ConnectionLost, asyncio.TimeoutError):
        return -1
    assert isinstance(response, CreateTopicsResponse)
    return response.topics[0].error_code


def write(member, security: ClientSecurity, name: str) -> None:
    """A new leader answers NOT_CONTROLLER until its epoch's first record commits."""
    done = (Error.NONE, Error.TOPIC_ALREADY_EXISTS)
    poll(lambda: create_topic(member, security, name) in done or None, 20, interval=0.1,
         message=f"the leader to accept {name}")


def register_broker(member, security: ClientSecurity, broker_id: int) -> None:
    """A broker to place replicas on, registered and unfenced over the secured listener; its
    session (broker.session.timeout.ms) outlasts the test, so it needs no further heartbeats."""
    registered = request(member, security, registration_request(member.cluster_id, broker_id), REGISTRATION_V)
    assert registered.error_code == Error.NONE, registered

    def unfenced() -> bool:
        beat = request(member, security, BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=registered.broker_epoch,
            current_metadata_offset=registered.broker_epoch), HEARTBEAT_V)
        return beat.error_code == Error.NONE and not beat.is_fenced

    poll(unfenced, 20, interval=0.1, message=f"broker {broker_id} to be unfenced")


def admin_client_properties(pki: Pki, path: Path) -> Path:
    """Kafka client properties that log in as the admin user over SASL_SSL."""
    path.write_text("security.protocol=SASL_SSL\n"
                    f"ssl.truststore.location={pki.ca}\n"
                    "sasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                    f'username="{ADMIN}" password="{ADMIN_PASSWORD}";\n')
    return path


def topics(member, security: ClientSecurity) -> set[str]:
    response = request(member, security, MetadataRequest(topics=None), 12)
    assert isinstance(response, MetadataResponse)
    return {t.name for t in response.topics}


def test_sasl_ssl_quorum_elects_commits_and_fails_over(tmp_path, pki, admin_security, stopper):
    quorum = start(tmp_path, pki)
    stopper.append(quorum)
    first = leader(quorum, admin_security)
    assert first.leader_id in quorum.members
    # A test broker reaches the controllers over their SASL_SSL listener too, and follows the
    # active one through the failover.
    config = admin_client_properties(pki, tmp_path / "broker-controller.properties")
    broker = BrokerProcess(tmp_path / "broker", [
        "--controller", quorum.bootstrap, "--controller-config", str(config), "--node-id", "1", "--no-clients",
        "--heartbeat-interval-ms", "500", "--state-dir", str(tmp_path / "broker-state")]).start()
    try:
        broker.wait_for_state(1, "ACTIVE", timeout=30)
        _fail_over(quorum, admin_security, first.leader_id)
        assert broker.running and broker.state(1) == "ACTIVE", broker.stderr()
    finally:
        broker.kill9()


def _fail_over(quorum: QuorumProcesses, admin_security: ClientSecurity, first_leader: int) -> None:
    """A topic committed, the leader killed, another topic committed by the new leader: both are
    on every survivor."""
    write(quorum.members[first_leader], admin_security, "before-failover")
    # Every follower fetches from the leader: each one logged in and was authorized.
    poll(lambda: all(v.last_fetch_timestamp >= 0 for v in leader(quorum, admin_security).current_voters), 20,
         interval=0.1, message="every voter to fetch from the leader")

    quorum.members[first_leader].kill9()
    survivors = [n for n in quorum.members if n != first_leader]
    second = poll(lambda: _new_leader(quorum, admin_security, survivors, first_leader), 30, interval=0.1,
                  message="a new leader among the survivors")
    write(quorum.members[second.leader_id], admin_security, "after-failover")
    for node in survivors:
        poll(lambda: {"before-failover", "after-failover"} <= topics(quorum.members[node], admin_security),
             20, interval=0.1, message=f"both topics on voter {node}")


def _new_leader(quorum: QuorumProcesses, security: ClientSecurity, survivors: list[int], old: int):
    try:
        answer = leader(quorum, security, survivors)
    except NoActiveController:
        return None
    return answer if answer.leader_id != old else None


# The outsider's listener lists the right users, so the others reach it; it cannot reach them.
WRONG_PASSWORD = (jaas("not-the-password"),
                  r"cannot authenticate to voter \d+ .*over SASL_SSL: SASL authentication as 'controller' failed: "
                  r"Authentication failed: Invalid username or password")
NOT_A_SUPER_USER = (jaas(GUEST_PASSWORD, GUEST),
                    r"voter \d+ refuses \w+ with CLUSTER_AUTHORIZATION_FAILED: User:guest needs CLUSTER_ACTION")


@pytest.mark.parametrize("outsider_jaas, said", [WRONG_PASSWORD, NOT_A_SUPER_USER], ids=["wrong-password", "unauthorized"])
def test_a_voter_refused_by_the_others_never_joins(tmp_path, pki, admin_security, stopper, outsider_jaas, said):
    quorum = start(tmp_path, pki, outsider_jaas)
    stopper.append(quorum)
    outsider = sorted(quorum.members)[2]
    member = quorum.members[outsider]
    member.wait_for_stderr(said, timeout=30)
    state = leader(quorum, admin_security)
    assert state.leader_id != outsider
    register_broker(quorum.members[state.leader_id], admin_security, 1)
    write(quorum.members[state.leader_id], admin_security, "without-the-outsider")
    state = leader(quorum, admin_security)
    progress = {v.replica_id: v for v in state.current_voters}
    # It never fetched anything the leader accepted.
    assert progress[outsider].log_end_offset < state.high_watermark, progress[outsider]
    # Said once per peer, not at every retry.
    assert len(re.findall(said, member.stderr_text())) <= 2


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_scram_client_logs_in_and_checks_the_server(mechanism):
    salt = b"0123456789abcdef"
    stored = credential_from_salted_password(mechanism, salt, salted_password(mechanism, "pw", salt, 4096), 4096)

    def exchange(password: str, tamper: bool = False) -> ScramClient:
        client, server = ScramClient(mechanism, "kraft,=user", password), ScramServer(mechanism, lambda u, m: stored)
        token: bytes | None = client.first()
        while token is not None:
            answer = server.respond(token)
            if tamper and server.complete:
                answer = b"v=" + base64.b64encode(bytes(len(answer) - 2))
            token = client.respond(answer)
        assert server.username == "kraft,=user"
        return client

    assert exchange("pw").complete
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        exchange("not-pw")
    with pytest.raises(AuthenticationFailed, match="does not hold the credential"):
        exchange("pw", tamper=True)


def test_the_connection_logs_in_with_scram_and_retires_before_reauthentication(tmp_path, pki, admin_security):
    """The SCRAM client against a controller's own SCRAM server, with a credential created over
    the wire; a session lifetime makes the connection stop taking requests before it ends."""
    props = {**secured(pki), "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"}
    controller = ControllerProcess(tmp_path / "lone", props).start()
    try:
        salt = b"kraftwire-salt-1"
        created = request(controller, admin_security, AlterUserScramCredentialsRequest(deletions=[], upsertions=[
            ScramCredentialUpsertion(name="carol", mechanism=2, iterations=4096, salt=salt,
                                     salted_password=salted_password("SCRAM-SHA-512", "carol-secret", salt, 4096))]), 0)
        assert created.results[0].error_code == Error.NONE, created

        def scram(password: str) -> ClientSecurity:
            return ClientSecurity("SASL_SSL", TlsSettings(truststore_location=str(pki.ca)), True, "SCRAM-SHA-512",
                                  "carol", password)

        async def session() -> None:
            conn = await KafkaConnection.open(controller.host, controller.port, "scram-test", TIMEOUT_S,
                                              scram("carol-secret"))
            try:
                assert conn.is_open and conn.retire_at is not None
                answer = await conn.request(MetadataRequest(topics=None), 12, TIMEOUT_S)
                assert isinstance(answer, MetadataResponse)
                conn.retire_at = 0.0  # as if most of the session had passed
                assert not conn.is_open
                assert conn.closed_reason == "retired before its SASL session expires"
            finally:
                conn.close()
            with pytest.raises(AuthenticationError, match="SASL authentication as 'carol' failed"):
                await KafkaConnection.open(controller.host, controller.port, "scram-test", TIMEOUT_S, scram("nope"))

        asyncio.run(session())
    finally:
        controller.stop()


def test_an_ssl_quorum_with_client_certificates(tmp_path, pki, stopper):
    """Mutual TLS: each voter presents its keystore as client certificate, mapped to
    User:controller by ssl.principal.mapping.rules; nothing else logs it in."""
    props = {key: value for key, value in secured(pki).items() if "sasl" not in key}
    quorum = QuorumProcesses(tmp_path / "quorum", 3, {
        **props, "listener.security.protocol.map": "CONTROLLER:SSL", "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "super.users": f"User:{CONTROLLER};User:broker-1"}, lifetime_s=180).start()
    stopper.append(quorum)
    admin = ClientSecurity("SSL", TlsSettings(keystore_location=str(_client_keystore(pki)),
                                              truststore_location=str(pki.ca)))
    state = leader(quorum, admin)
    register_broker(quorum.members[state.leader_id], admin, 1)
    write(quorum.members[state.leader_id], admin, "over-mutual-tls")
    poll(lambda: all(v.last_fetch_timestamp >= 0 for v in leader(quorum, admin).current_voters), 20,
         interval=0.1, message="every voter to fetch from the leader")


def _client_keystore(pki: Pki) -> Path:
    """The test client's key and certificate in one PEM file, as ssl.keystore.location holds them."""
    path = pki.client_key.with_name("client.pem")
    path.write_bytes(pki.client_key.read_bytes() + pki.client_cert.read_bytes())
    return path


def test_the_metadata_shell_reads_a_secured_quorum_through_one_standby(tmp_path, pki, admin_security, stopper):
    quorum = start(tmp_path, pki)
    stopper.append(quorum)
    state = leader(quorum, admin_security)
    register_broker(quorum.members[state.leader_id], admin_security, 1)
    write(quorum.members[state.leader_id], admin_security, "read-by-the-shell")
    standby = quorum.members[next(n for n in sorted(quorum.members) if n != state.leader_id)]
    config = admin_client_properties(pki, tmp_path / "admin.properties")

    def shell(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tools.metadata_shell", "--controllers",
                               f"{standby.host}:{standby.port}", *args, "ls", "/image/topics/byName"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)

    found = shell("--command-config", str(config))
    assert found.returncode == 0, found.stderr
    assert "read-by-the-shell" in found.stdout.split()
    # Without the client settings the listener cannot be reached: one line, no traceback.
    refused = shell()
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error: could not read the metadata log: ") and refused.stderr.count("\n") == 1
