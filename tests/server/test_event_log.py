"""The controller's INFO lines, as Kafka's controller writes them: registrations, fencing and
unfencing with their reason, controlled shutdowns, topic creations and deletions, reassignment
results, configuration changes, ACLs, SCRAM credentials, client quotas, delegation tokens,
feature levels, and leader elections (a large batch summarised)."""

from __future__ import annotations

import base64

import pytest

from protocol.constants import (
    AclOperation, AclPermissionType, AclResourceType, AlterConfigOpType, ConfigResourceType, FeatureUpgradeType,
    PatternType)
from protocol.generated.messages.alter_partition_request import AlterPartitionRequest, PartitionData, TopicData
from protocol.generated.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest, EntityData, EntryData, OpData)
from protocol.generated.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest, ScramCredentialDeletion, ScramCredentialUpsertion)
from protocol.generated.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.generated.messages.create_delegation_token_request import CreateDelegationTokenRequest
from protocol.generated.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.generated.messages.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol.generated.messages.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol.generated.messages.update_features_request import FeatureUpdateKey
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, AlterConfigsResource, IncrementalAlterConfigsRequest)
from protocol.primitives import random_uuid
from server.controller.delegation_tokens import TokenRequester, TokenSettings
from server.controller.event_log import LISTED_PARTITIONS
from tests.support.replication import Cluster
from tests.support.harness import Harness

LOGGER = "kraftwire.controller"


@pytest.fixture
def c() -> Cluster:
    cluster = Cluster()
    cluster.brokers(1, 2, 3)
    return cluster


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == "INFO"]
    caplog.clear()
    return out


def test_registration_and_unfencing(caplog):
    h = Harness()
    incarnation = random_uuid()
    with caplog.at_level("INFO", logger=LOGGER):
        first = h.register(1, incarnation).response.broker_epoch
        assert lines(caplog) == [
            f"No previous registration found for broker 1. New incarnation ID is {_text(incarnation)}.  "
            f"Generated 0 record(s) to clean up previous incarnations. New broker epoch is {first}."]
        h.register(1, incarnation)
        assert lines(caplog) == [f"Amending registration of broker 1, incarnation ID {_text(incarnation)}. "
                                 f"Broker epoch remains {first}."]
        again = random_uuid()
        second = h.register(1, again).response.broker_epoch
        assert lines(caplog) == [
            f"Registering a new incarnation of broker 1. Previous incarnation ID was {_text(incarnation)}; "
            f"new incarnation ID is {_text(again)}. Generated 0 record(s) to clean up previous incarnations. "
            f"Broker epoch will become {second}."]
        h.heartbeat(1, second, offset=second)
        assert lines(caplog) == [f"The request from broker 1 to unfence has been granted because it has "
                                 f"caught up with the offset of its register broker record {second}."]


def test_topics_fencing_and_elections(c, caplog):
    with caplog.at_level("INFO", logger=LOGGER):
        topic_id = c.topic("orders", [[1, 2], [2, 1]])
        assert lines(caplog) == ["CreateTopics result(s): orders: SUCCESS",
                                 f"Created topic orders with topic ID {_text(topic_id)} and 2 partition(s)."]
        c.expire(1)
        assert lines(caplog) == ["Fencing broker 1 because its session has timed out.",
                                 "Changed the leader of 1 partition(s): orders-0 -> 2"]
        c.shut_down(2)
        # The reason comes first, then what it changed.
        assert lines(caplog) == ["Unfenced broker 2 has requested and been granted a controlled shutdown.",
                                 "Changed the leader of 2 partition(s): orders-0 -> none, orders-1 -> none"]
        c.heartbeat(3)  # every active broker has seen the shutdown begin
        c.shut_down(2)
        assert lines(caplog) == ["The request from broker 2 to shut down has been granted: it leads no partition "
                                 "and every active broker has replicated its controlled shutdown."]
        c.delete("orders")
        assert lines(caplog) == [f"Deleting topic orders with ID {_text(topic_id)}."]


