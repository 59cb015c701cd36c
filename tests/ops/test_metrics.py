"""The Prometheus endpoint, scraped over HTTP while brokers register, a topic is created and the
brokers die: the values follow what happens."""

from __future__ import annotations

import urllib.request

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.support.scrape import KC, Samples, gauge, jmx_exporter_name, scrape as scrape_port
from tools.processes import free_port, poll

METRICS_PORT = free_port()
pytestmark = pytest.mark.controller_properties({
    "broker.session.timeout.ms": "2000", "kraftwire.metrics.port": str(METRICS_PORT),
    "kraftwire.metadata.nodes": "controller"})  # its brokers are simulated and serve no clients

# Kafka's MBeans, as the JMX exporter's usual Kafka configuration names them.
KAFKA_MBEANS = [
    "kafka.controller:type=KafkaController,name=ActiveControllerCount",
    "kafka.controller:type=KafkaController,name=ActiveBrokerCount",
    "kafka.controller:type=KafkaController,name=FencedBrokerCount",
    "kafka.controller:type=KafkaController,name=GlobalTopicCount",
    "kafka.controller:type=KafkaController,name=GlobalPartitionCount",
    "kafka.controller:type=KafkaController,name=OfflinePartitionsCount",
    "kafka.controller:type=KafkaController,name=PreferredReplicaImbalanceCount",
    "kafka.controller:type=KafkaController,name=LastAppliedRecordOffset",
    "kafka.controller:type=KafkaController,name=LastCommittedRecordOffset",
    "kafka.controller:type=KafkaController,name=LastAppliedRecordTimestamp",
    "kafka.controller:type=KafkaController,name=LastAppliedRecordLagMs",
    "kafka.controller:type=KafkaController,name=TimedOutBrokerHeartbeatCount",
    "kafka.controller:type=KafkaController,name=MetadataErrorCount",
    "kafka.controller:type=ControllerEventManager,name=EventQueueProcessingTimeMs",
    "kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs",
    "kafka.network:type=RequestMetrics,name=TotalTimeMs",
]


def scrape() -> Samples:
    return scrape_port(METRICS_PORT)


def requests(samples: dict, api: str) -> float:
    return samples.get(("kafka_network_requestmetrics_requestspersec_total", (("request", api),)), 0.0)


def wait_for(name: str, value: float, timeout: float = 20.0) -> dict:
    poll(lambda: gauge(scrape(), name) == value, timeout,
         message=f"{name} to be {value}; it is {gauge(scrape(), name)}")
    return scrape()


def test_metric_names_are_the_jmx_exporters_lowercase_ones(controller):
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as response:
        families = {f.name for f in text_string_to_metric_families(response.read().decode())}
    assert {jmx_exporter_name(m) for m in KAFKA_MBEANS} <= families
    assert "kafka_controller_kafkacontroller_activecontrollercount" in families
    kafka_names = {n for n in families if n.startswith("kafka_")}
    assert kafka_names and all(n == n.lower() for n in kafka_names)


def test_metrics_follow_a_walkthrough(controller, broker_factory, tmp_path):
    first = scrape()
    assert gauge(first, "ActiveControllerCount") == 1
    assert gauge(first, "ActiveBrokerCount") == 0
    assert gauge(first, "GlobalTopicCount") == 0
    assert gauge(first, "LastCommittedRecordOffset") >= 0
    assert gauge(first, "LastAppliedRecordOffset") >= gauge(first, "LastCommittedRecordOffset")

    fleet = broker_factory("--fleet", "3", "--state-dir", str(tmp_path / "brokers"),
                           "--heartbeat-interval-ms", "300")
    registered = wait_for("ActiveBrokerCount", 3)
    assert gauge(registered, "FencedBrokerCount") == 0
    assert requests(registered, "BrokerRegistration") == 3
    assert requests(registered, "BrokerHeartbeat") >= 3
    assert gauge(registered, "LastCommittedRecordOffset") > gauge(first, "LastCommittedRecordOffset")
    assert registered[(KC + "metadatacommitrate_total", ())] > first[(KC + "metadatacommitrate_total", ())]
    # The active controller applies each record before it commits it: it lags by nothing.
    assert gauge(registered, "MetadataLag") == 0

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{controller.port}", client_id="metrics-test",
                             request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("walk", num_partitions=4, replication_factor=2)])
    finally:
        admin.close()
    created = wait_for("GlobalTopicCount", 1)
    assert gauge(created, "GlobalPartitionCount") == 4
    assert gauge(created, "OfflinePartitionsCount") == 0
    assert gauge(created, "PreferredReplicaImbalanceCount") == 0
    assert requests(created, "CreateTopics") == 1
    total_time = created[("kafka_network_requestmetrics_totaltimems_count", (("request", "CreateTopics"),))]
    assert total_time == 1
    assert gauge(created, "LastAppliedRecordTimestamp") > 0
    assert 0 <= gauge(created, "LastAppliedRecordLagMs") < 60_000
    assert gauge(created, "MetadataSnapshotLag") == gauge(created, "LastCommittedRecordOffset") + 1
    latency = created[(KC + "metadatacommitlatencyms_count", ())]
    assert latency > 0 and created[(KC + "metadatacommitlatencyms_sum", ())] > 0
    assert created[("kafka_controller_controllereventmanager_eventqueueprocessingtimems_count", ())] \
        >= requests(created, "BrokerHeartbeat")

    fleet.kill9()
    fenced = wait_for("FencedBrokerCount", 3)
    assert gauge(fenced, "ActiveBrokerCount") == 0
    assert gauge(fenced, "TimedOutBrokerHeartbeatCount") == 3
    # Every replica is gone, so no partition has a leader any more.
    assert gauge(fenced, "OfflinePartitionsCount") == 4
    assert gauge(fenced, "MetadataErrorCount") == 0
