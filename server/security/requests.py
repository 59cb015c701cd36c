"""Which ACL each request needs, as Kafka's controller checks it, and what a refusal answers.

Cluster-wide APIs need one operation on the CLUSTER resource and are refused whole with
CLUSTER_AUTHORIZATION_FAILED. APIs that name topics or config resources are judged item by
item: refused items are taken out of the request before the controller sees it (so nothing is
written for them) and answered with TOPIC_AUTHORIZATION_FAILED (or CLUSTER_ for broker
configs), while the others are served. Listing every topic shows only those described.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from protocol.error_codes import Error
from protocol.generated.messages import ApiKey
from protocol.generated.messages.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from protocol.generated.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult)
from protocol.generated.messages.create_acls_request import CreateAclsRequest
from protocol.generated.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from protocol.generated.messages.delete_acls_request import DeleteAclsRequest
from protocol.generated.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsResponse
from protocol.generated.messages.alter_configs_response import AlterConfigsResourceResponse as LegacyAlterResult
from protocol.generated.messages.create_partitions_response import CreatePartitionsTopicResult
from protocol.generated.messages.create_topics_response import CreatableTopicResult
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from protocol.generated.messages.describe_configs_response import DescribeConfigsResult
from protocol.generated.messages.describe_topic_partitions_response import DescribeTopicPartitionsResponseTopic
from protocol.generated.messages.incremental_alter_configs_response import AlterConfigsResourceResponse
from protocol.generated.messages.metadata_response import MetadataResponseTopic
from protocol.generated.messages.alter_client_quotas_request import AlterClientQuotasRequest
from protocol.generated.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse, EntityData as AlterClientQuotasEntity, EntryData as AlterClientQuotasEntry)
from protocol.message import Message
from server.context import RequestContext
from protocol.constants import AclOperation, AclResourceType
from server.security.acl import CLUSTER_NAME, AclIndex, AuthorizerConfig, authorize

# Kafka's ConfigResource types.
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER = 2, 4, 8

CLUSTER_OPERATIONS: dict[int, AclOperation] = {
    ApiKey.BROKER_REGISTRATION: AclOperation.CLUSTER_ACTION,
    ApiKey.BROKER_HEARTBEAT: AclOperation.CLUSTER_ACTION,
    ApiKey.ALTER_PARTITION: AclOperation.CLUSTER_ACTION,
    ApiKey.ALLOCATE_PRODUCER_IDS: AclOperation.CLUSTER_ACTION,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: AclOperation.CLUSTER_ACTION,
    ApiKey.CONTROLLER_REGISTRATION: AclOperation.CLUSTER_ACTION,
    ApiKey.FETCH: AclOperation.CLUSTER_ACTION,
    ApiKey.FETCH_SNAPSHOT: AclOperation.CLUSTER_ACTION,
    ApiKey.ENVELOPE: AclOperation.CLUSTER_ACTION,
    # The quorum's own RPCs, between controllers.
    ApiKey.VOTE: AclOperation.CLUSTER_ACTION,
    ApiKey.BEGIN_QUORUM_EPOCH: AclOperation.CLUSTER_ACTION,
    ApiKey.END_QUORUM_EPOCH: AclOperation.CLUSTER_ACTION,
    ApiKey.UPDATE_RAFT_VOTER: AclOperation.CLUSTER_ACTION,
    ApiKey.ADD_RAFT_VOTER: AclOperation.ALTER,
    ApiKey.REMOVE_RAFT_VOTER: AclOperation.ALTER,
    ApiKey.UNREGISTER_BROKER: AclOperation.ALTER,
    ApiKey.UPDATE_FEATURES: AclOperation.ALTER,
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AclOperation.ALTER,
    ApiKey.CREATE_ACLS: AclOperation.ALTER,
    ApiKey.DELETE_ACLS: AclOperation.ALTER,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    # Unlike a broker, Kafka's controller wants ALTER for DescribeCluster.
    ApiKey.DESCRIBE_CLUSTER: AclOperation.ALTER,
    ApiKey.DESCRIBE_QUORUM: AclOperation.DESCRIBE,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: AclOperation.DESCRIBE,
    ApiKey.DESCRIBE_ACLS: AclOperation.DESCRIBE,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: AclOperation.DESCRIBE,
    ApiKey.ALTER_CLIENT_QUOTAS: AclOperation.ALTER_CONFIGS,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: AclOperation.DESCRIBE_CONFIGS,
}


@dataclass(frozen=True)
class PerItem:
    """An API judged per item: where the items are, what each needs, what a refusal says."""

    items: str  # the request's list
    results: str  # the response's list
    # Items are the generated classes of each API's request; they share field names only.
    target: Callable[[Any], tuple[AclResourceType, AclOperation, str | None] | None]
    refused: Callable[[Any, int], Message]
    cluster_wide: AclOperation | None = None  # this on CLUSTER allows every item


def _topic(operation: AclOperation) -> Callable[[Any], tuple[AclResourceType, AclOperation, str | None] | None]:
    return lambda item: (AclResourceType.TOPIC, operation, getattr(item, "name"))


def _config(operation: AclOperation) -> Callable[[Any], tuple[AclResourceType, AclOperation, str | None] | None]:
    def target(item: Any) -> tuple[AclResourceType, AclOperation, str | None] | None:
        if item.resource_type == CONFIG_TOPIC:
            return AclResourceType.TOPIC, operation, item.resource_name
        if item.resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER):
            return AclResourceType.CLUSTER, operation, CLUSTER_NAME
        return None  # the controller answers unknown types itself
    return target


def _config_error(item: Any) -> int:
    return Error.TOPIC_AUTHORIZATION_FAILED if item.resource_type == CONFIG_TOPIC else Error.CLUSTER_AUTHORIZATION_FAILED


PER_ITEM: dict[int, PerItem] = {
    ApiKey.CREATE_TOPICS: PerItem(
        "topics", "topics", _topic(AclOperation.CREATE),
        lambda item, v: CreatableTopicResult(name=item.name, error_code=Error.TOPIC_AUTHORIZATION_FAILED),
        AclOperation.CREATE),
    ApiKey.CREATE_PARTITIONS: PerItem(
        "topics", "results", _topic(AclOperation.ALTER),
        lambda item, v: CreatePartitionsTopicResult(name=item.name, error_code=Error.TOPIC_AUTHORIZATION_FAILED)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: PerItem(
        "resources", "responses", _config(AclOperation.ALTER_CONFIGS),
        lambda item, v: AlterConfigsResourceResponse(
            error_code=_config_error(item), resource_type=item.resource_type, resource_name=item.resource_name)),
    ApiKey.ALTER_CONFIGS: PerItem(
        "resources", "responses", _config(AclOperation.ALTER_CONFIGS),
        lambda item, v: LegacyAlterResult(
            error_code=_config_error(item), resource_type=item.resource_type, resource_name=item.resource_name)),
    ApiKey.DESCRIBE_CONFIGS: PerItem(
        "resources", "results", _config(AclOperation.DESCRIBE_CONFIGS),
        lambda item, v: DescribeConfigsResult(
            error_code=_config_error(item), resource_type=item.resource_type, resource_name=item.resource_name)),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: PerItem(
        "topics", "topics", _topic(AclOperation.DESCRIBE),
        lambda item, v: DescribeTopicPartitionsResponseTopic(
            name=item.name, error_code=Error.TOPIC_AUTHORIZATION_FAILED)),
    ApiKey.METADATA: PerItem(
        "topics", "topics", _topic(AclOperation.DESCRIBE),
        lambda item, v: MetadataResponseTopic(name=item.name, topic_id=item.topic_id,
                                              error_code=Error.TOPIC_AUTHORIZATION_FAILED)),
}


def refused_items(request: Message, response: Message, code: int, version: int = 0) -> None:
    """Give a refused request's response one failed result per item, where its answer has no
    error code of its own (Kafka's error responses for these APIs do the same)."""
    rule = PER_ITEM.get(request.API_KEY) if request.API_KEY is not None else None
    if rule is not None:
        results = [rule.refused(item, version) for item in getattr(request, rule.items) or []]
        for result in results:
            setattr(result, "error_code", code)
        setattr(response, rule.results, results)
    elif isinstance(request, DeleteTopicsRequest) and isinstance(response, DeleteTopicsResponse):
        response.responses = [DeletableTopicResult(name=n, error_code=code) for n in request.topic_names] + [
            DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code) for t in request.topics]
    elif isinstance(request, CreateAclsRequest) and isinstance(response, CreateAclsResponse):
        response.results = [AclCreationResult(error_code=code) for _ in request.creations]
    elif isinstance(request, DeleteAclsRequest) and isinstance(response, DeleteAclsResponse):
        response.filter_results = [DeleteAclsFilterResult(error_code=code) for _ in request.filters]
    elif isinstance(request, AlterClientQuotasRequest) and isinstance(response, AlterClientQuotasResponse):
        response.entries = [AlterClientQuotasEntry(error_code=code, entity=[
            AlterClientQuotasEntity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
            for entry in request.entries]
    elif isinstance(request, AlterUserScramCredentialsRequest) and isinstance(response, AlterUserScramCredentialsResponse):
        names = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        response.results = [AlterUserScramCredentialsResult(user=n, error_code=code) for n in dict.fromkeys(names)]


@dataclass(frozen=True)
class Narrowed:
    """What narrowing left of a request: how to add the refusals to the response, and whether
    nothing is left to serve (every item was refused, and the request's now empty list would
    otherwise mean "all", as DescribeTopicPartitions' does)."""

    add_refusals: Callable[[Message], Message]
    nothing_to_serve: bool = False


class RequestAuthorizer:
    def __init__(self, config: AuthorizerConfig, acls: Callable[[], AclIndex[Any, Any]],
                 topic_name: Callable[[bytes], str | None]) -> None:
        self.config = config
        self.acls = acls
        self.topic_name = topic_name

    def allowed(self, context: RequestContext, operation: AclOperation, resource_type: AclResourceType,
                name: str) -> bool:
        principal = f"{context.principal.type}:{context.principal.name}"
        return authorize(principal, context.client_address, operation, resource_type, name,
                         self.acls(), self.config)

    def refusal(self, key: int, context: RequestContext) -> int | None:
        """The error that refuses a cluster-wide request whole, or None."""
        operation = CLUSTER_OPERATIONS.get(key)
        if operation is None or self.allowed(context, operation, AclResourceType.CLUSTER, CLUSTER_NAME):
            return None
        return Error.CLUSTER_AUTHORIZATION_FAILED

    def narrow(self, key: int, request: Message, version: int, context: RequestContext) -> Narrowed | None:
        """Take the refused items out of ``request``; returns what puts their refusals into the
        response (None when every item is allowed)."""
        if isinstance(request, DeleteTopicsRequest):
            return self._narrow_deletions(request, context)
        rule = PER_ITEM.get(key)
        if rule is None:
            return None
        if rule.cluster_wide is not None and self.allowed(context, rule.cluster_wide, AclResourceType.CLUSTER,
                                                          CLUSTER_NAME):
            return None
        items = getattr(request, rule.items)
        every_when_empty = key == ApiKey.DESCRIBE_TOPIC_PARTITIONS
        if items is None or (every_when_empty and not items):
            return Narrowed(self._hide_undescribed(rule.results, context))  # every topic was asked for
        kept, refused = [], []
        for item in items:
            target = rule.target(item)
            name = target[2] if target is not None else None
            if target is not None and name is None:
                # A topic named by id (Metadata v10+): judged by the name the id has now.
                name = self.topic_name(getattr(item, "topic_id", b""))
            if target is None or name is None or self.allowed(context, target[1], target[0], name):
                kept.append(item)
            else:
                refused.append(item)
        if not refused:
            return None
        setattr(request, rule.items, kept)

        def add_refusals(response: Message) -> Message:
            getattr(response, rule.results).extend(rule.refused(item, version) for item in refused)
            return response
        return Narrowed(add_refusals, nothing_to_serve=every_when_empty and not kept)

    def _hide_undescribed(self, results: str, context: RequestContext) -> Callable[[Message], Message]:
        def hide(response: Message) -> Message:
            setattr(response, results, [t for t in getattr(response, results)
                                        if self.allowed(context, AclOperation.DESCRIBE, AclResourceType.TOPIC, getattr(t, "name"))])
            return response
        return hide

    def _narrow_deletions(self, request: DeleteTopicsRequest, context: RequestContext) -> Narrowed | None:
        """DeleteTopics names topics by name (v0-5) or by name or id (v6+)."""
        if self.allowed(context, AclOperation.DELETE, AclResourceType.CLUSTER, CLUSTER_NAME):
            return None
        refused: list[DeletableTopicResult] = []

        def permitted(name: str | None, topic_id: bytes) -> bool:
            resolved = name if name is not None else self.topic_name(topic_id)
            if resolved is None or self.allowed(context, AclOperation.DELETE, AclResourceType.TOPIC, resolved):
                return True  # an unknown id is the controller's to answer
            refused.append(DeletableTopicResult(name=name, topic_id=topic_id,
                                                error_code=Error.TOPIC_AUTHORIZATION_FAILED))
            return False

        request.topic_names = [n for n in request.topic_names if permitted(n, bytes(16))]
        request.topics = [t for t in request.topics if permitted(t.name, t.topic_id)]
        if not refused:
            return None

        def add_refusals(response: Message) -> Message:
            if isinstance(response, DeleteTopicsResponse):
                response.responses.extend(refused)
            return response
        return Narrowed(add_refusals)
