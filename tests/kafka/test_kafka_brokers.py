"""Apache Kafka's brokers against kraftwire, driven with Kafka's own tools as an operator does.

Three Kafka brokers, formatted with Kafka's storage tool and kraftwire's cluster id, register
with kraftwire controllers and serve clients: topics are created, reconfigured, reassigned and
deleted through a broker (Kafka's Java Admin, inside kafka-topics, kafka-configs,
kafka-reassign-partitions and kafka-leader-election); records go through Kafka's console producer
and consumer with replication factor 3 and acks=all while a broker is killed, a broker shuts
down in a controlled way and the active controller is killed.

The matrix is every broker line against every quorum kraftwire offers, less what Kafka itself
cannot run: a 3.7 broker has no ``controller.quorum.bootstrap.servers`` and knows no
kraft.version 1, so it cannot join a dynamic quorum (KIP-853 came in 3.9).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.kafka import KafkaServer, Writer, kafka, release_for, run_tool
from tests.support.quorum import DYNAMIC, SINGLE, STATIC, ControllerQuorum
from tools.kafka_dist import KAFKA_3_7, KAFKA_3_9, KAFKA_4, Distribution
from tools.processes import poll

MATRIX = [(version, kind) for version in (KAFKA_3_9, KAFKA_4, KAFKA_3_7) for kind in (SINGLE, STATIC, DYNAMIC)
          if not (version == KAFKA_3_7 and kind == DYNAMIC)]
TOPIC = "events"
WAIT_S = 120.0
JVM_TERMINATED = 143
PARTITION_LINE = re.compile(r"Partition: (\d+)\s+Leader: (-?\d+|none)\s+Replicas: ([\d,]*)\s+Isr: ([\d,]*)")


class Cluster:
    def __init__(self, dist: Distribution, quorum: ControllerQuorum, brokers: dict[int, KafkaServer]) -> None:
        self.dist = dist
        self.quorum = quorum
        self.brokers = brokers

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values() if b.running)

    def tool(self, name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_tool(self.dist, name, "--bootstrap-server", self.bootstrap, *args, check=check)

    def partitions(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """Partition -> (leader, replicas, ISR), as kafka-topics --describe prints them."""
        out = self.tool("kafka-topics", "--describe", "--topic", topic).stdout
        return {int(p): (-1 if leader == "none" else int(leader), [int(r) for r in replicas.split(",") if r],
                         [int(r) for r in isr.split(",") if r])
                for p, leader, replicas, isr in PARTITION_LINE.findall(out)}


@pytest.fixture(params=MATRIX, ids=[f"kafka-{v}-{k}" for v, k in MATRIX])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    version, kind = request.param
    dist = kafka(version)
    quorum = ControllerQuorum(kind, tmp_path, release_for(version), dist)
    brokers = {n: KafkaServer(dist, tmp_path / f"broker-{n}", n, quorum.for_brokers) for n in (1, 2, 3)}
    try:
        quorum.start()
        for broker in brokers.values():
            broker.format(quorum.cluster_id)
            broker.start()
        for broker in brokers.values():
            broker.wait_started()
        yield Cluster(dist, quorum, brokers)
    finally:
        for broker in brokers.values():
            broker.kill9()
        quorum.stop()


def consume(cluster: Cluster, topic: str, count: int) -> list[str]:
    done = cluster.tool("kafka-console-consumer", "--topic", topic, "--from-beginning",
                        "--max-messages", str(count), "--timeout-ms", "60000")
    return done.stdout.splitlines()


def fully_replicated(cluster: Cluster, topic: str, replicas: int = 3) -> bool:
    parts = cluster.partitions(topic)
    return bool(parts) and all(leader >= 0 and len(isr) == replicas for leader, _, isr in parts.values())


def test_kafka_brokers_serve_through_kraftwire(cluster: Cluster, tmp_path: Path) -> None:
    brokers = cluster.brokers
    # Registered and unfenced, and fetching the metadata log as the quorum's observers.
    quorum = cluster.quorum.status()
    assert int(quorum["LeaderId"]) in cluster.quorum.members
    # Kafka 3.7's tool lists observers by id; 3.9's as objects with their directory ids.
    observers = json.loads(quorum["CurrentObservers"])
    assert {o["id"] if isinstance(o, dict) else o for o in observers} >= {1, 2, 3}

    # A topic through a broker, replication factor 3, and its configs altered.
    cluster.tool("kafka-topics", "--create", "--topic", TOPIC, "--partitions", "6", "--replication-factor", "3")
    poll(lambda: fully_replicated(cluster, TOPIC), WAIT_S, interval=0.5, message="every partition with 3 in sync")
    cluster.tool("kafka-configs", "--entity-type", "topics", "--entity-name", TOPIC, "--alter",
                 "--add-config", "retention.ms=3600000,min.insync.replicas=2")
    described = cluster.tool("kafka-configs", "--entity-type", "topics", "--entity-name", TOPIC, "--describe").stdout
    assert "retention.ms=3600000" in described and "min.insync.replicas=2" in described

    # Records with acks=all, read back whole.
    lines = [f"first-{i}" for i in range(50)]
    run_tool(cluster.dist, "kafka-console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", TOPIC,
             "--producer-property", "acks=all", stdin="\n".join(lines) + "\n")
    assert sorted(consume(cluster, TOPIC, len(lines))) == sorted(lines)

    # A reassignment reverses partition 0's replicas; a preferred election makes its new first
    # replica the leader.
    leader, replicas, _ = cluster.partitions(TOPIC)[0]
    target = list(reversed(replicas))
    plan = tmp_path / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": target}]}))
    cluster.tool("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
    poll(lambda: "is completed" in cluster.tool("kafka-reassign-partitions", "--reassignment-json-file", str(plan),
                                                "--verify").stdout, WAIT_S, interval=1.0, message="the reassignment")
    assert cluster.partitions(TOPIC)[0][1] == target
    cluster.tool("kafka-leader-election", "--election-type", "PREFERRED", "--topic", TOPIC, "--partition", "0",
                 check=False)
    poll(lambda: cluster.partitions(TOPIC)[0][0] == target[0], WAIT_S, interval=1.0,
         message=f"broker {target[0]} leads partition 0")

    writer = Writer(cluster.dist, cluster.bootstrap, TOPIC)
    try:
        # kill -9 of a broker: it is fenced, leaders and ISRs move off it, producing goes on; back
        # again, it rejoins every ISR.
        victim = brokers[2]
        victim.kill9()
        poll(lambda: all(2 not in isr and leader != 2 for leader, _, isr in cluster.partitions(TOPIC).values()),
             WAIT_S, interval=1.0, message="broker 2 out of every ISR and leadership")
        at_kill = writer.sent
        victim.start().wait_started()
        poll(lambda: fully_replicated(cluster, TOPIC), WAIT_S, interval=1.0, message="broker 2 back in every ISR")

        # SIGTERM: Kafka's controlled shutdown moves broker 3's leaderships away before it stops.
        assert victim.running
        stopping = brokers[3]
        # The JVM's exit status after SIGTERM and its shutdown hooks.
        assert stopping.stop() == JVM_TERMINATED
        assert re.search(r"[Cc]ontrolled shutdown", stopping.log()), stopping.log()[-3000:]
        assert all(leader != 3 for leader, _, _ in cluster.partitions(TOPIC).values())
        stopping.start().wait_started()
        poll(lambda: fully_replicated(cluster, TOPIC), WAIT_S, interval=1.0, message="broker 3 back in every ISR")

        # kill -9 of the active controller: the brokers follow whoever leads next, and writes
        # through them go on.
        # Kafka's tool names the leader, as an operator would find it.
        old = int(cluster.quorum.status()["LeaderId"])
        member = cluster.quorum.members[old]
        member.kill9()
        if cluster.quorum.kind == SINGLE:
            member.start()
        else:
            cluster.quorum.wait_for_leader(exclude=frozenset({old}), timeout=WAIT_S)
        cluster.tool("kafka-topics", "--create", "--topic", "after-failover", "--partitions", "3",
                     "--replication-factor", "3")
        poll(lambda: fully_replicated(cluster, "after-failover"), WAIT_S, interval=1.0,
             message="the topic created after the failover")
        if cluster.quorum.kind != SINGLE:
            member.start()
        before = writer.sent
        poll(lambda: writer.sent > before + 50, WAIT_S, message="the writer going on")
    finally:
        sent = writer.finish()
    assert sent > at_kill
    # Every record the console producer was given arrived (acks=all, replication factor 3).
    got = consume(cluster, TOPIC, len(lines) + sent)
    assert sorted(got) == sorted(lines + [f"record-{i}" for i in range(sent)])

    # Deleted through a broker.
    cluster.tool("kafka-topics", "--delete", "--topic", "after-failover")
    poll(lambda: "after-failover" not in cluster.tool("kafka-topics", "--list").stdout.split(), WAIT_S,
         interval=1.0, message="the topic gone")