def test_every_create_topics_result_is_logged_refusals_included(caplog):
    """Kafka's ReplicationControlManager logs each CreateTopics result at INFO: a request
    refused whole (no broker registered) leaves its reason in the log."""
    c = Cluster()
    with caplog.at_level("INFO", logger=LOGGER):
        c.create("orders", partitions=1, rf=3)
        [line] = lines(caplog)
        assert line.startswith("CreateTopics result(s): orders: INVALID_REPLICATION_FACTOR (")
        c.brokers(1)
        lines(caplog)  # the registration's
        c.create("a", partitions=1, rf=1, validate_only=True)
        assert lines(caplog) == ["Validate-only CreateTopics result(s): a: SUCCESS"]


def test_a_large_election_is_summarised(c, caplog):
    partitions = LISTED_PARTITIONS + 5
    c.topic("big", [[1, 2]] * partitions)
    with caplog.at_level("INFO", logger=LOGGER):
        c.expire(1)
    [_, elected] = lines(caplog)
    assert elected.startswith(f"Changed the leader of {partitions} partition(s): big-0 -> 2, big-1 -> 2")
    assert elected.endswith("(and 5 more)") and elected.count("->") == LISTED_PARTITIONS


def test_every_reassignment_result_is_logged_refusals_included(c, caplog):
    """Kafka's ReplicationControlManager.alterPartitionReassignments: a line for each partition
    it cannot reassign, then how many of the request's it did."""
    c.topic("orders", [[1, 2]])
    with caplog.at_level("INFO", logger=LOGGER):
        c.reassign("orders", 0, [2, 3])
        assert lines(caplog)[0] == "Successfully altered 1 out of 1 partition reassignment(s)."
        c.reassign("orders", 7, [2, 3])
        assert lines(caplog) == [
            "Unable to alter partition reassignment for orders:7 because of UNKNOWN_TOPIC_OR_PARTITION "
            "(Unable to find partition orders:7.)",
            "Successfully altered 0 out of 1 partition reassignment(s)."]


def test_each_configuration_change_is_logged_secrets_hidden(c, caplog):
    """Kafka's ConfigurationControlManager logs each configuration it sets, a value it cannot
    know to be harmless (a password, a config it cannot type) as [hidden]."""
    c.topic("orders", [[1]])
    with caplog.at_level("INFO", logger=LOGGER):
        c.set_topic_config("orders", "retention.ms", "1000")
        assert lines(caplog) == ["Set configuration retention.ms of ConfigResource(type=TOPIC, name='orders') to 1000."]
        c.run(c.qc.incremental_alter_configs(IncrementalAlterConfigsRequest(resources=[
            AlterConfigsResource(resource_type=ConfigResourceType.TOPIC, resource_name="orders", configs=[
                AlterableConfig(name="retention.ms", config_operation=AlterConfigOpType.DELETE)]),
            AlterConfigsResource(resource_type=ConfigResourceType.BROKER, resource_name="", configs=[
                AlterableConfig(name="listener.name.internal.ssl.key.password", config_operation=AlterConfigOpType.SET,
                                value="secret")])]), 1))
        assert lines(caplog) == [
            "Removed configuration retention.ms of ConfigResource(type=TOPIC, name='orders').",
            "Set configuration listener.name.internal.ssl.key.password of ConfigResource(type=BROKER, name='') "
            "to [hidden]."]


def test_each_alter_partition_refusal_is_logged_at_kafkas_level(c, caplog):
    """Kafka's ReplicationControlManager logs why it rejects an AlterPartition: at INFO a sender
    that is not the leader or holds a stale partition epoch, at ERROR an ISR without its leader,
    at DEBUG a sender with a newer epoch than the controller's."""
    c.topic("orders", [[1, 2, 3]])
    p = c.part("orders")
    with caplog.at_level("DEBUG", logger=LOGGER):
        c.alter(2, "orders", 0, [1, 2])
        c.alter(1, "orders", 0, [1, 2], partition_epoch=p.partition_epoch - 1)
        c.alter(1, "orders", 0, [2, 3])
        c.alter(1, "orders", 0, [1, 2], leader_epoch=p.leader_epoch + 1)
        c.run(c.qc.alter_partition(AlterPartitionRequest(broker_id=1, broker_epoch=c.epochs[1], topics=[
            TopicData(topic_id=c.qc.replication.names["orders"], partitions=[PartitionData(partition_index=9)])]), 3))
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER] == [
        ("INFO", "Rejecting AlterPartition request from node 2 for orders-0 because the current leader is 1."),
        ("INFO", f"Rejecting AlterPartition request from node 1 for orders-0 because the current partition epoch "
                 f"is {p.partition_epoch}, not {p.partition_epoch - 1}."),
        ("ERROR", "Rejecting AlterPartition request from node 1 for orders-0 because it specified an invalid ISR "
                  "[2, 3] that doesn't include itself."),
        ("DEBUG", f"Rejecting AlterPartition request from node 1 for orders-0 because its leader epoch "
                  f"{p.leader_epoch + 1} is newer than the current {p.leader_epoch}."),
        ("INFO", "Rejecting AlterPartition request for unknown partition orders-9.")]


