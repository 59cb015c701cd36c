"""A secured cluster end to end with the project's own tools: a controller on SASL_SSL with
StandardAuthorizer, two test brokers that reach it over SASL_SSL (--controller-config) and serve
their clients on SASL_SSL listeners of their own (--listener-config), and kafka-python's admin
client bootstrapped at a broker. Clients log in at the broker with PLAIN (the listener's JAAS
users), SCRAM (a credential the broker finds in its image) or a delegation token; the broker
forwards their writes with their principal, so the controller's ACLs judge the client: a user
with CREATE on a topic creates it, one without is refused TOPIC_AUTHORIZATION_FAILED. What the
broker answers from its image is judged by the same ACLs in its image, as Kafka's brokers do.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL, ACLOperation, ACLPermissionType, NewTopic, ResourcePattern, ResourceType, ScramMechanism,
    UserScramCredentialUpsertion)

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages import ApiKey
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.create_delegation_token_request import CreateDelegationTokenRequest
from protocol.generated.messages.create_delegation_token_response import CreateDelegationTokenResponse
from protocol.generated.messages.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol.generated.messages.describe_delegation_token_response import DescribeDelegationTokenResponse
from protocol.generated.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest, TopicRequest)
from protocol.generated.messages.describe_topic_partitions_response import DescribeTopicPartitionsResponse
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.metadata_response import MetadataResponse
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.messages.unregister_broker_response import UnregisterBrokerResponse
from tests.support.certs import Pki, make_pki
from tests.support.processes import BrokerProcess
from tests.support.secured_clients import (
    AUTHORIZER, PASSWORDS, PLAIN_MODULE, TOKEN_SECRET, USERS, plain_login, scram_login, secured_controller_properties,
    tls_client)
from tools.broker.__main__ import options_from_args
from tools.broker.fleet import FleetOptions
from tools.controller_process import ControllerProcess
from tools.processes import free_port

CAROL, CAROL_PASSWORD = "carol", "carol-secret"  # a SCRAM-SHA-512 user, created through a broker
TOPIC = "orders"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def listener_properties(pki: Pki) -> str:
    """A broker's client listener, in Kafka broker properties."""
    return ("listener.security.protocol.map=CLIENT:SASL_SSL\n"
            f"ssl.keystore.location={pki.server}\n"
            f"ssl.truststore.location={pki.ca}\n"
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
            f"listener.name.client.plain.sasl.jaas.config={PLAIN_MODULE} required {USERS};\n"
            f"authorizer.class.name={AUTHORIZER}\n"
            "super.users=User:admin;User:broker\n"
            f"delegation.token.secret.key={TOKEN_SECRET}\n")


