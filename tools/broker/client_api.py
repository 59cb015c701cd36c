"""What a test broker answers its clients on its advertised listener.

Reads of the cluster (Metadata, DescribeCluster, DescribeTopicPartitions, DescribeConfigs of
its own broker, ApiVersions) come from the process's metadata image, which replays the
controller's log as a Kafka broker's image does. Admin requests go to the controller through
the Forwarder, at the versions both the client and the controller speak. A simulated broker
keeps no logs and coordinates no groups: Produce, Fetch, ListOffsets, FindCoordinator and
InitProducerId are refused as ``server.controller.unserved`` explains.

On a SASL listener clients log in first, as on the controller's (``server.security.login``):
PLAIN users from the listener's JAAS entry, SCRAM credentials and delegation tokens from the
image. Whoever they logged in as (or their certificate names on an SSL listener) is the
principal the forwarded requests carry, so the controller's authorizer judges the client, not
the broker. With an authorizer configured, what the broker answers from its image is judged by
the same authorizer against the ACLs in the image, as a Kafka broker judges it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from protocol.api_keys import APIS
from protocol.constants import EndpointType
from protocol.error_codes import Error, describe
from protocol.generated.messages import ApiKey
from protocol.generated.messages.api_versions_response import (
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey)
from protocol.generated.messages.alter_configs_request import AlterConfigsRequest
from protocol.generated.messages.alter_configs_response import AlterConfigsResourceResponse as LegacyAlterConfigsResourceResponse
from protocol.generated.messages.alter_configs_response import AlterConfigsResponse
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest
from protocol.generated.messages.create_partitions_response import (
    CreatePartitionsResponse, CreatePartitionsTopicResult)
from protocol.generated.messages.create_topics_request import CreateTopicsRequest
from protocol.generated.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest
from protocol.generated.messages.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol.generated.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from protocol.generated.messages.describe_user_scram_credentials_request import DescribeUserScramCredentialsRequest
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.generated.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from protocol.generated.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse, IncrementalAlterConfigsResponse)
from protocol.generated.messages.list_offsets_request import ListOffsetsRequest
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.produce_request import ProduceRequest
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.headers import encode_response_header, peek_request_prefix
from protocol.message import Message, api_key_of
from protocol.primitives import INT32, ZERO_UUID
from server.apis import FORWARDABLE, judged, token_requester, with_error
from server.context import ANONYMOUS, RequestContext
from server.controller.describe import TopicViews
from server.controller.features import SUPPORTED_FEATURES
from server.controller.result import accepting
from server.controller.unserved import (
    refuse_fetch, refuse_find_coordinator, refuse_init_producer_id, refuse_list_offsets, refuse_produce)
from server.image.image import MetadataImage
from server.network import Connection, RequestRejected
from server.security.login import SaslLogins
from server.security.requests import RequestAuthorizer
from server.security.settings import SecurityConfig
from tools.broker.forwarder import Forwarder

log = logging.getLogger("kraftwire.broker.clients")

# Forwardable APIs that only read; the other forwarded ones write, and wait for the image.
FORWARDED_READS = {ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_QUORUM}
# Forwardable APIs that brokers send for themselves, never on a client's behalf.
BROKER_TO_CONTROLLER = {ApiKey.ALLOCATE_PRODUCER_IDS}
# What the broker answers from its image that its authorizer judges first, as Kafka's
# brokers judge them (DescribeCluster is not: a broker describes itself to anyone).
JUDGED = {ApiKey.METADATA, ApiKey.DESCRIBE_TOPIC_PARTITIONS, ApiKey.DESCRIBE_CONFIGS, ApiKey.DESCRIBE_ACLS,
          ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_CLIENT_QUOTAS}
WHY = "kraftwire test brokers keep no partition logs and coordinate no groups or transactions"

Handler = Callable[[Message, int], Message]
# A login request's handler also needs the connection logging in.
LoginHandler = Callable[[Connection, Message, int], Message]


class ClientApis:
    """The request handling of one broker's client listener."""

    def __init__(self, node_id: int, cluster_id: str, image: MetadataImage, forwarder: Forwarder,
                 security: SecurityConfig | None = None) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.image = image
        self.forwarder = forwarder
        self.security = security or SecurityConfig()
        self.logins = SaslLogins(self.security, lambda: image.scram, lambda: image.delegation_tokens)
        self.authorizer: RequestAuthorizer | None = None
        if self.security.authorizer is not None:
            self.authorizer = RequestAuthorizer(self.security.authorizer, lambda: image.acls.index, self._topic_name)
        self.context = RequestContext(ANONYMOUS, "")  # who sent the request being handled
        self._served: tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]] | None = None
        self.handlers: dict[int, Handler] = {
            ApiKey.API_VERSIONS: lambda r, v: self.api_versions(),
            ApiKey.METADATA: self._metadata,
            ApiKey.DESCRIBE_CLUSTER: self._describe_cluster,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self._describe_topic_partitions,
            ApiKey.DESCRIBE_CONFIGS: self._describe_configs,
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.LIST_OFFSETS: self._list_offsets,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.INIT_PRODUCER_ID: lambda r, v: refuse_init_producer_id(),
            # A Kafka broker answers these from its metadata image; they are not forwardable.
            ApiKey.DESCRIBE_ACLS: accepting(DescribeAclsRequest, lambda r, v: image.acls.describe_acls(r)),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: accepting(
                DescribeUserScramCredentialsRequest, lambda r, v: image.scram.describe(r)),
            ApiKey.DESCRIBE_CLIENT_QUOTAS: accepting(
                DescribeClientQuotasRequest, lambda r, v: image.quotas.describe(r)),
            ApiKey.DESCRIBE_DELEGATION_TOKEN: accepting(
                DescribeDelegationTokenRequest, lambda r, v: image.delegation_tokens.describe(
                    r, token_requester(self.context, self.authorizer, self.security.protocol),
                    image.features.metadata_version, v)),
        }
        # Listed on every listener, as Kafka lists them: librdkafka refuses SASL with a broker
        # whose ApiVersions lacks SaslHandshake.
        self.login_handlers: dict[int, LoginHandler] = {
            ApiKey.SASL_HANDSHAKE: self._sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: self._sasl_authenticate,
        }

    # --- versions ----------------------------------------------------------------------------
    def served_versions(self) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) this broker serves: its own APIs at every version of their
        schemas, forwarded ones at the versions the controller serves too. Worked out again
        only when the controller's versions change (a new connection to it)."""
        theirs = self.forwarder.channel.api_versions
        if self._served is None or self._served[0] is not theirs:
            self._served = theirs, self._work_out_versions()
        return self._served[1]

    def _work_out_versions(self) -> dict[int, tuple[int, int]]:
        served = {key: (APIS[key].min_version, APIS[key].max_version) for key in [*self.handlers, *self.login_handlers]}
        for key in FORWARDABLE:
            api = APIS.get(key)
            theirs = self.forwarder.controller_versions(key)
            if api is None or theirs is None or key in BROKER_TO_CONTROLLER:
                continue
            lo, hi = max(api.min_version, theirs[0]), min(api.max_version, theirs[1])
            if lo <= hi:
                served[key] = (lo, hi)
        return served

    def api_versions(self) -> ApiVersionsResponse:
        return ApiVersionsResponse(
            api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi)
                      for k, (lo, hi) in sorted(self.served_versions().items())],
            supported_features=[SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                for n, (lo, hi) in SUPPORTED_FEATURES.items()],
            finalized_features=[FinalizedFeatureKey(name=n, max_version_level=lvl, min_version_level=lvl)
                                for n, lvl in self.image.features.finalized.items()],
            finalized_features_epoch=self.image.offset)

    # --- dispatch (server.network's Dispatch) -----------------------------------------------
    def dispatch(self, conn: Connection, frame: bytes) -> bytes | asyncio.Future[bytes] | None:
        sasl = conn.sasl
        if sasl is not None and sasl.bare_tokens:
            return self.logins.bare_token(conn, frame)
        key, version, correlation_id = peek_request_prefix(frame)
        if sasl is not None:
            why = sasl.allows(key, time.monotonic())
            if why is not None:
                raise RequestRejected(why)
        api = APIS.get(key)
        served = self.served_versions()
        if api is None or key not in served:
            raise RequestRejected(f"API key {key} is not served by a test broker")
        lo, hi = served[key]
        if not lo <= version <= hi:
            if key == ApiKey.API_VERSIONS:
                # As Kafka: an ApiVersions it cannot read gets a v0 answer listing what it can.
                refusal = self.api_versions()
                refusal.error_code = Error.UNSUPPORTED_VERSION
                return _framed(key, 0, correlation_id, refusal)
            raise RequestRejected(f"{api.name} v{version} is not supported (v{lo}-v{hi})")
        handler = self.handlers.get(key)
        login = self.login_handlers.get(key)
        if handler is None and login is None:
            return asyncio.ensure_future(self._forward(frame, conn, key, version, correlation_id))
        _, pos = RequestHeader.decode(frame, api.request_header_version(version))
        request, _ = api.request.decode(frame, version, pos)
        if login is not None:
            return _framed(key, version, correlation_id, login(conn, request, version))
        assert handler is not None
        self.context = conn.context
        if self.authorizer is not None and key in JUDGED:
            answer, add_refusals = judged(self.authorizer, api, request, version, conn.context)
            if answer is None:
                answer = handler(request, version)
                if add_refusals is not None:
                    answer = add_refusals(answer)
            return _framed(key, version, correlation_id, answer)
        return _framed(key, version, correlation_id, handler(request, version))

    async def _forward(self, frame: bytes, conn: Connection, key: int, version: int, correlation_id: int) -> bytes:
        # The controller reads the request as the client wrote it: the frame without its size.
        answer = await self.forwarder.forward(frame, conn.context, key not in FORWARDED_READS)
        if isinstance(answer, int):
            api = APIS[key]
            _, pos = RequestHeader.decode(frame, api.request_header_version(version))
            request, _ = api.request.decode(frame, version, pos)
            return _framed(key, version, correlation_id, failed_answer(request, answer))
        return INT32.pack(len(answer)) + answer

    # --- logging in ---------------------------------------------------------------------------
    def _sasl_handshake(self, conn: Connection, request: Message, version: int) -> Message:
        assert isinstance(request, SaslHandshakeRequest)
        return self.logins.handshake(conn, request, version)

    def _sasl_authenticate(self, conn: Connection, request: Message, version: int) -> Message:
        assert isinstance(request, SaslAuthenticateRequest)
        return self.logins.authenticate(conn, request)

    # --- reads from the image -----------------------------------------------------------------
    def _topic_name(self, topic_id: bytes) -> str | None:
        topic = self.image.replication.topics.get(topic_id)
        return topic.name if topic is not None else None

    def _views(self) -> TopicViews:
        return TopicViews(self.image.replication, lambda: (self.node_id, None), list_brokers=True)

    def _metadata(self, request: Message, version: int) -> Message:
        assert isinstance(request, MetadataRequest)
        return self._views().metadata(request, version, self.cluster_id)

    def _describe_topic_partitions(self, request: Message, version: int) -> Message:
        assert isinstance(request, DescribeTopicPartitionsRequest)
        return self._views().describe_topic_partitions(request,
                                                       self.image.configs.max_request_partition_size_limit())

    def _describe_cluster(self, request: Message, version: int) -> Message:
        assert isinstance(request, DescribeClusterRequest)
        asked = request.endpoint_type if version >= 1 else EndpointType.BROKER
        response = DescribeClusterResponse(cluster_id=self.cluster_id, endpoint_type=asked)
        if asked != EndpointType.BROKER:
            # Kafka's broker: the controllers are described by the controllers themselves.
            known = asked == EndpointType.CONTROLLER
            response.error_code = Error.MISMATCHED_ENDPOINT_TYPE if known else Error.UNSUPPORTED_ENDPOINT_TYPE
            response.error_message = ("The request was sent to an endpoint of type BROKER, but we wanted an "
                                      "endpoint of type CONTROLLER" if known
                                      else f"Unsupported endpoint type {asked}")
            return response
        response.brokers = [
            DescribeClusterBroker(broker_id=b.broker_id, host=b.endpoints[0].host, port=b.endpoints[0].port,
                                  rack=b.rack)
            for b in sorted(self.image.cluster.brokers.values(), key=lambda b: b.broker_id)
            if not b.fenced and b.endpoints]
        # The controller a broker names is a live broker, as in its Metadata answers: itself
        # while it is live, so clients send their admin requests to it and it forwards them.
        ids = [b.broker_id for b in response.brokers]
        response.controller_id = self.node_id if self.node_id in ids else (ids[0] if ids else -1)
        return response

    def _describe_configs(self, request: Message, version: int) -> Message:
        """Topics, and this broker alone among the brokers, as Kafka's brokers describe them:
        clients send a broker's configs request to that broker."""
        assert isinstance(request, DescribeConfigsRequest)
        names = self.image.replication.names
        return self.image.configs.describe_configs(request, version, lambda name: name in names,
                                                   lambda broker_id: broker_id == self.node_id)

    # --- what a simulated broker cannot do ----------------------------------------------------
    def _produce(self, request: Message, version: int) -> Message:
        assert isinstance(request, ProduceRequest)
        return refuse_produce(request, WHY)

    def _fetch(self, request: Message, version: int) -> Message:
        assert isinstance(request, FetchRequest)
        return refuse_fetch(request)

    def _list_offsets(self, request: Message, version: int) -> Message:
        assert isinstance(request, ListOffsetsRequest)
        return refuse_list_offsets(request)

    def _find_coordinator(self, request: Message, version: int) -> Message:
        assert isinstance(request, FindCoordinatorRequest)
        return refuse_find_coordinator(request, version, WHY)