def test_an_isr_change_that_completes_a_reassignment_is_logged(c, caplog):
    """Kafka's ReplicationControlManager.alterPartition: the ISR change that ends a
    reassignment says so, and names the error the old leader gets when leadership moved."""
    c.brokers(4)
    c.topic("a", [[1, 2]])
    c.topic("b", [[1, 2]])
    c.reassign("a", 0, [1, 3])
    c.reassign("b", 0, [3, 4])
    with caplog.at_level("INFO", logger=LOGGER):
        c.alter(1, "a", 0, [1, 2, 3])
        # Removing a replica bumps the leader epoch: the leader is written again.
        assert lines(caplog) == [
            "AlterPartition request from node 1 for a-0 completed the ongoing partition reassignment.",
            "Changed the leader of 1 partition(s): a-0 -> 1"]
        c.alter(1, "b", 0, [1, 2, 3, 4])
        assert lines(caplog) == [
            "AlterPartition request from node 1 for b-0 completed the ongoing partition reassignment and "
            "triggered a leadership change. Returning NEW_LEADER_ELECTED.",
            "Changed the leader of 1 partition(s): b-0 -> 3"]


def test_each_acl_created_or_deleted_is_logged(caplog):
    """Kafka's AclControlManager logs each ACL it adds or removes, as StandardAcl prints it."""
    h = Harness()
    with caplog.at_level("INFO", logger=LOGGER):
        created = h.command("create_acls", CreateAclsRequest(creations=[AclCreation(
            resource_type=AclResourceType.TOPIC, resource_name="orders", resource_pattern_type=PatternType.LITERAL,
            principal="User:alice", host="*", operation=AclOperation.READ,
            permission_type=AclPermissionType.ALLOW)]), 3)
        [(record, _)] = created.records
        acl = ("StandardAcl(resourceType=TOPIC, resourceName=orders, patternType=LITERAL, principal=User:alice, "
               "host=*, operation=READ, permissionType=ALLOW)")
        assert lines(caplog) == [f"Created ACL {_text(record.id)}: {acl}."]
        h.command("delete_acls", DeleteAclsRequest(filters=[DeleteAclsFilter(
            resource_type_filter=AclResourceType.ANY, resource_name_filter=None,
            pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
            operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)]), 3)
        assert lines(caplog) == [f"Deleted ACL {_text(record.id)}: {acl}."]


def test_each_scram_credential_change_is_logged_without_its_secrets(caplog):
    """Kafka's ScramControlManager logs the user and mechanism of each credential it creates,
    changes or removes; the salt and the keys derived from the password never appear."""
    h = Harness()
    salt, salted = b"NaCl-0123456789", b"p" * 64

    def upsert() -> list:
        applied = h.command("alter_user_scram_credentials", AlterUserScramCredentialsRequest(upsertions=[
            ScramCredentialUpsertion(name="alice", mechanism=1, iterations=4096, salt=salt,
                                     salted_password=salted)]), 0)
        return [r for r, _ in applied.records]

    with caplog.at_level("INFO", logger=LOGGER):
        [record] = upsert()
        assert lines(caplog) == ["Created a SCRAM credential for alice with mechanism SCRAM-SHA-256."]
        upsert()
        assert lines(caplog) == ["Modified the SCRAM credential for alice with mechanism SCRAM-SHA-256."]
        h.command("alter_user_scram_credentials", AlterUserScramCredentialsRequest(deletions=[
            ScramCredentialDeletion(name="alice", mechanism=1)]), 0)
        assert lines(caplog) == ["Removed the SCRAM credential for alice with mechanism SCRAM-SHA-256."]
    logged = caplog.text
    for secret in (salt, record.salt, record.stored_key, record.server_key):
        assert secret.hex() not in logged and repr(secret) not in logged and str(secret) not in logged


