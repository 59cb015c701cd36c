"""A lone voter is active before it accepts a connection: a client that connected the moment
the port was bound, and the first one after ``start`` returned, are both answered by the active
controller, never with NOT_CONTROLLER."""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvloop

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages import ApiKey
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.primitives import random_uuid, uuid_to_str
from server.app import ControllerServer
from server.config import embedded_config
from server.metalog.formatting import format_dirs
from server.network import bind
from tests.support.wire import REGISTRATION_V, registration_request

STARTS = 20


async def start_and_ask(data_dir: Path) -> tuple[int, int]:
    """Start a formatted single voter on a port bound first, with a broker's registration
    already sent on a connection made before ``start``; then register a second broker once
    ``start`` has returned. Returns both error codes."""
    sock = bind("127.0.0.1", 0)
    config = embedded_config(data_dir, sock.getsockname()[1])
    cluster_id = uuid_to_str(random_uuid())
    format_dirs(config, cluster_id)
    server = ControllerServer(config)
    loop = asyncio.get_running_loop()
    early = KafkaClient("127.0.0.1", config.controller_listener.port, client_id="early-broker", timeout=60)
    try:
        early.send(registration_request(cluster_id, 1), REGISTRATION_V)
        host, port = await server.start(sock)
        first = await loop.run_in_executor(
            None, early.receive, ApiKey.BROKER_REGISTRATION, REGISTRATION_V)
        with KafkaClient(host, port, client_id="late-broker", timeout=60) as late:
            second = await loop.run_in_executor(
                None, late.request, registration_request(cluster_id, 2), REGISTRATION_V)
    finally:
        early.close()
        await server.stop()
    assert isinstance(first, BrokerRegistrationResponse) and isinstance(second, BrokerRegistrationResponse)
    return first.error_code, second.error_code


def test_a_lone_voter_answers_from_its_first_request_as_the_active_controller(tmp_path: Path) -> None:
    # On the server's own loop: uvloop reads the early request while the LeaderChange's fsync
    # runs on its thread, where a listener started too soon answers it NOT_CONTROLLER.
    for start in range(STARTS):
        codes = uvloop.run(start_and_ask(tmp_path / f"start-{start}"))
        assert codes == (Error.NONE, Error.NONE), f"start {start}: {[Error(c).name for c in codes]}"
