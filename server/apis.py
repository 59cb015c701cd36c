"""Routes decoded requests to the controller by API and answers ApiVersions.

Every handler returns ``(response, visible_offset)``: the response is computed at once, but it
is released only when the log has committed ``visible_offset``, the last offset whose state it
could reflect. Most heartbeats find that offset already committed and are answered in the
same call.

A request a broker forwards in an Envelope is unwrapped and served through the same routes,
and its answer goes back inside the EnvelopeResponse, with its own response header.

With security configured, a SASL listener's connections authenticate first (SaslHandshake,
SaslAuthenticate), and with an authorizer every request is checked against the ACLs before
the controller sees it (server/security/requests.py says what each API needs).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from dataclasses import dataclass
from typing import Callable, Concatenate, Iterator, ParamSpec, Protocol, TypeVar

from protocol.api_keys import APIS, Api
from protocol.constants import AclOperation, AclResourceType
from protocol.error_codes import Error
from protocol.errors import DecodeError
from protocol.generated.messages import ApiKey
from protocol.generated.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.generated.messages.alter_client_quotas_request import AlterClientQuotasRequest
from protocol.generated.messages.alter_configs_request import AlterConfigsRequest
from protocol.generated.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from protocol.generated.messages.alter_partition_request import AlterPartitionRequest
from protocol.generated.messages.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from protocol.generated.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.generated.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest
from protocol.generated.messages.controller_registration_request import ControllerRegistrationRequest
from protocol.generated.messages.create_acls_request import CreateAclsRequest
from protocol.generated.messages.create_delegation_token_request import CreateDelegationTokenRequest
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest
from protocol.generated.messages.create_topics_request import CreateTopicsRequest
from protocol.generated.messages.delete_acls_request import DeleteAclsRequest
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.describe_acls_request import DescribeAclsRequest
from protocol.generated.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest
from protocol.generated.messages.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol.generated.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from protocol.generated.messages.describe_user_scram_credentials_request import DescribeUserScramCredentialsRequest
from protocol.generated.messages.elect_leaders_request import ElectLeadersRequest
from protocol.generated.messages.envelope_request import EnvelopeRequest
from protocol.generated.messages.envelope_response import EnvelopeResponse
from protocol.generated.messages.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol.generated.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.generated.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from protocol.generated.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.generated.messages.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol.generated.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.generated.messages.update_features_request import UpdateFeaturesRequest
from protocol.message import Message, api_key_of
from protocol.primitives import INT16, INT32
from server.context import ANONYMOUS, RequestContext, forwarded_address, forwarded_principal
from server.controller.delegation_tokens import TokenRequester
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.result import accepting
from server.metalog.commit_path import CommitPath
from server.network import Connection, RequestRejected
from server.security.requests import CLUSTER_OPERATIONS, RequestAuthorizer, refused_items
from server.security.login import SaslLogins
from server.security.sasl import SaslSession
from server.security.settings import SecurityConfig

log = logging.getLogger("kraftwire.apis")

# A response still to come (a long poll) is a future the handler completes by itself.
Reply = Message | asyncio.Future[Message]
# A handler serves (request, version) for whom the context names (the client's, for a
# forwarded request), on the connection it came in on.
Handler = Callable[[Message, int, RequestContext, Connection], tuple[Reply, int]]
# The visible offset of a response the router need not hold back: it reflects only committed
# state, or it waits by itself (a long poll, a forwarded request).
NO_WAIT = -1
T = TypeVar("T")
U = TypeVar("U")
M = TypeVar("M", bound=Message)
P = ParamSpec("P")

_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id
_FRAME_HEAD = struct.Struct(">ii")  # frame size (filled in last), correlation id
_FRAME_SIZE = INT32.size


@dataclass(frozen=True)
class Route:
    """Everything version-specific about serving one (API, version): the generated decoder
    and encoder functions themselves, so a request costs no lookups."""

    api: Api
    version: int
    flexible_header: bool  # request header v2: tagged fields after the client id
    decode_request: Callable[[bytes, int], tuple[Message, int]]
    encode_response: Callable[[Message, bytearray], None]
    response_header_tail: bytes  # response header v1 adds an empty tagged-field section
    handler: Handler


def _body_start(frame: bytes, flexible_header: bool) -> int:
    """Skip the request header (its fields were read from the prefix; the client id is only
    checked), decoding it in full only when it carries tagged fields."""
    if len(frame) < _PREFIX.size + 2:
        raise DecodeError("RequestHeader", None, len(frame), "frame is shorter than a request header")
    (n,) = INT16.unpack_from(frame, _PREFIX.size)
    pos = _PREFIX.size + 2 + max(n, 0)
    if pos > len(frame):
        raise DecodeError("RequestHeader", None, _PREFIX.size, f"client id of {n} bytes runs past the frame")
    try:
        frame[_PREFIX.size + 2:pos].decode()
    except UnicodeDecodeError as exc:
        raise DecodeError("RequestHeader", None, _PREFIX.size + 2, f"client id is not UTF-8: {exc}") from None
    if flexible_header:
        if pos < len(frame) and frame[pos] == 0:
            return pos + 1
        _, pos = RequestHeader.decode(frame, 2)
    return pos


def _with_error_code(response: Message) -> Iterator[Message]:
    """The response and every item in it, at any depth, that has an error code."""
    for name, _ in response.FIELDS:
        value = getattr(response, name)
        if name == "error_code":
            yield response
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    yield from _with_error_code(item)
        elif isinstance(value, Message):
            yield from _with_error_code(value)


def with_error(response: Message, code: int) -> Message:
    """Set every error code in a response (top level and per item): the whole request failed."""
    for message in _with_error_code(response):
        setattr(message, "error_code", code)
    return response


def not_controller(key: int, request: Message, version: int) -> Message:
    """A standby's answer to what only the active controller serves: NOT_CONTROLLER for the
    request and each of its items, worked out without running the command."""
    response = with_error(APIS[key].response(), Error.NOT_CONTROLLER)
    refused_items(request, response, Error.NOT_CONTROLLER, version)
    return response


def _then(result: T | asyncio.Future[T], then: Callable[[T], U]) -> U | asyncio.Future[U]:
    """``then(result)``, at once or, for a response still to come, once it has come."""
    if not isinstance(result, asyncio.Future):
        return then(result)
    out = asyncio.get_running_loop().create_future()
    result.add_done_callback(lambda f: out.set_result(then(f.result())))
    return out


def deduplicate(key: int, request: Message) -> None:
    """Serve a topic or config resource named many times in one Metadata or DescribeConfigs
    once: the answer lists it once, as Kafka's does, and a request repeating one name
    thousands of times costs no more than naming it once."""
    if isinstance(request, MetadataRequest) and request.topics:
        request.topics = list({(t.name, t.topic_id): t for t in reversed(request.topics)}.values())[::-1]
    elif isinstance(request, DescribeConfigsRequest):
        request.resources = list({(r.resource_type, r.resource_name): r
                                  for r in reversed(request.resources)}.values())[::-1]


def carries_error(response: Message, code: int) -> bool:
    """Whether ``code`` is among a response's error codes, at the top level or in any item."""
    return any(getattr(message, "error_code") == code for message in _with_error_code(response))


