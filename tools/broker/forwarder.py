"""Admin requests a test broker's clients send it, forwarded to the active controller.

As a Kafka broker does, the request goes as the client sent it (header and body) inside an
Envelope naming the client's principal and address, and the controller's answer (its response
header and body) goes back to the client unchanged. A write is answered only once the broker's
own image has replayed everything the controller had committed when it answered, so the
client's next request to this broker sees what it wrote (read-your-writes).

Forwarding has a connection of its own: the metadata fetch long-polls on its connection, and
answers on one connection come back in request order.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging

from protocol.error_codes import Error, describe
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.default_principal_data import DefaultPrincipalData
from protocol.generated.messages.envelope_request import EnvelopeRequest
from protocol.generated.messages.envelope_response import EnvelopeResponse
from protocol.primitives import INT16
from server.context import Principal, RequestContext
from tools.broker.channel import API_VERSIONS_VERSION, ControllerChannel, ControllerUnavailable
from tools.broker.fetcher import MetadataFetcher

log = logging.getLogger("kraftwire.broker.forwarder")

ENVELOPE_VERSION = 0
PRINCIPAL_VERSION = 0
UNKNOWN_ADDRESS = bytes(4)


def serialized_principal(principal: Principal) -> bytes:
    """The principal as Kafka's default principal builder serializes it for an Envelope."""
    data = DefaultPrincipalData(type=principal.type, name=principal.name,
                                token_authenticated=principal.token_authenticated)
    return INT16.pack(PRINCIPAL_VERSION) + data.encode(PRINCIPAL_VERSION)


def packed_address(address: str) -> bytes:
    try:
        return ipaddress.ip_address(address).packed
    except ValueError:
        return UNKNOWN_ADDRESS  # not an IP connection: the controller still needs 4 or 16 bytes


class Forwarder:
    def __init__(self, channel: ControllerChannel, fetcher: MetadataFetcher, timeout_s: float) -> None:
        self.channel = channel
        self.fetcher = fetcher
        self.timeout_s = timeout_s
        self.forwarded = 0

    def controller_versions(self, api_key: int) -> tuple[int, int] | None:
        """The versions of an API the active controller serves; None if it serves none."""
        return self.channel.api_versions.get(api_key)

    async def connect(self) -> None:
        """Reach the controller once, so its API versions are known before clients ask."""
        while True:
            try:
                await self._committed_offset()
                return
            except ControllerUnavailable:
                continue  # the channel backs off and tries the next address

    async def forward(self, frame: bytes, context: RequestContext, is_write: bool) -> bytes | int:
        """The controller's answer to ``frame`` (response header and body), or the error code
        to answer the client with when there is none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        envelope = EnvelopeRequest(request_data=frame, request_principal=serialized_principal(context.principal),
                                   client_host_address=packed_address(context.client_address))
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return Error.REQUEST_TIMED_OUT
            try:
                # Bounded as a whole: while no controller answers, the channel keeps trying.
                response = await asyncio.wait_for(self.channel.call(envelope, ENVELOPE_VERSION, left), left)
                break
            except ControllerUnavailable:
                continue  # NOT_CONTROLLER or no answer: the channel looks for the active one
            except asyncio.TimeoutError:
                return Error.REQUEST_TIMED_OUT
        assert isinstance(response, EnvelopeResponse)
        self.forwarded += 1
        if response.error_code != Error.NONE:
            log.warning("the controller refused a forwarded request: %s", describe(response.error_code))
            return response.error_code
        if is_write:
            await self._catch_up(deadline)
        return response.response_data or b""

    async def _catch_up(self, deadline: float) -> None:
        """Wait until the image holds what the controller had committed after answering."""
        loop = asyncio.get_running_loop()
        try:
            committed = await asyncio.wait_for(self._committed_offset(), max(0.001, deadline - loop.time()))
            await asyncio.wait_for(asyncio.shield(self.fetcher.wait_for(committed)),
                                   max(0.001, deadline - loop.time()))
        except (ControllerUnavailable, asyncio.TimeoutError):
            # The write is done either way; the client may see the old image for a moment.
            log.warning("answering a forwarded write before the image caught up (at offset %d)",
                        self.fetcher.offset)

    async def _committed_offset(self) -> int:
        # A controller's ApiVersions carries its committed offset as the finalized features' epoch.
        response = await self.channel.call(
            ApiVersionsRequest(client_software_name="kraftwire-broker", client_software_version="1"),
            API_VERSIONS_VERSION)
        assert isinstance(response, ApiVersionsResponse)
        return response.finalized_features_epoch
