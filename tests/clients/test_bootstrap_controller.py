"""KIP-919 (``--bootstrap-controller``): an admin client that talks to the controllers only.

None of the five clients implements this mode, so the test follows what Kafka's AdminClient
does in it over the wire: it learns the controllers from DescribeCluster with EndpointType
CONTROLLER (never from Metadata), and sends its admin requests straight to the node named
there. A broker asked for controller endpoints refuses, as Kafka's brokers do.
"""

from __future__ import annotations

from protocol.client import KafkaClient
from protocol.constants import ConfigResourceType, EndpointType
from protocol.error_codes import Error
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from server.config import EMBEDDED_NODE_ID
from tests.support.clients import Cluster, Truth


def test_admin_through_the_controllers_alone(cluster: Cluster, truth: Truth) -> None:
    c = cluster.controller
    with KafkaClient(c.host, c.port, "matrix-bootstrap-controller") as admin:
        versions = admin.request(ApiVersionsRequest(client_software_name="matrix", client_software_version="1"), 3)
        assert Error.NONE == versions.error_code
        described = admin.request(DescribeClusterRequest(endpoint_type=EndpointType.CONTROLLER), 1)
        assert described.error_code == Error.NONE and described.endpoint_type == EndpointType.CONTROLLER
        assert described.cluster_id == c.cluster_id
        assert [(n.broker_id, n.host, n.port) for n in described.brokers] == [(EMBEDDED_NODE_ID, c.host, c.port)]
        assert described.controller_id == EMBEDDED_NODE_ID

    # Every later request goes to the node DescribeCluster named.
    (node,) = described.brokers
    with KafkaClient(node.host, node.port, "matrix-bootstrap-controller") as admin:
        created = admin.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="kip-919", num_partitions=6, replication_factor=3)], timeout_ms=10000), 7)
        assert created.topics[0].error_code == Error.NONE
        configs = admin.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=ConfigResourceType.BROKER, resource_name=str(node.broker_id))]), 4)
        assert configs.results[0].error_code == Error.NONE and configs.results[0].configs
        quorum = admin.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 1)
        assert quorum.topics[0].partitions[0].leader_id == described.controller_id
    replicas = truth.partitions("kip-919")
    assert replicas is not None and len(replicas) == 6 and all(len(r) == 3 for r in replicas.values())


def test_a_broker_names_no_controllers(cluster: Cluster) -> None:
    host, port = cluster.brokers[1]
    with KafkaClient(host, port, "matrix-bootstrap-controller") as admin:
        described = admin.request(DescribeClusterRequest(endpoint_type=EndpointType.CONTROLLER), 1)
        assert described.error_code == Error.MISMATCHED_ENDPOINT_TYPE
        assert "CONTROLLER" in (described.error_message or "")
        assert not described.brokers
        brokers = admin.request(DescribeClusterRequest(endpoint_type=EndpointType.BROKER), 1)
        assert brokers.error_code == Error.NONE and {b.broker_id for b in brokers.brokers} == set(cluster.brokers)