def test_each_client_quota_change_is_logged(caplog):
    """Kafka's ClientQuotaControlManager logs each quota it sets or removes, the entity as
    ClientQuotaEntity prints it (a default entity's name as null)."""
    h = Harness()

    def alter(name: str | None, value: float, remove: bool = False) -> None:
        h.command("alter_client_quotas", AlterClientQuotasRequest(entries=[EntryData(
            entity=[EntityData(entity_type="user", entity_name=name)],
            ops=[OpData(key="producer_byte_rate", value=value, remove=remove)])]), 1)

    with caplog.at_level("INFO", logger=LOGGER):
        alter("alice", 1024.0)
        alter(None, 2048.0)
        alter("alice", 0.0, remove=True)
        assert lines(caplog) == [
            "Set client quota producer_byte_rate of ClientQuotaEntity(entries={user=alice}) to 1024.0.",
            "Set client quota producer_byte_rate of ClientQuotaEntity(entries={user=null}) to 2048.0.",
            "Removed client quota producer_byte_rate of ClientQuotaEntity(entries={user=alice})."]


def test_each_delegation_token_change_is_logged_without_its_hmac(caplog):
    """Kafka's DelegationTokenControlManager: a token's creation, its new expiry and its
    expiry are logged by token id and owner; the HMAC, which is the token's password, never."""
    h = Harness()
    h.qc.delegation_tokens.configure(TokenSettings("s3cret", max_lifetime_ms=48 * HOUR_MS,
                                                   expiry_time_ms=24 * HOUR_MS))
    alice = TokenRequester("User:alice", True, lambda owner: False, lambda token_id: False)
    now = h.clock.now_ms()
    with caplog.at_level("INFO", logger=LOGGER):
        created = h.run(h.qc.create_delegation_token(CreateDelegationTokenRequest(), 3, alice)).response
        token, mac = created.token_id, created.hmac
        h.run(h.qc.renew_delegation_token(RenewDelegationTokenRequest(hmac=mac, renew_period_ms=HOUR_MS), 2, alice))
        h.run(h.qc.expire_delegation_token(ExpireDelegationTokenRequest(hmac=mac, expiry_time_period_ms=-1), 2,
                                           alice))
        assert lines(caplog) == [
            f"Created delegation token {token} for owner User:alice, expiring at {now + 24 * HOUR_MS}.",
            f"Set the expiry of delegation token {token} for owner User:alice to {now + HOUR_MS}.",
            f"Delegation token expired for token: {token} for owner: User:alice"]
    logged = caplog.text
    assert mac.hex() not in logged and repr(mac) not in logged and base64.b64encode(mac).decode() not in logged


def test_each_feature_level_change_is_logged(caplog):
    """Kafka's FeatureControlManager logs each finalized level it sets or removes,
    metadata.version by its release name."""
    h = Harness(metadata_version=20)
    with caplog.at_level("INFO", logger=LOGGER):
        h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=1)])
        h.update_features([FeatureUpdateKey(feature="group.version", max_version_level=0,
                                            upgrade_type=FeatureUpgradeType.SAFE_DOWNGRADE)])
        h.update_features([FeatureUpdateKey(feature="metadata.version", max_version_level=21)])
        assert lines(caplog) == ["Set feature group.version to 1.", "Removed feature group.version.",
                                 "Set metadata.version to 3.9-IV0."]


def test_a_replay_logs_nothing(caplog):
    """Only the active controller's writes are logged: replaying them (a standby, a restart)
    says nothing."""
    c = Cluster()
    request = AlterUserScramCredentialsRequest(upsertions=[ScramCredentialUpsertion(
        name="alice", mechanism=2, iterations=4096, salt=b"salt", salted_password=b"p" * 64)])
    c.run(c.qc.alter_user_scram_credentials(request, 0))
    with caplog.at_level("INFO", logger=LOGGER):
        c.replayed()
    assert lines(caplog) == []


HOUR_MS = 3600 * 1000


def _text(uuid: bytes) -> str:
    from protocol.primitives import uuid_to_str
    return uuid_to_str(uuid)
