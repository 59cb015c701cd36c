"""Every broker RPC and admin API against ACLs, over SASL: refused without the ACL (with the
error code Kafka's controller answers), served with it, and nothing written when refused.

alice has no ACL at first; each case grants her exactly the operation Kafka's controller checks
for that API, then takes it away again. admin is a super user and reads the log's end.
"""

from __future__ import annotations

import struct
from typing import Callable

import pytest

from protocol.client import KafkaClient
from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType
from protocol.error_codes import Error
from protocol.generated.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.generated.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest, ReassignablePartition, ReassignableTopic)
from protocol.generated.messages.alter_partition_request import AlterPartitionRequest
from protocol.generated.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialUpsertion)
from protocol.generated.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from protocol.generated.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from protocol.generated.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest, TopicRequest
from protocol.generated.messages.describe_user_scram_credentials_request import DescribeUserScramCredentialsRequest
from protocol.generated.messages.elect_leaders_request import ElectLeadersRequest
from protocol.generated.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.generated.messages.envelope_request import EnvelopeRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.generated.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from protocol.generated.messages.vote_request import VoteRequest
from protocol.headers import encode_request_header
from protocol.message import Message, api_key_of
from server.security.acl import CLUSTER_NAME
from tests.support.secured_clients import ADMIN, ADMIN_PASSWORD, PLAIN_JAAS, sasl_client
from tests.support.wire import registration_request

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_CONFIG, BROKER_CONFIG = 2, 4
METADATA_TOPIC_ID = b"\x00" * 15 + b"\x01"  # Kafka's fixed id of __cluster_metadata
CLUSTER, TOPIC = AclResourceType.CLUSTER, AclResourceType.TOPIC
CLUSTER_DENIED, TOPIC_DENIED = Error.CLUSTER_AUTHORIZATION_FAILED, Error.TOPIC_AUTHORIZATION_FAILED