def controller_client_properties(pki: Pki) -> str:
    """How the brokers reach the controller, in Kafka client properties."""
    return ("security.protocol=SASL_SSL\n"
            f"ssl.truststore.location={pki.ca}\n"
            "sasl.mechanism=PLAIN\n"
            f'sasl.jaas.config={PLAIN_MODULE} required username="broker" password="{PASSWORDS["broker"]}";\n')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[dict[int, int]]:
    """The controller and brokers 1 and 2; broker id -> its client port, and 0 -> the
    controller's port."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    controller = ControllerProcess(tmp_path / "controller", secured_controller_properties(pki))
    brokers: list[BrokerProcess] = []
    try:
        controller.start()
        (tmp_path / "listener.properties").write_text(listener_properties(pki))
        (tmp_path / "controller-client.properties").write_text(controller_client_properties(pki))
        ports = {0: controller.port}
        for node_id in (1, 2):
            ports[node_id] = free_port()
            brokers.append(BrokerProcess(tmp_path / f"broker-{node_id}", [
                "--controller", f"{controller.host}:{controller.port}", "--node-id", str(node_id),
                "--port", str(ports[node_id]), "--state-dir", str(tmp_path / f"state-{node_id}"),
                "--controller-config", str(tmp_path / "controller-client.properties"),
                "--listener-config", str(tmp_path / "listener.properties"),
                "--heartbeat-interval-ms", "500"]).start())
        for node_id, broker in zip((1, 2), brokers):
            broker.wait_for_state(node_id, "ACTIVE", timeout=30)
        yield ports
    finally:
        for broker in brokers:
            broker.kill9()
        controller.stop()


def admin(pki: Pki, port: int, user: str, password: str, mechanism: str = "PLAIN") -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_SSL", ssl_cafile=str(pki.ca),
        sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
        request_timeout_ms=15000)


def test_clients_log_in_at_a_broker_and_the_controllers_acls_judge_them(pki: Pki, cluster: dict[int, int]) -> None:
    root = admin(pki, cluster[1], "admin", PASSWORDS["admin"])
    try:
        granted = root.create_acls([ACL(f"User:{user}", "*", operation, ACLPermissionType.ALLOW,
                                        ResourcePattern(ResourceType.TOPIC, TOPIC))
                                    for user in ("alice", CAROL)
                                    for operation in (ACLOperation.CREATE, ACLOperation.DESCRIBE)])
        assert not granted["failed"], granted
        assert root.alter_user_scram_credentials([UserScramCredentialUpsertion(
            CAROL, ScramMechanism.SCRAM_SHA_512, CAROL_PASSWORD, iterations=4096)]) == {CAROL: None}
    finally:
        root.close()

    # bob may log in, but no ACL lets him create the topic: the controller refuses him.
    bob = admin(pki, cluster[1], "bob", PASSWORDS["bob"])
    try:
        refused = bob.create_topics([NewTopic(TOPIC, 3, 2)], raise_errors=False)
        assert [(t["name"], t["error_code"]) for t in refused["topics"]] == [(TOPIC, Error.TOPIC_AUTHORIZATION_FAILED)]
    finally:
        bob.close()

    alice = admin(pki, cluster[2], "alice", PASSWORDS["alice"])
    try:
        created = alice.create_topics([NewTopic(TOPIC, 3, 2)])
        assert [(t["name"], t["error_code"]) for t in created["topics"]] == [(TOPIC, Error.NONE)]
    finally:
        alice.close()

    # carol logs in with SCRAM at the other broker: her credential came to it with the metadata.
    carol = admin(pki, cluster[1], CAROL, CAROL_PASSWORD, "SCRAM-SHA-512")
    try:
        (described,) = carol.describe_topics([TOPIC])
        assert described["error_code"] == Error.NONE
        assert len(described["partitions"]) == 3
        assert all(len(p["replica_nodes"]) == 2 for p in described["partitions"]), described
    finally:
        carol.close()


@pytest.mark.parametrize("mechanism, user, password, code", [
    ("PLAIN", "alice", PASSWORDS["alice"], Error.NONE),
    ("PLAIN", "alice", "wrong", Error.SASL_AUTHENTICATION_FAILED),
    ("PLAIN", "nobody", "x", Error.SASL_AUTHENTICATION_FAILED),
    ("SCRAM-SHA-512", "nobody", "x", Error.SASL_AUTHENTICATION_FAILED),
])
def test_a_brokers_listener_refuses_wrong_logins(pki: Pki, cluster: dict[int, int], mechanism: str, user: str,
                                                 password: str, code: int) -> None:
    with tls_client("127.0.0.1", cluster[2], pki.ca) as client:
        if mechanism == "PLAIN":
            answer = plain_login(client, user, password)
        else:
            answer = scram_login(client, mechanism, user, password)
        assert answer.error_code == code, answer


def _options(tmp_path: Path, text: str) -> object:
    path = tmp_path / "listener.properties"
    path.write_text(text)
    options, _ = options_from_args(["--controller", "127.0.0.1:9093", "--node-id", "1",
                                    "--listener-config", str(path)])
    return options


def test_the_listener_config_is_read_as_a_kafka_brokers(tmp_path: Path, pki: Pki) -> None:
    options = _options(tmp_path, listener_properties(pki))
    assert isinstance(options, FleetOptions)
    assert options.listener_name == "CLIENT"
    security = options.client_security
    assert security.protocol == "SASL_SSL" and security.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert security.plain_users == PASSWORDS
    # As a Kafka broker's: the authorizer judges what the broker answers from its image, and
    # the token secret lets token holders log in.
    assert security.authorizer is not None and security.authorizer.super_users == {"User:admin", "User:broker"}
    assert security.delegation_tokens.secret_key == TOKEN_SECRET


@pytest.mark.parametrize("text, said", [
    ("listener.security.protocol.map=A:SSL,B:SSL\n", "listener.security.protocol.map: expected the one listener"),
    ("listener.security.protocol.map=CLIENT:TLS\n", "expected NAME:PROTOCOL with a Kafka security protocol"),
    ("listener.security.protocol.map=CLIENT:SSL\n", "ssl.keystore.location: listener CLIENT uses SSL and needs"),
    ("listener.security.protocol.map=CLIENT:SASL_PLAINTEXT\nsasl.enabled.mechanisms=PLAIN\n",
     "listener.name.client.plain.sasl.jaas.config: is required for PLAIN"),
    ("listener.security.protocol.map=CLIENT:SASL_PLAINTEXT\nsasl.enabled.mechanisms=GSSAPI\n",
     "GSSAPI is not supported"),
    ("listener.security.protocol.map=CLIENT:PLAINTEXT\nauthorizer.class.name=x\n",
     "authorizer.class.name: only org.apache.kafka.metadata.authorizer.StandardAuthorizer is supported"),
    ("listener.security.protocol.map=CLIENT:PLAINTEXT\nssl.keystore.locaton=x\n",
     "ssl.keystore.locaton: unknown listener configuration key"),
    ("listener.security.protocol.map=CLIENT:SSL\nssl.keystore.location=/nonexistent.pem\n",
     "the TLS stores cannot be used (ssl.keystore.location=/nonexistent.pem)"),
])
def test_a_bad_listener_config_is_refused_with_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       text: str, said: str) -> None:
    with pytest.raises(SystemExit) as exited:
        _options(tmp_path, text)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err


def test_confluent_kafka_creates_through_a_broker_as_its_user(pki: Pki, cluster: dict[int, int]) -> None:
    import confluent_kafka
    import confluent_kafka.admin as confluent

    def create(user: str, topic: str) -> None:
        client = confluent.AdminClient({
            "bootstrap.servers": f"127.0.0.1:{cluster[2]}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca), "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": PASSWORDS[user], "log_level": 0})
        client.create_topics([confluent.NewTopic(topic, 1, 1)], request_timeout=15)[topic].result(timeout=30)

    with pytest.raises(confluent_kafka.KafkaException) as refused:
        create("bob", "payments")
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    create("admin", "payments")


def _plain(pki: Pki, port: int, user: str) -> KafkaClient:
    client = tls_client("127.0.0.1", port, pki.ca)
    answer = plain_login(client, user, PASSWORDS[user])
    assert answer.error_code == Error.NONE, answer
    return client


def test_a_broker_shows_only_the_topics_its_acls_let_a_client_describe(pki: Pki, cluster: dict[int, int]) -> None:
    """Kafka's KafkaApis.handleTopicMetadataRequest and DescribeTopicPartitionsRequestHandler:
    a topic the client may not describe is left out of a listing, and refused by name."""
    root = admin(pki, cluster[1], "admin", PASSWORDS["admin"])
    try:
        assert root.create_topics([NewTopic("audit", 1, 1)])["topics"][0]["error_code"] == Error.NONE
        assert "audit" in root.list_topics()
    finally:
        root.close()
    bob = admin(pki, cluster[1], "bob", PASSWORDS["bob"])
    try:
        assert "audit" not in bob.list_topics()
        (refused,) = bob.describe_topics(["audit"])
        assert refused["error_code"] == Error.TOPIC_AUTHORIZATION_FAILED, refused
    finally:
        bob.close()
    with _plain(pki, cluster[1], "bob") as client:
        listed = client.request(DescribeTopicPartitionsRequest(topics=[]), 0)
        assert isinstance(listed, DescribeTopicPartitionsResponse)
        assert "audit" not in [t.name for t in listed.topics]
        named = client.request(DescribeTopicPartitionsRequest(topics=[TopicRequest(name="audit")]), 0)
        assert isinstance(named, DescribeTopicPartitionsResponse)
        assert [(t.name, t.error_code) for t in named.topics] == [("audit", Error.TOPIC_AUTHORIZATION_FAILED)]
    with _plain(pki, cluster[1], "admin") as client:
        named = client.request(DescribeTopicPartitionsRequest(topics=[TopicRequest(name="audit")]), 0)
        assert isinstance(named, DescribeTopicPartitionsResponse)
        assert [(t.name, t.error_code) for t in named.topics] == [("audit", Error.NONE)]


def test_a_broker_forwards_unregister_broker(pki: Pki, cluster: dict[int, int]) -> None:
    """Kafka's brokers list UnregisterBroker (64) and forward it (Admin.unregisterBroker): the
    controller answers, judging the client."""
    with _plain(pki, cluster[2], "admin") as client:
        versions = client.request(ApiVersionsRequest(), 3)
        assert isinstance(versions, ApiVersionsResponse)
        assert ApiKey.UNREGISTER_BROKER in [k.api_key for k in versions.api_keys]
        answer = client.request(UnregisterBrokerRequest(broker_id=77), 0)
        assert isinstance(answer, UnregisterBrokerResponse)
        assert answer.error_code == Error.BROKER_ID_NOT_REGISTERED, answer
    with _plain(pki, cluster[2], "bob") as client:
        answer = client.request(UnregisterBrokerRequest(broker_id=77), 0)
        assert isinstance(answer, UnregisterBrokerResponse)
        assert answer.error_code == Error.CLUSTER_AUTHORIZATION_FAILED, answer


def _token_login(pki: Pki, port: int, token_id: str, token_hmac: bytes) -> KafkaClient:
    client = tls_client("127.0.0.1", port, pki.ca)
    answer = scram_login(client, "SCRAM-SHA-512", token_id, base64.b64encode(token_hmac).decode(), token=True)
    assert answer.error_code == Error.NONE, answer
    return client


def test_a_delegation_token_logs_its_holder_in_as_its_owner(pki: Pki, cluster: dict[int, int]) -> None:
    """KIP-48 as Kafka's ScramSaslServer and KafkaApis serve it: SCRAM with tokenauth=true, the
    token id as user and its HMAC as password, at a broker and at the controller; the holder is
    the owner (the owner's ACLs apply) and may not ask for tokens; the owner describes it."""
    root = admin(pki, cluster[1], "admin", PASSWORDS["admin"])
    try:
        assert root.create_topics([NewTopic("ledger", 1, 1)])["topics"][0]["error_code"] == Error.NONE
        granted = root.create_acls([ACL("User:alice", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                                        ResourcePattern(ResourceType.TOPIC, "ledger"))])
        assert not granted["failed"], granted
    finally:
        root.close()
    with _plain(pki, cluster[1], "alice") as client:
        created = client.request(CreateDelegationTokenRequest(renewers=[]), 3)
        assert isinstance(created, CreateDelegationTokenResponse) and created.error_code == Error.NONE, created
    token_id, token_hmac = created.token_id, created.hmac
    controller_port = cluster[0]
    for port in (cluster[1], controller_port):
        with _plain(pki, port, "alice") as client:
            described = client.request(DescribeDelegationTokenRequest(owners=None), 3)
            assert isinstance(described, DescribeDelegationTokenResponse)
            assert described.error_code == Error.NONE, described
            assert [(t.token_id, t.principal_name) for t in described.tokens] == [(token_id, "alice")]
        with _plain(pki, port, "bob") as client:
            hidden = client.request(DescribeDelegationTokenRequest(owners=None), 3)
            assert isinstance(hidden, DescribeDelegationTokenResponse) and hidden.tokens == [], hidden
        with _token_login(pki, port, token_id, token_hmac) as client:
            # Kafka's allowTokenRequests: a token holder neither gets nor describes tokens.
            again = client.request(CreateDelegationTokenRequest(renewers=[]), 3)
            assert isinstance(again, CreateDelegationTokenResponse)
            assert again.error_code == Error.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, again
            described = client.request(DescribeDelegationTokenRequest(owners=None), 3)
            assert isinstance(described, DescribeDelegationTokenResponse)
            assert described.error_code == Error.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, described
    with _token_login(pki, cluster[1], token_id, token_hmac) as client:
        metadata = client.request(MetadataRequest(topics=None), 12)
        assert isinstance(metadata, MetadataResponse)
        assert "ledger" in [t.name for t in metadata.topics]  # alice's DESCRIBE applies to her token

    # Expired (a lifetime of 1 ms) and unknown tokens are refused, at a broker as at the controller.
    with _plain(pki, cluster[1], "alice") as client:
        short = client.request(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=1), 3)
        assert isinstance(short, CreateDelegationTokenResponse) and short.error_code == Error.NONE, short
    for port in (cluster[1], controller_port):
        for who, mac in ((short.token_id, short.hmac), ("no-such-token", token_hmac), (token_id, b"wrong")):
            with tls_client("127.0.0.1", port, pki.ca) as client:
                answer = scram_login(client, "SCRAM-SHA-512", who, base64.b64encode(mac).decode(), token=True)
                assert answer.error_code == Error.SASL_AUTHENTICATION_FAILED, (who, answer)
