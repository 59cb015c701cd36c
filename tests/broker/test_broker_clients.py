"""A test broker's client listener over the wire: reads from its image, forwarding, refusals.

The client matrix (tests/clients) drives the same listener with five real clients; these
tests pin what those clients cannot show: read-your-writes on one connection, the principal
and versions of forwarding, and a forwarded request answered in bounded time while no
controller answers.
"""

from __future__ import annotations

import signal
import socket

from protocol.client import KafkaClient
from protocol.constants import ConfigResourceType
from protocol.error_codes import Error
from protocol.generated.messages import ApiKey
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.observe import wait_until
from tests.support.wire import connect

REQUEST_TIMEOUT_MS = 2000


def _brokers(controller) -> dict[int, tuple[str, int]]:
    with connect(controller) as admin:
        return {b.broker_id: (b.host, b.port) for b in admin.request(DescribeClusterRequest(), 1).brokers}


def _start_fleet(broker_factory, controller, size: int = 2) -> dict[int, tuple[str, int]]:
    broker_factory("--fleet", str(size), "--base-id", "1",
                   "--request-timeout-ms", str(REQUEST_TIMEOUT_MS))
    return wait_until(lambda: (b := _brokers(controller)) and len(b) == size and b, 30, f"{size} live brokers")


def test_a_write_is_answered_once_the_brokers_image_has_it(broker_factory, controller) -> None:
    brokers = _start_fleet(broker_factory, controller)
    with KafkaClient(*brokers[1], client_id="read-your-writes") as c:
        for i in range(5):
            name = f"ryw-{i}"
            created = c.request(CreateTopicsRequest(topics=[CreatableTopic(
                name=name, num_partitions=3, replication_factor=2)], timeout_ms=5000), 7)
            assert created.topics[0].error_code == Error.NONE
            # The very next request on the same connection, to the same broker.
            metadata = c.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)]), 12)
            (topic,) = metadata.topics
            assert topic.error_code == Error.NONE and len(topic.partitions) == 3
            assert metadata.controller_id == 1
            assert {b.node_id for b in metadata.brokers} == set(brokers)


def test_versions_and_configs_a_broker_serves(broker_factory, controller) -> None:
    brokers = _start_fleet(broker_factory, controller)
    with connect(controller) as admin:
        theirs = {k.api_key: (k.min_version, k.max_version)
                  for k in admin.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                         3).api_keys}
    with KafkaClient(*brokers[2], client_id="versions") as c:
        ours = {k.api_key: (k.min_version, k.max_version)
                for k in c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                   3).api_keys}
        # Forwarded at what the controller serves; never the broker-to-controller APIs.
        assert ours[ApiKey.CREATE_TOPICS] == theirs[ApiKey.CREATE_TOPICS]
        assert ApiKey.BROKER_HEARTBEAT not in ours and ApiKey.ENVELOPE not in ours
        assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.FIND_COORDINATOR, ApiKey.METADATA} <= set(ours)
        # Its own configs, and no other broker's: clients send those to that broker.
        described = c.request(DescribeConfigsRequest(resources=[
            DescribeConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name=str(i)) for i in (2, 1)]), 4)
        assert [r.error_code for r in described.results] == [Error.NONE, Error.INVALID_REQUEST]


def test_a_forwarded_request_is_answered_while_no_controller_answers(broker_factory, controller) -> None:
    brokers = _start_fleet(broker_factory, controller, size=1)
    # The socket's timeout is the hang guard: the broker answers within its own request timeout.
    with KafkaClient(*brokers[1], client_id="no-controller", timeout=15) as c:
        controller.proc.send_signal(signal.SIGSTOP)  # frozen: connections stay open, nothing answers
        try:
            created = c.request(CreateTopicsRequest(topics=[CreatableTopic(
                name="unanswered", num_partitions=1, replication_factor=1)], timeout_ms=5000), 7)
            # Reads are still served from the image meanwhile.
            metadata = c.request(MetadataRequest(topics=None), 12)
        finally:
            controller.proc.send_signal(signal.SIGCONT)
    (result,) = created.topics
    assert (result.name, result.error_code) == ("unanswered", Error.REQUEST_TIMED_OUT)
    assert "forwarding to the controller failed" in result.error_message
    assert {b.node_id for b in metadata.brokers} == {1}


def test_a_client_port_in_use_stops_the_broker_with_one_line(broker_factory, controller) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = broker_factory("--node-id", "7", "--port", str(port))
        assert proc.proc is not None and proc.proc.wait(timeout=30) == 1
    errors = [line for line in proc.stderr().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"broker 7 cannot listen on 127.0.0.1:{port}" in errors[0]
    assert "Traceback" not in proc.stderr()


def test_describes_a_broker_answers_from_its_image(broker_factory, controller) -> None:
    """DescribeAcls, DescribeUserScramCredentials and DescribeClientQuotas are answered from
    the broker's image, as a Kafka broker answers them; a quota set through the broker
    (AlterClientQuotas, forwarded) is described back by it at once."""
    from protocol.generated.messages.alter_client_quotas_request import (
        AlterClientQuotasRequest, EntityData, EntryData, OpData)
    from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
    from protocol.generated.messages.describe_client_quotas_request import (
        ComponentData, DescribeClientQuotasRequest)
    from protocol.generated.messages.describe_user_scram_credentials_request import (
        DescribeUserScramCredentialsRequest)
    brokers = _start_fleet(broker_factory, controller, size=1)
    with KafkaClient(*brokers[1], client_id="describes") as c:
        altered = c.request(AlterClientQuotasRequest(entries=[EntryData(
            entity=[EntityData(entity_type="client-id", entity_name="app")],
            ops=[OpData(key="consumer_byte_rate", value=4096.0)])]), 1)
        assert [e.error_code for e in altered.entries] == [Error.NONE]
        quotas = c.request(DescribeClientQuotasRequest(components=[
            ComponentData(entity_type="client-id", match_type=0, match="app")]), 1)
        assert quotas.error_code == Error.NONE
        assert [(v.key, v.value) for e in quotas.entries for v in e.values] == [("consumer_byte_rate", 4096.0)]
        acls = c.request(DescribeAclsRequest(resource_type_filter=1, operation=1, permission_type=1,
                                             pattern_type_filter=1), 3)
        assert (acls.error_code, acls.resources) == (Error.NONE, [])
        scram = c.request(DescribeUserScramCredentialsRequest(users=None), 0)
        assert (scram.error_code, scram.results) == (Error.NONE, [])
