"""docs/security.md's secured cluster with Kafka's own brokers: a kraftwire controller on
SASL_SSL with StandardAuthorizer, two Kafka brokers that log in to it as ``broker`` and serve
their clients on SASL_SSL with StandardAuthorizer of their own, and Kafka's tools logging in as
admin, alice and bob. The brokers forward a client's CreateTopics with its principal, so the
controller's ACLs judge the client: bob, with no ACL, is refused; alice, granted CREATE on the
topic, creates it; admin, a super user, produces and consumes through it.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.certs import make_pki
from tests.support.kafka import KafkaServer, kafka, run_tool
from tests.support.quorum import LIFETIME_S
from tests.support.secured_clients import (
    AUTHORIZER, PASSWORDS, PLAIN_MODULE, USERS, secured_controller_properties)
from tools.controller_process import ControllerProcess
from tools.kafka_dist import KAFKA_4
from tools.processes import poll

TOPIC = "orders"


def client_config(path: Path, ca: Path, user: str) -> Path:
    """Kafka client properties of ``user`` over SASL_SSL (the tools' --command-config)."""
    path.write_text("security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={ca}\nsasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config={PLAIN_MODULE} required username="{user}" password="{PASSWORDS[user]}";\n')
    return path


def test_kafka_brokers_in_the_secured_cluster(tmp_path: Path) -> None:
    dist = kafka(KAFKA_4)
    pki = make_pki(tmp_path / "pki")
    controller = ControllerProcess(tmp_path / "controller", secured_controller_properties(pki),
                                   lifetime_s=LIFETIME_S)
    broker_login = f'{PLAIN_MODULE} required username="broker" password="{PASSWORDS["broker"]}"'
    secured = {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
        # To the controller, and to each other, the brokers log in as broker.
        "sasl.mechanism.controller.protocol": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": f"{broker_login};",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.client.plain.sasl.jaas.config": f"{broker_login} {USERS};",
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin;User:broker",
        "offsets.topic.replication.factor": "2",
    }
    brokers: list[KafkaServer] = []
    try:
        controller.start()
        voters = ("controller.quorum.voters", f"3000@127.0.0.1:{controller.port}")
        for node_id in (1, 2):
            broker = KafkaServer(dist, tmp_path / f"broker-{node_id}", node_id, voters, secured, listener="CLIENT",
                                 protocols=("SASL_SSL", "SASL_SSL"))
            assert controller.cluster_id is not None
            broker.format(controller.cluster_id)
            brokers.append(broker.start())
        for broker in brokers:
            broker.wait_started()
        bootstrap = ",".join(b.address for b in brokers)
        admin, alice, bob = (client_config(tmp_path / f"{u}.properties", pki.ca, u) for u in ("admin", "alice", "bob"))

        def as_user(config: Path, tool: str, *args: str, check: bool = True):
            return run_tool(dist, tool, "--bootstrap-server", bootstrap, "--command-config", str(config), *args,
                            check=check)

        as_user(admin, "kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Create",
                "--operation", "Describe", "--topic", TOPIC)
        refused = as_user(bob, "kafka-topics", "--create", "--topic", TOPIC, "--partitions", "3",
                          "--replication-factor", "2", check=False)
        assert refused.returncode != 0 and "TopicAuthorizationException" in refused.stdout + refused.stderr, refused
        as_user(alice, "kafka-topics", "--create", "--topic", TOPIC, "--partitions", "3", "--replication-factor", "2")
        described = as_user(admin, "kafka-topics", "--describe", "--topic", TOPIC).stdout
        assert described.count("Partition:") == 3, described
        # bob sees no topic he has no ACL for.
        assert TOPIC not in as_user(bob, "kafka-topics", "--list").stdout.split()

        lines = [f"secured-{i}" for i in range(20)]
        run_tool(dist, "kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", TOPIC,
                 "--producer.config", str(admin), "--producer-property", "acks=all", stdin="\n".join(lines) + "\n")
        consumed = run_tool(dist, "kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", TOPIC,
                            "--consumer.config", str(admin), "--from-beginning", "--max-messages", str(len(lines)),
                            "--timeout-ms", "60000").stdout.splitlines()
        # Kafka 4.3's console tools also print that --consumer.config has a new name.
        assert sorted(line for line in consumed if line.startswith("secured-")) == sorted(lines)

        # Kafka's quorum tool at the secured controller itself.
        status = run_tool(dist, "kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{controller.port}",
                          "--command-config", str(admin), "describe", "--status").stdout
        assert "LeaderId:" in status and "3000" in status
        observers = poll(lambda: all(f'"id": {b.node_id}' in run_tool(
            dist, "kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{controller.port}",
            "--command-config", str(admin), "describe", "--status").stdout for b in brokers), 60.0, interval=1.0,
            message="both brokers among the observers")
        assert observers
    finally:
        for broker in brokers:
            broker.kill9()
        controller.stop()