def error_codes(message: Message) -> set[int]:
    codes: set[int] = set()
    for name, _ in message.FIELDS:
        value = getattr(message, name)
        if name == "error_code":
            codes.add(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    codes |= error_codes(item)
        elif isinstance(value, Message):
            codes |= error_codes(value)
    return codes


def forwarded(inner: Message, version: int) -> EnvelopeRequest:
    """alice's CreateTopics as a broker forwards it."""
    out = bytearray()
    encode_request_header(out, api_key_of(inner), version, 1, "broker")
    inner.encode_into(out, version)
    principal = struct.pack(">h", 0) + b"\x05User\x06alice" + b"\x00\x00"
    return EnvelopeRequest(request_data=bytes(out), request_principal=principal, client_host_address=bytes([127, 0, 0, 1]))


# (API, request factory, version, operation granted, resource, error when refused)
Case = tuple[str, Callable[[str], Message], int, AclOperation, AclResourceType, Callable[[str], str], int]
CASES: list[Case] = [
    ("BrokerRegistration", lambda cid: registration_request(cid, 7), 4, AclOperation.CLUSTER_ACTION, CLUSTER,
     lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("BrokerHeartbeat", lambda cid: BrokerHeartbeatRequest(broker_id=7, broker_epoch=1), 1, AclOperation.CLUSTER_ACTION,
     CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("AlterPartition", lambda cid: AlterPartitionRequest(broker_id=7, broker_epoch=1), 3, AclOperation.CLUSTER_ACTION,
     CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("AllocateProducerIds", lambda cid: AllocateProducerIdsRequest(broker_id=7, broker_epoch=1), 0,
     AclOperation.CLUSTER_ACTION, CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("AssignReplicasToDirs", lambda cid: AssignReplicasToDirsRequest(broker_id=7, broker_epoch=1), 0,
     AclOperation.CLUSTER_ACTION, CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("Fetch", lambda cid: FetchRequest(replica_id=7, max_wait_ms=0, topics=[FetchTopic(
        topic="__cluster_metadata", topic_id=METADATA_TOPIC_ID, partitions=[FetchPartition(partition=0)])]), 13,
     AclOperation.CLUSTER_ACTION, CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("UnregisterBroker", lambda cid: UnregisterBrokerRequest(broker_id=7), 0, AclOperation.ALTER, CLUSTER,
     lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("UpdateFeatures", lambda cid: UpdateFeaturesRequest(feature_updates=[FeatureUpdateKey(
        feature="metadata.version", max_version_level=25)], validate_only=True), 1, AclOperation.ALTER, CLUSTER,
     lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("ElectLeaders", lambda cid: ElectLeadersRequest(topic_partitions=None), 2, AclOperation.ALTER, CLUSTER,
     lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("AlterPartitionReassignments", lambda cid: AlterPartitionReassignmentsRequest(topics=[ReassignableTopic(
        name="t", partitions=[ReassignablePartition(partition_index=0, replicas=None)])]), 0, AclOperation.ALTER,
     CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("ListPartitionReassignments", lambda cid: ListPartitionReassignmentsRequest(), 0, AclOperation.DESCRIBE,
     CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("DescribeCluster", lambda cid: DescribeClusterRequest(), 1, AclOperation.ALTER, CLUSTER,
     lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("DescribeQuorum", lambda cid: DescribeQuorumRequest(topics=[TopicData(
        topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 1, AclOperation.DESCRIBE,
     CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("CreateAcls", lambda cid: CreateAclsRequest(creations=[AclCreation(
        resource_type=TOPIC, resource_name="x", resource_pattern_type=PatternType.LITERAL, principal="User:bob",
        host="*", operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)]), 3, AclOperation.ALTER, CLUSTER,
     lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("DescribeAcls", lambda cid: DescribeAclsRequest(resource_type_filter=AclResourceType.ANY,
                                                     resource_name_filter=None, pattern_type_filter=PatternType.ANY,
                                                     principal_filter=None, host_filter=None,
                                                     operation=AclOperation.ANY, permission_type=AclPermissionType.ANY), 3,
     AclOperation.DESCRIBE, CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("DeleteAcls", lambda cid: DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=TOPIC, resource_name_filter="x", pattern_type_filter=PatternType.LITERAL,
        principal_filter="User:bob", host_filter=None, operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)]), 3,
     AclOperation.ALTER, CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("AlterUserScramCredentials", lambda cid: AlterUserScramCredentialsRequest(upsertions=[ScramCredentialUpsertion(
        name="dave", mechanism=2, iterations=4096, salt=b"salt", salted_password=b"p" * 64)]), 0, AclOperation.ALTER,
     CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("DescribeUserScramCredentials", lambda cid: DescribeUserScramCredentialsRequest(users=None), 0,
     AclOperation.DESCRIBE, CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("CreateTopics", lambda cid: CreateTopicsRequest(topics=[CreatableTopic(
        name="made-by-alice", num_partitions=1, replication_factor=1)], validate_only=True), 7, AclOperation.CREATE,
     TOPIC, lambda t: "made-by-alice", TOPIC_DENIED),
    ("DeleteTopics", lambda cid: DeleteTopicsRequest(topic_names=["guarded"]), 5, AclOperation.DELETE, TOPIC,
     lambda t: "guarded", TOPIC_DENIED),
    ("CreatePartitions", lambda cid: CreatePartitionsRequest(topics=[CreatePartitionsTopic(
        name="guarded", count=5, assignments=None)], validate_only=True), 3, AclOperation.ALTER, TOPIC,
     lambda t: "guarded", TOPIC_DENIED),
    ("IncrementalAlterConfigs/topic", lambda cid: IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=TOPIC_CONFIG, resource_name="guarded",
        configs=[AlterableConfig(name="retention.ms", config_operation=0, value="1000")])]), 1,
     AclOperation.ALTER_CONFIGS, TOPIC, lambda t: "guarded", TOPIC_DENIED),
    ("IncrementalAlterConfigs/broker", lambda cid: IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=BROKER_CONFIG, resource_name="",
        configs=[AlterableConfig(name="min.insync.replicas", config_operation=0, value="1")])]), 1,
     AclOperation.ALTER_CONFIGS, CLUSTER, lambda t: CLUSTER_NAME, CLUSTER_DENIED),
    ("DescribeConfigs", lambda cid: DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=TOPIC_CONFIG, resource_name="guarded", configuration_keys=None)]), 4,
     AclOperation.DESCRIBE_CONFIGS, TOPIC, lambda t: "guarded", TOPIC_DENIED),
    ("Metadata", lambda cid: MetadataRequest(topics=[MetadataRequestTopic(name="guarded")]), 12,
     AclOperation.DESCRIBE, TOPIC, lambda t: "guarded", TOPIC_DENIED),
    ("Envelope", lambda cid: forwarded(DescribeQuorumRequest(), 1), 0, AclOperation.CLUSTER_ACTION, CLUSTER,
     lambda t: CLUSTER_NAME, CLUSTER_DENIED),
]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory):
    from tools.controller_process import ControllerProcess
    proc = ControllerProcess(tmp_path_factory.mktemp("acl"), {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
        "metadata.max.idle.interval.ms": "0",  # no no-op records: the log moves only when written to
        "broker.session.timeout.ms": "600000",  # nor fencing of the one broker
    })
    try:
        yield proc.start()
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def admin(secured):
    client = sasl_client(secured.host, secured.port, ADMIN, ADMIN_PASSWORD)
    registered = client.request(registration_request(secured.cluster_id, 1), 4)
    assert registered.error_code == 0
    beat = client.request(BrokerHeartbeatRequest(broker_id=1, broker_epoch=registered.broker_epoch,
                                                 current_metadata_offset=registered.broker_epoch), 1)
    assert not beat.is_fenced
    guarded = client.request(CreateTopicsRequest(topics=[CreatableTopic(
        name="guarded", num_partitions=1, replication_factor=1)]), 7)
    assert guarded.topics[0].error_code == 0
    yield client
    client.close()


def log_end(admin: KafkaClient) -> int:
    quorum = admin.request(DescribeQuorumRequest(topics=[TopicData(
        topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 1)
    return quorum.topics[0].partitions[0].high_watermark


def acl(operation: AclOperation, resource_type: AclResourceType, name: str, principal: str = "User:alice") -> AclCreation:
    return AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=PatternType.LITERAL,
                       principal=principal, host="*", operation=operation, permission_type=AclPermissionType.ALLOW)


def set_acls(admin: KafkaClient, *creations: AclCreation) -> None:
    cleared = admin.request(DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=AclResourceType.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
        principal_filter=None, host_filter=None, operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)]), 3)
    assert error_codes(cleared) == {0}
    if creations:
        created = admin.request(CreateAclsRequest(creations=list(creations)), 3)
        assert error_codes(created) == {0}, created


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_refused_without_the_acl_and_served_with_it(secured, admin, case: Case) -> None:
    name, make, version, operation, resource_type, resource_name, refused = case
    sender = "broker" if name == "Envelope" else "alice"
    client = sasl_client(secured.host, secured.port, sender, f"{sender}-secret")
    try:
        set_acls(admin)
        before = log_end(admin)
        response = client.request(make(secured.cluster_id), version)
        assert refused in error_codes(response), response
        assert log_end(admin) == before, "a refused request wrote to the log"

        principal = f"User:{sender}"
        set_acls(admin, acl(operation, resource_type, resource_name(""), principal))
        response = client.request(make(secured.cluster_id), version)
        assert refused not in error_codes(response), response
    finally:
        set_acls(admin)
        client.close()


def test_a_forwarded_request_is_judged_as_its_client(secured, admin) -> None:
    """The broker may forward; alice, whose request it is, still needs CREATE."""
    broker = sasl_client(secured.host, secured.port, "broker", "broker-secret")
    inner = CreateTopicsRequest(topics=[CreatableTopic(name="fwd", num_partitions=1, replication_factor=1)],
                                validate_only=True)
    try:
        set_acls(admin, acl(AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME, "User:broker"))
        response = broker.request(forwarded(inner, 7), 0)
        assert response.error_code == 0
        from protocol.generated.messages.create_topics_response import CreateTopicsResponse
        from protocol.generated.messages.response_header import ResponseHeader
        _, pos = ResponseHeader.decode(response.response_data, 1)
        answer, _ = CreateTopicsResponse.decode(response.response_data, 7, pos)
        assert answer.topics[0].error_code == TOPIC_DENIED
        set_acls(admin, acl(AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME, "User:broker"),
                 acl(AclOperation.CREATE, TOPIC, "fwd"))
        response = broker.request(forwarded(inner, 7), 0)
        _, pos = ResponseHeader.decode(response.response_data, 1)
        answer, _ = CreateTopicsResponse.decode(response.response_data, 7, pos)
        assert answer.topics[0].error_code != TOPIC_DENIED
    finally:
        set_acls(admin)
        broker.close()


def test_listing_every_topic_shows_only_those_described(secured, admin) -> None:
    client = sasl_client(secured.host, secured.port, "alice", "alice-secret")
    try:
        set_acls(admin)
        created = admin.request(CreateTopicsRequest(topics=[CreatableTopic(
            name="listed", num_partitions=1, replication_factor=1)]), 7)
        assert created.topics[0].error_code == 0
        assert "listed" in {t.name for t in admin.request(MetadataRequest(topics=None), 12).topics}
        assert client.request(MetadataRequest(topics=None), 12).topics == []
        by_id = client.request(MetadataRequest(topics=[MetadataRequestTopic(topic_id=created.topics[0].topic_id)]), 12)
        assert [t.error_code for t in by_id.topics] == [TOPIC_DENIED]
        set_acls(admin, acl(AclOperation.DESCRIBE, TOPIC, "listed"))
        assert [t.name for t in client.request(MetadataRequest(topics=None), 12).topics] == ["listed"]
    finally:
        client.close()


def test_describing_only_refused_topics_shows_no_other(secured, admin) -> None:
    """An empty topic list means "every topic" to DescribeTopicPartitions: a request whose named
    topics are all refused must not turn into one."""
    client = sasl_client(secured.host, secured.port, "alice", "alice-secret")
    try:
        set_acls(admin)
        for name in ("seen", "unseen"):
            created = admin.request(CreateTopicsRequest(topics=[CreatableTopic(
                name=name, num_partitions=1, replication_factor=1)]), 7)
            assert created.topics[0].error_code in (0, Error.TOPIC_ALREADY_EXISTS)
        refused = client.request(DescribeTopicPartitionsRequest(topics=[TopicRequest(name="unseen")]), 0)
        assert [(t.name, t.error_code, t.partitions, t.topic_id) for t in refused.topics] == [
            ("unseen", TOPIC_DENIED, [], bytes(16))]
        assert refused.next_cursor is None
        set_acls(admin, acl(AclOperation.DESCRIBE, TOPIC, "seen"))
        mixed = client.request(DescribeTopicPartitionsRequest(
            topics=[TopicRequest(name="unseen"), TopicRequest(name="seen")]), 0)
        assert [(t.name, t.error_code, len(t.partitions)) for t in mixed.topics] == [
            ("seen", 0, 1), ("unseen", TOPIC_DENIED, 0)]
    finally:
        set_acls(admin)
        client.close()


def test_prefixed_and_wildcard_acls_are_found_for_a_topic(secured, admin) -> None:
    """What the authorizer looks up by resource: the literal name, the wildcard and every
    prefix of the name that a PREFIXED ACL uses, and a DENY among them wins."""
    client = sasl_client(secured.host, secured.port, "alice", "alice-secret")

    def described(name: str) -> bool:
        answer = client.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)]), 12)
        return answer.topics[0].error_code != TOPIC_DENIED

    prefixed = AclCreation(resource_type=TOPIC, resource_name="guar", resource_pattern_type=PatternType.PREFIXED,
                           principal="User:alice", host="*", operation=AclOperation.DESCRIBE,
                           permission_type=AclPermissionType.ALLOW)
    deny = AclCreation(resource_type=TOPIC, resource_name="guarded-prefix", resource_pattern_type=PatternType.LITERAL,
                       principal="User:*", host="*", operation=AclOperation.ALL,
                       permission_type=AclPermissionType.DENY)
    created = admin.request(CreateTopicsRequest(topics=[CreatableTopic(
        name="guarded-prefix", num_partitions=1, replication_factor=1)]), 7)
    assert created.topics[0].error_code == 0
    try:
        set_acls(admin)
        assert not described("guarded-prefix")
        set_acls(admin, prefixed)
        assert described("guarded-prefix")
        set_acls(admin, acl(AclOperation.DESCRIBE, TOPIC, "*"))
        assert described("guarded-prefix")
        set_acls(admin, prefixed, deny)
        assert not described("guarded-prefix")
    finally:
        set_acls(admin)
        client.close()


@pytest.mark.parametrize("request_", [VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest],
                         ids=lambda r: r.__name__)
def test_quorum_rpcs_without_cluster_action_are_answered_refused(secured, admin, request_: type) -> None:
    """As Kafka's controller: the quorum's RPCs are judged before anything else, and a refusal
    is an answer, not a closed connection (even on a single voter, which serves none of them)."""
    client = sasl_client(secured.host, secured.port, "alice", "alice-secret")
    try:
        set_acls(admin)
        response = client.request(request_(cluster_id=secured.cluster_id), 0)
        assert response.error_code == CLUSTER_DENIED
        # The connection stays usable.
        assert client.request(request_(cluster_id=secured.cluster_id), 0).error_code == CLUSTER_DENIED
    finally:
        client.close()
