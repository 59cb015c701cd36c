"""kafka-python 3's admin client, unchanged, against the controller.

What the client needs, learned from kafka-python 3.0.12: it negotiates versions with
ApiVersions (v4), then bootstraps with a Metadata request (v12 here, no topics) and insists on
at least one broker in the answer; it then opens a new connection to that broker for every
later request. So Metadata must be served, and the broker it lists must be this controller's
own endpoint. describe_cluster() then sends DescribeCluster (v1 here) to that node.
"""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient

from protocol.error_codes import Error
from server.config import EMBEDDED_NODE_ID
from tests.support.wire import WireBroker, api_versions, connect

# Brokers here are simulated over raw sockets and serve no clients: the controller names itself
# as the only node (kraftwire.metadata.nodes=controller), so the admin client's requests all
# come back to it.
pytestmark = pytest.mark.controller_properties({"kraftwire.metadata.nodes": "controller"})


def admin_client(controller):
    return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{controller.port}",
                            client_id="kraftwire-test", bootstrap_timeout_ms=5000,
                            request_timeout_ms=10000)


def test_api_versions_lists_what_kafka_python_looks_for(controller):
    with connect(controller) as client:
        response = api_versions(client, 4)
    assert response.error_code == Error.NONE
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[18] == (0, 4)
    assert keys[60][1] >= 1  # DescribeCluster with endpoint types
    assert 3 in keys  # Metadata: kafka-python bootstraps with it
    assert [f.name for f in response.finalized_features] == ["metadata.version"]


def test_admin_client_describe_cluster(controller):
    broker = WireBroker(controller, 7)
    assert broker.register().error_code == Error.NONE
    assert broker.heartbeat().is_fenced is False
    fenced = WireBroker(controller, 8)
    assert fenced.register().error_code == Error.NONE

    admin = admin_client(controller)
    try:
        described = admin.describe_cluster()
        # The metadata it bootstrapped from points at the controller itself.
        nodes = [(n.host, n.port) for n in admin._manager.cluster.brokers()]
    finally:
        admin.close()
    assert ("127.0.0.1", controller.port) in nodes
    assert described["cluster_id"] == controller.cluster_id
    assert described["controller_id"] == EMBEDDED_NODE_ID
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [
        (7, "127.0.0.1", 29007)]


def test_admin_client_sees_a_broker_registered_after_it_connected(controller):
    admin = admin_client(controller)
    try:
        assert admin.describe_cluster()["brokers"] == []
        broker = WireBroker(controller, 3)
        assert broker.register().error_code == Error.NONE
        assert broker.heartbeat().is_fenced is False
        assert [b["broker_id"] for b in admin.describe_cluster()["brokers"]] == [3]
    finally:
        admin.close()
