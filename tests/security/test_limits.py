"""queued.max.request.bytes and connections.max.idle.ms: a client that sends most of a large
request and stalls is not read from once the bytes buffered over all connections pass the
bound, while other clients go on being served; it is closed once idle for too long."""

from __future__ import annotations

import socket
import struct
import time

from protocol.client import KafkaClient
from protocol.generated.messages.api_versions_request import ApiVersionsRequest

LIMIT = 100_000
IDLE_MS = 2_000


def test_a_hoarding_client_waits_and_others_are_served(controller_factory) -> None:
    controller = controller_factory({"queued.max.request.bytes": str(LIMIT), "connections.max.idle.ms": str(IDLE_MS)})
    polite = KafkaClient(controller.host, controller.port, timeout=5)
    hoarder = socket.create_connection((controller.host, controller.port))
    try:
        size = 1_000_000
        hoarder.sendall(struct.pack(">i", size) + bytes(150_000))
        time.sleep(0.3)
        # The rest of the frame: a request of zeros, which the controller would refuse by closing
        # the connection at once, if it read it.
        hoarder.sendall(bytes(size - 150_000))
        hoarder.settimeout(1.0)
        try:
            closed_early = hoarder.recv(1) == b""
        except TimeoutError:
            closed_early = False
        assert not closed_early, "the stalled request was read past the bound"
        for _ in range(20):
            assert polite.request(ApiVersionsRequest(), 3).error_code == 0
            time.sleep(0.1)  # the polite client stays busy; the hoarder is idle
        # Idle past connections.max.idle.ms: the controller closes it.
        hoarder.settimeout(IDLE_MS / 1000 + 3)
        try:
            closed = hoarder.recv(1) == b""
        except ConnectionResetError:  # closed with its unread bytes still queued
            closed = True
        assert closed
    finally:
        polite.close()
        hoarder.close()