def failed_answer(request: Message, code: int) -> Message:
    """The answer to a request that failed as a whole, with ``code`` for each thing it asked
    for, as Kafka's brokers build it when forwarding fails."""
    message = f"forwarding to the controller failed: {describe(code)}"
    if isinstance(request, CreateTopicsRequest):
        return CreateTopicsResponse(topics=[CreatableTopicResult(
            name=t.name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1)
            for t in request.topics])
    if isinstance(request, DeleteTopicsRequest):
        named = [(t.name, t.topic_id) for t in request.topics] or [(n, ZERO_UUID) for n in request.topic_names]
        return DeleteTopicsResponse(responses=[DeletableTopicResult(
            name=name, topic_id=topic_id, error_code=code, error_message=message) for name, topic_id in named])
    if isinstance(request, CreatePartitionsRequest):
        return CreatePartitionsResponse(results=[CreatePartitionsTopicResult(
            name=t.name, error_code=code, error_message=message) for t in request.topics])
    if isinstance(request, IncrementalAlterConfigsRequest):
        return IncrementalAlterConfigsResponse(responses=[AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources])
    if isinstance(request, AlterConfigsRequest):
        return AlterConfigsResponse(responses=[LegacyAlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
            for r in request.resources])
    # The others carry a top-level error code.
    return with_error(APIS[api_key_of(request)].response(), code)


def _framed(key: int, version: int, correlation_id: int, response: Message) -> bytes:
    out = bytearray(INT32.size)
    encode_response_header(out, key, version, correlation_id)
    response.encode_into(out, version)
    INT32.pack_into(out, 0, len(out) - INT32.size)
    return bytes(out)