def judged(authorizer: RequestAuthorizer, api: Api, request: Message, version: int,
           context: RequestContext) -> tuple[Message | None, Callable[[Message], Message] | None]:
    """What the authorizer makes of a request, as a Kafka controller or broker judges it before
    serving it: the whole answer when it is refused or nothing of it is left to serve; else
    what adds the refused items' answers to the response (None: every item is allowed)."""
    refusal = authorizer.refusal(api.key, context)
    if refusal is not None:
        refused = with_error(api.response(), refusal)
        refused_items(request, refused, refusal)
        return refused, None
    narrowed = authorizer.narrow(api.key, request, version, context)
    if narrowed is None:
        return None, None
    if narrowed.nothing_to_serve:
        return narrowed.add_refusals(api.response()), None
    return None, narrowed.add_refusals


def token_requester(context: RequestContext, authorizer: RequestAuthorizer | None, protocol: str) -> TokenRequester:
    """Who asks for a delegation token on a listener of ``protocol``, with Kafka's
    allowTokenRequests: never with a token, nor unauthenticated on a PLAINTEXT or one-way SSL
    listener (a forwarded request is judged by the broker that took it)."""
    principal = context.principal
    direct = context.forwarded_by is None
    allowed = not (principal.token_authenticated
                   or (direct and protocol == "PLAINTEXT")
                   or (direct and protocol == "SSL" and principal == ANONYMOUS))
    return TokenRequester(
        f"{principal.type}:{principal.name}", allowed,
        lambda owner: authorizer is None or authorizer.allowed(
            context, AclOperation.CREATE_TOKENS, AclResourceType.USER, owner),
        lambda token_id: authorizer is None or authorizer.allowed(
            context, AclOperation.DESCRIBE, AclResourceType.DELEGATION_TOKEN, token_id))


