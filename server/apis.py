"""Routes decoded requests to the controller by API and answers ApiVersions.

Every handler returns ``(response, visible_offset)``: the response is computed at once, but it
is released only when the log has committed ``visible_offset``, the last offset whose state it
could reflect. Most heartbeats find that offset already committed and are answered in the
same call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from protocol.api_keys import API_VERSIONS_KEY, APIS, Api
from protocol.error_codes import Error
from protocol.errors import DecodeError
from protocol.framing import begin_frame, end_frame
from protocol.generated.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.response_header import ResponseHeader
from protocol.headers import peek_request_prefix
from protocol.message import Message
from server.controller.quorum_controller import Applied, QuorumController
from server.metalog.committer import Committer
from server.network import Connection, RequestRejected

log = logging.getLogger("kraftwire.apis")

Handler = Callable[[RequestHeader, Message, int], tuple[Message, int]]


def with_error(response: Message, code: int) -> Message:
    """Set every error code in a response (top level and per item): the whole request failed."""
    for name, ftype in response.FIELDS:
        value = getattr(response, name)
        if name == "error_code":
            setattr(response, name, code)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    with_error(item, code)
        elif isinstance(value, Message):
            with_error(value, code)
    return response


class Router:
    def __init__(self, controller: QuorumController, committer: Committer) -> None:
        self.controller = controller
        self.committer = committer
        self.handlers: dict[int, Handler] = {}
        # Narrower version ranges than the schema's, for APIs only partly served.
        self.version_limits: dict[int, tuple[int, int]] = {}
        self.register(62, self.broker_registration)
        self.register(63, self.broker_heartbeat)
        self.register(64, self.unregister_broker)
        self.register(60, self.describe_cluster)
        self.register(57, self.update_features)
        self.register(70, self.controller_registration)

    def register(self, api_key: int, handler: Handler, versions: tuple[int, int] | None = None) -> None:
        self.handlers[api_key] = handler
        if versions is not None:
            self.version_limits[api_key] = versions

    def served_versions(self, api: Api) -> tuple[int, int]:
        return self.version_limits.get(api.key, (api.min_version, api.max_version))

    # --- dispatch ---------------------------------------------------------------------------
    def dispatch(self, conn: Connection, frame: bytes) -> bytes | asyncio.Future | None:
        key, version, correlation_id = peek_request_prefix(frame)
        api = APIS.get(key)
        if api is None or (key not in self.handlers and key != API_VERSIONS_KEY):
            raise RequestRejected(f"unknown or unserved API key {key}")
        lo, hi = self.served_versions(api)
        if not lo <= version <= hi:
            if key == API_VERSIONS_KEY:
                # Kafka answers with a v0 body listing what it does support, so the client
                # can retry at a version both sides know.
                return self._encode(api, 0, correlation_id, ApiVersionsResponse(
                    error_code=Error.UNSUPPORTED_VERSION, api_keys=self._api_versions_list()))
            raise RequestRejected(f"{api.name} v{version} is not supported (v{lo}-v{hi})")
        header, pos = RequestHeader.decode(frame, api.request_header_version(version))
        request, end = api.request.decode(frame, version, pos)
        if end != len(frame):
            raise DecodeError(api.request.NAME, version, end, f"{len(frame) - end} trailing bytes")
        if key == API_VERSIONS_KEY:
            return self._encode(api, version, correlation_id, self.api_versions(version))
        response, visible = self.handlers[key](header, request, version)
        waiter = self.committer.wait(visible)
        if waiter is None:
            return self._encode(api, version, correlation_id, response)
        out = asyncio.get_running_loop().create_future()

        def release(f: asyncio.Future) -> None:
            if f.exception() is not None:
                # The records behind this answer never became durable: tell the client to
                # retry instead of pretending it worked.
                with_error(response, Error.NOT_CONTROLLER)
            out.set_result(self._encode(api, version, correlation_id, response))

        waiter.add_done_callback(release)
        return out

    @staticmethod
    def _encode(api: Api, version: int, correlation_id: int, response: Message) -> bytes:
        out = begin_frame()
        ResponseHeader(correlation_id).encode_into(out, api.response_header_version(version))
        response.encode_into(out, version)
        return end_frame(out)

    # --- ApiVersions ------------------------------------------------------------------------
    def _api_versions_list(self) -> list[ApiVersion]:
        keys = sorted({*self.handlers, API_VERSIONS_KEY})
        return [ApiVersion(api_key=k, min_version=self.served_versions(APIS[k])[0],
                           max_version=self.served_versions(APIS[k])[1]) for k in keys]

    def api_versions(self, version: int) -> ApiVersionsResponse:
        response = ApiVersionsResponse(api_keys=self._api_versions_list())
        if version >= 3:
            c = self.controller
            response.supported_features = c.supported_features()
            response.finalized_features = c.finalized_features()
            response.finalized_features_epoch = c.features.epoch
        return response

    # --- writes -----------------------------------------------------------------------------
    def _submit(self, applied: Applied) -> tuple[Message, int]:
        self.committer.submit(applied.records, applied.base_offset)
        return applied.response, self.controller.last_applied_offset

    def broker_registration(self, header: RequestHeader, request: Message, version: int) -> tuple[Message, int]:
        return self._submit(self.controller.register_broker(request))

    def broker_heartbeat(self, header: RequestHeader, request: Message, version: int) -> tuple[Message, int]:
        return self._submit(self.controller.broker_heartbeat(request))

    def unregister_broker(self, header: RequestHeader, request: Message, version: int) -> tuple[Message, int]:
        return self._submit(self.controller.unregister_broker(request))

    def update_features(self, header: RequestHeader, request: Message, version: int) -> tuple[Message, int]:
        return self._submit(self.controller.update_features(request, version))

    def controller_registration(self, header: RequestHeader, request: Message, version: int) -> tuple[Message, int]:
        return self._submit(self.controller.register_controller(request))

    # --- reads ------------------------------------------------------------------------------
    def describe_cluster(self, header: RequestHeader, request: Message, version: int) -> tuple[Message, int]:
        return self.controller.describe_cluster(request, version), self.controller.last_applied_offset