# The APIs a broker may forward inside an Envelope (Kafka's "forwardable" ones); any other
# inner request is refused with INVALID_REQUEST, as Kafka refuses it.
FORWARDABLE = {
    19: "CreateTopics", 20: "DeleteTopics", 30: "CreateAcls", 31: "DeleteAcls", 33: "AlterConfigs",
    37: "CreatePartitions", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 49: "AlterClientQuotas",
    51: "AlterUserScramCredentials", 55: "DescribeQuorum", 57: "UpdateFeatures", 64: "UnregisterBroker",
    67: "AllocateProducerIds", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
}

ACL_APIS = frozenset({ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS})

def command(cls: type[M], method: Callable[Concatenate[QuorumController, M, P], T]
            ) -> Callable[Concatenate[QuorumController, Message, P], T]:
    """A QuorumController method as a table entry: unbound, as the router serves whichever
    controller is current (a snapshot installed replaces it), and given only its request type."""
    def call(controller: QuorumController, request: Message, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if not isinstance(request, cls):
            raise TypeError(f"{request.NAME} given to the handler of {cls.NAME}")
        return method(controller, request, *args, **kwargs)
    return call


Write = Callable[[QuorumController, Message, int], Applied]
Read = Callable[[QuorumController, Message, int], Message]
TokenWrite = Callable[[QuorumController, Message, int, TokenRequester], Applied]
TokenRead = Callable[[QuorumController, Message, int, TokenRequester], Message]
# A command as the router runs it: on the current controller, for whom the context names.
Served = Callable[[QuorumController, Message, int, RequestContext], T]

# API key -> the QuorumController method that serves it. Writes append records and wait for
# them; reads wait only for what they could have seen.
WRITES: dict[int, Write] = {
    ApiKey.BROKER_REGISTRATION: command(BrokerRegistrationRequest, QuorumController.register_broker),
    ApiKey.BROKER_HEARTBEAT: command(BrokerHeartbeatRequest, QuorumController.broker_heartbeat),
    ApiKey.UNREGISTER_BROKER: command(UnregisterBrokerRequest, QuorumController.unregister_broker),
    ApiKey.UPDATE_FEATURES: command(UpdateFeaturesRequest, QuorumController.update_features),
    ApiKey.CONTROLLER_REGISTRATION: command(ControllerRegistrationRequest, QuorumController.register_controller),
    ApiKey.CREATE_TOPICS: command(CreateTopicsRequest, QuorumController.create_topics),
    ApiKey.DELETE_TOPICS: command(DeleteTopicsRequest, QuorumController.delete_topics),
    ApiKey.CREATE_PARTITIONS: command(CreatePartitionsRequest, QuorumController.create_partitions),
    ApiKey.ALTER_PARTITION: command(AlterPartitionRequest, QuorumController.alter_partition),
    ApiKey.ELECT_LEADERS: command(ElectLeadersRequest, QuorumController.elect_leaders),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: command(AlterPartitionReassignmentsRequest,
                                                  QuorumController.alter_reassignments),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: command(IncrementalAlterConfigsRequest,
                                              QuorumController.incremental_alter_configs),
    ApiKey.ALTER_CONFIGS: command(AlterConfigsRequest, QuorumController.alter_configs),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: command(AssignReplicasToDirsRequest, QuorumController.assign_replicas_to_dirs),
    ApiKey.ALLOCATE_PRODUCER_IDS: command(AllocateProducerIdsRequest, QuorumController.allocate_producer_ids),
    ApiKey.CREATE_ACLS: command(CreateAclsRequest, QuorumController.create_acls),
    ApiKey.DELETE_ACLS: command(DeleteAclsRequest, QuorumController.delete_acls),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: command(AlterUserScramCredentialsRequest,
                                                 QuorumController.alter_user_scram_credentials),
    ApiKey.ALTER_CLIENT_QUOTAS: command(AlterClientQuotasRequest, QuorumController.alter_client_quotas),
}
READS: dict[int, Read] = {
    ApiKey.DESCRIBE_CLUSTER: command(DescribeClusterRequest, QuorumController.describe_cluster),
    ApiKey.METADATA: command(MetadataRequest, QuorumController.metadata),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: command(DescribeTopicPartitionsRequest,
                                              QuorumController.describe_topic_partitions),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: command(ListPartitionReassignmentsRequest,
                                                 QuorumController.list_reassignments),
    ApiKey.DESCRIBE_CONFIGS: command(DescribeConfigsRequest, QuorumController.describe_configs),
    ApiKey.FIND_COORDINATOR: command(FindCoordinatorRequest, QuorumController.find_coordinator),
    ApiKey.DESCRIBE_ACLS: command(DescribeAclsRequest, QuorumController.describe_acls),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: command(DescribeUserScramCredentialsRequest,
                                                    QuorumController.describe_user_scram_credentials),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: command(DescribeClientQuotasRequest, QuorumController.describe_client_quotas),
}
# Delegation token APIs, served with who asks and on what channel (a TokenRequester).
TOKEN_WRITES: dict[int, TokenWrite] = {
    ApiKey.CREATE_DELEGATION_TOKEN: command(CreateDelegationTokenRequest, QuorumController.create_delegation_token),
    ApiKey.RENEW_DELEGATION_TOKEN: command(RenewDelegationTokenRequest, QuorumController.renew_delegation_token),
    ApiKey.EXPIRE_DELEGATION_TOKEN: command(ExpireDelegationTokenRequest, QuorumController.expire_delegation_token),
}
TOKEN_READS: dict[int, TokenRead] = {
    ApiKey.DESCRIBE_DELEGATION_TOKEN: command(DescribeDelegationTokenRequest,
                                              QuorumController.describe_delegation_token),
}
# Reads every voter answers from its committed state; they name the active controller, so a
# client that asked a standby finds its way.
SERVED_BY_STANDBYS = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER})


def for_anyone(command: Callable[[QuorumController, Message, int], T]) -> Served[T]:
    """A command that serves every caller alike."""
    return lambda controller, request, version, context: command(controller, request, version)


def anyone(handler: Callable[[Message, int], tuple[Reply, int]]) -> Handler:
    """A handler that serves every caller alike: it needs neither who asks nor the connection."""
    return lambda request, version, context, conn: handler(request, version)


class Role(Protocol):
    """Whether this node is the active controller (``server.leadership``)."""

    @property
    def active(self) -> bool: ...


class AlwaysActive:
    """The role of a router that serves a controller of its own, outside any quorum."""

    active = True


class Router:
    def __init__(self, controller: Callable[[], QuorumController], committer: CommitPath,
                 security: SecurityConfig | None = None, role: Role | None = None) -> None:
        """``controller``: the controller now; read at every request, as an installed snapshot
        replaces it (``ControllerReplica.replace``)."""
        self._controller = controller
        self.committer = committer
        # A standby refuses what only the active controller serves with NOT_CONTROLLER, as
        # Kafka's standbys do, before running anything.
        self.role: Role = role or AlwaysActive()
        self.security = security or SecurityConfig()
        self.authorizer: RequestAuthorizer | None = None
        if self.security.authorizer is not None:
            self.authorizer = RequestAuthorizer(
                self.security.authorizer, lambda: self.controller.acls.index, self._topic_name)
        self.logins = SaslLogins(self.security, lambda: self.controller.scram,
                                 lambda: self.controller.delegation_tokens)
        self.handlers: dict[int, Handler] = {}
        self._routes: dict[tuple[int, int], Route] = {}
        # Narrower version ranges than the schema's, for APIs only partly served.
        self.version_limits: dict[int, tuple[int, int]] = {}
        # Told of every request dispatched: its API key, when dispatch began, and the reply.
        self.observers: list[Callable[[int, float, bytes | asyncio.Future[bytes]], None]] = []
        for key, write in WRITES.items():
            self.register(key, self._writer(key, for_anyone(write)))
        for key, read in READS.items():
            self.register(key, self._reader(key, for_anyone(read)))
        self.controller.delegation_tokens.configure(self.security.delegation_tokens)
        for key, token_write in TOKEN_WRITES.items():
            self.register(key, self._writer(key, self._with_requester(token_write)))
        for key, token_read in TOKEN_READS.items():
            self.register(key, self._reader(key, self._with_requester(token_read)))
        self.register(ApiKey.API_VERSIONS, anyone(lambda request, version: (self.api_versions(version), NO_WAIT)))
        self.register(ApiKey.ENVELOPE, accepting(EnvelopeRequest, self._envelope))
        # Listed on every listener, as Kafka lists them: librdkafka refuses SASL with a broker
        # whose ApiVersions lacks SaslHandshake. v0 sends the SASL tokens as bare frames.
        self.register(ApiKey.SASL_HANDSHAKE, accepting(SaslHandshakeRequest, self._sasl_handshake))
        self.register(ApiKey.SASL_AUTHENTICATE, accepting(SaslAuthenticateRequest, self._sasl_authenticate))

    @property
    def controller(self) -> QuorumController:
        return self._controller()

    def _with_requester(self, command: Callable[[QuorumController, Message, int, TokenRequester], T]) -> Served[T]:
        """A delegation token command, given who asks and on what channel."""
        return lambda controller, request, version, context: command(
            controller, request, version, token_requester(context, self.authorizer, self.security.protocol))

    def _writer(self, key: int, write: Served[Applied]) -> Handler:
        def handle(request: Message, version: int, context: RequestContext, conn: Connection) -> tuple[Reply, int]:
            if not self.role.active:
                return not_controller(key, request, version), NO_WAIT
            applied = write(self.controller, request, version, context)
            self.committer.submit(applied.records, applied.base_offset)
            if applied.response is None:
                raise ValueError(f"{APIS[key].name} produced no response")
            return applied.response, self.controller.last_applied_offset
        return handle

    def _reader(self, key: int, read: Served[Message]) -> Handler:
        everywhere = key in SERVED_BY_STANDBYS

        def handle(request: Message, version: int, context: RequestContext, conn: Connection) -> tuple[Reply, int]:
            if not everywhere and not self.role.active:
                return not_controller(key, request, version), NO_WAIT
            return read(self.controller, request, version, context), self.controller.last_applied_offset
        return handle

    def _envelope(self, request: EnvelopeRequest, version: int, context: RequestContext,
                  conn: Connection) -> tuple[Reply, int]:
        return self._unwrap(request, context, conn), NO_WAIT

    def _sasl_handshake(self, request: SaslHandshakeRequest, version: int, context: RequestContext,
                        conn: Connection) -> tuple[Reply, int]:
        return self.logins.handshake(conn, request, version), NO_WAIT

    def _sasl_authenticate(self, request: SaslAuthenticateRequest, version: int, context: RequestContext,
                           conn: Connection) -> tuple[Reply, int]:
        return self.logins.authenticate(conn, request), NO_WAIT

    def register(self, api_key: int, handler: Handler, versions: tuple[int, int] | None = None) -> None:
        self.handlers[api_key] = handler
        self._routes.clear()
        if versions is not None:
            self.version_limits[api_key] = versions

    def served_versions(self, api: Api) -> tuple[int, int]:
        return self.version_limits.get(api.key, (api.min_version, api.max_version))

    # --- dispatch ---------------------------------------------------------------------------
    def dispatch(self, conn: Connection, frame: bytes) -> bytes | asyncio.Future[bytes] | None:
        started = time.perf_counter()
        if conn.sasl is not None and conn.sasl.bare_tokens:
            return self.logins.bare_token(conn, frame)
        if len(frame) < _PREFIX.size:
            raise DecodeError("RequestHeader", None, len(frame), "frame is shorter than a request header")
        key, version, correlation_id = _PREFIX.unpack_from(frame)
        if conn.sasl is not None:
            refusal = conn.sasl.allows(key, time.monotonic())
            if refusal is not None:
                raise RequestRejected(refusal)
        route = self._routes.get((key, version)) or self._route(key, version)
        if route is None:
            if key == ApiKey.API_VERSIONS:
                # Kafka answers an ApiVersions it cannot read with a v0 body listing what it
                # does support, so the client can retry at a version both sides know.
                fallback = self._route(ApiKey.API_VERSIONS, 0)
                if fallback is None:
                    raise RequestRejected(self._refusal(key, version))
                return self._encode(fallback, correlation_id, ApiVersionsResponse(
                    error_code=Error.UNSUPPORTED_VERSION, api_keys=self._api_versions_list()))
            raise RequestRejected(self._refusal(key, version))
        pos = _body_start(frame, route.flexible_header)
        try:
            # Bytes after a complete body are ignored, as Kafka's parser ignores them: some
            # clients send them (librdkafka 2.16 pads Metadata v12 with three).
            request, _ = route.decode_request(frame, pos)
        except DecodeError as exc:
            raise exc.within(route.api.request.NAME, version) from None
        reply = _then(self._serve(route, request, conn.context, conn),
                      lambda response: self._encode(route, correlation_id, response))
        for observe in self.observers:
            observe(key, started, reply)
        return reply

    def _serve(self, route: Route, request: Message, context: RequestContext, conn: Connection) -> Reply:
        """The response, or a future of it when it must wait for a commit or a long poll."""
        add_refusals: Callable[[Message], Message] | None = None
        if self.authorizer is None and route.api.key in ACL_APIS:
            # As Kafka: ACLs mean nothing without an authorizer, so they are not kept.
            disabled = with_error(route.api.response(), Error.SECURITY_DISABLED)
            refused_items(request, disabled, Error.SECURITY_DISABLED)
            return disabled
        if self.authorizer is not None:
            answer, add_refusals = judged(self.authorizer, route.api, request, route.version, context)
            if answer is not None:
                return answer
        deduplicate(route.api.key, request)
        response, visible = route.handler(request, route.version, context, conn)
        if add_refusals is not None:
            response = _then(response, add_refusals)
        if isinstance(response, asyncio.Future):
            return response  # a long poll: the handler answers later by itself
        waiter = self.committer.commits.wait(visible)
        if waiter is None:
            return response
        out = asyncio.get_running_loop().create_future()

        def release(f: asyncio.Future[None]) -> None:
            if f.exception() is not None:
                # The records behind this answer never became durable: tell the client to
                # retry elsewhere instead of pretending it worked, and not to come back here.
                with_error(response, Error.NOT_CONTROLLER)
                if hasattr(response, "controller_id"):
                    setattr(response, "controller_id", -1)
            out.set_result(response)

        waiter.add_done_callback(release)
        return out

    def _route(self, key: int, version: int) -> Route | None:
        """Everything version-specific about one (API, version), worked out once; None when
        that API or version is not served."""
        api = APIS.get(key)
        handler = self.handlers.get(key)
        if handler is None and self.authorizer is not None and key in CLUSTER_OPERATIONS:
            # As Kafka's controller: a cluster API this node does not serve (the quorum's own
            # RPCs on a single voter) is judged first, and refused with an answer.
            handler = self._unserved
        if api is None or handler is None:
            return None
        lo, hi = self.served_versions(api)
        if not lo <= version <= hi:
            return None
        decode, encode = api.request._DECODERS[version], api.response._ENCODERS[version]
        if decode is None or encode is None:
            return None
        route = Route(api, version, api.request_header_version(version) == 2, decode, encode,
                      b"\x00" if api.response_header_version(version) == 1 else b"",
                      handler)
        self._routes[(key, version)] = route
        return route

    def _unserved(self, request: Message, version: int, context: RequestContext,
                  conn: Connection) -> tuple[Reply, int]:
        raise RequestRejected(self._refusal(api_key_of(request), version))

    def _refusal(self, key: int, version: int) -> str:
        api = APIS.get(key)
        if api is None or key not in self.handlers:
            return f"unknown or unserved API key {key}"
        lo, hi = self.served_versions(api)
        return f"{api.name} v{version} is not supported (v{lo}-v{hi})"

    # --- SASL -------------------------------------------------------------------------------
    def sasl_session(self) -> SaslSession:
        """A new connection's SASL state, looking credentials up in the current metadata."""
        return self.logins.session()

    def _topic_name(self, topic_id: bytes) -> str | None:
        topic = self.controller.replication.topics.get(topic_id)
        return topic.name if topic is not None else None

    # --- Envelope ---------------------------------------------------------------------------
    def _unwrap(self, envelope: EnvelopeRequest, context: RequestContext, conn: Connection) -> Reply:
        """Serve the request a broker forwarded, as its client's. The errors are Kafka's: the
        principal or address unreadable, or an API that may not be forwarded, fail the
        envelope itself; an inner request that cannot be parsed is UNSUPPORTED_VERSION, to
        tell it apart from a broken envelope."""
        principal = forwarded_principal(envelope.request_principal)
        if principal is None:
            return EnvelopeResponse(error_code=Error.PRINCIPAL_DESERIALIZATION_FAILURE)
        address = forwarded_address(envelope.client_host_address)
        if address is None:
            return EnvelopeResponse(error_code=Error.INVALID_REQUEST)
        data = envelope.request_data
        if len(data) < _PREFIX.size:
            return EnvelopeResponse(error_code=Error.UNSUPPORTED_VERSION)
        key, version, correlation_id = _PREFIX.unpack_from(data)
        if key not in FORWARDABLE:
            return EnvelopeResponse(error_code=Error.INVALID_REQUEST)
        route = self._routes.get((key, version)) or self._route(key, version)
        if route is None:
            return EnvelopeResponse(error_code=Error.UNSUPPORTED_VERSION)
        try:
            request, _ = route.decode_request(data, _body_start(data, route.flexible_header))
        except DecodeError as exc:
            log.warning("refusing a forwarded request: %s", exc.within(route.api.request.NAME, version))
            return EnvelopeResponse(error_code=Error.UNSUPPORTED_VERSION)
        forwarded = RequestContext(principal, address, forwarded_by=context.principal)
        return _then(self._serve(route, request, forwarded, conn),
                     lambda response: self._enveloped(route, correlation_id, response))

    def _enveloped(self, route: Route, correlation_id: int, response: Message) -> EnvelopeResponse:
        if carries_error(response, Error.NOT_CONTROLLER):
            # The forwarding broker must look for the new controller, which it learns only
            # from the envelope's own error.
            return EnvelopeResponse(error_code=Error.NOT_CONTROLLER)
        return EnvelopeResponse(response_data=self._encode(route, correlation_id, response)[_FRAME_SIZE:])

    @staticmethod
    def _encode(route: Route, correlation_id: int, response: Message) -> bytes:
        out = bytearray(_FRAME_HEAD.pack(0, correlation_id))
        out += route.response_header_tail
        route.encode_response(response, out)
        INT32.pack_into(out, 0, len(out) - 4)
        return bytes(out)

    # --- ApiVersions ------------------------------------------------------------------------
    def _api_versions_list(self) -> list[ApiVersion]:
        keys = sorted(self.handlers)
        return [ApiVersion(api_key=k, min_version=self.served_versions(APIS[k])[0],
                           max_version=self.served_versions(APIS[k])[1]) for k in keys]

    def api_versions(self, version: int) -> ApiVersionsResponse:
        response = ApiVersionsResponse(api_keys=self._api_versions_list())
        if version >= 3:
            c = self.controller
            # Before v4, a feature whose lowest level is 0 is left out (KAFKA-17492): Kafka 3.7
            # clients refuse a supported range that starts at 0 and close the connection.
            response.supported_features = [f for f in c.supported_features() if version >= 4 or f.min_version > 0]
            response.finalized_features = c.finalized_features()
            # As Kafka's controller does: the finalized features are those of the committed log.
            response.finalized_features_epoch = self.committer.commits.committed_offset
        return response
