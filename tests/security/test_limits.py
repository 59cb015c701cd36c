"""Bytes are bounded before they are read, against a controller process: a client that has not
logged in may not send a frame larger than ``sasl.server.max.receive.size`` (closed at the size
prefix, as Kafka closes it) and holds none of ``queued.max.request.bytes``, so a logged-in
admin's large request goes through while such clients sit on half-sent frames."""

from __future__ import annotations

import socket
import struct

import pytest

from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from server.config import ConfigError, config_from_properties
from tests.support.secured_clients import ADMIN, ADMIN_PASSWORD, PLAIN_JAAS, sasl_client
from tests.support.security import BASE
from tests.support.wire import closed_by_peer

SASL = {"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS}
# A Metadata request of about 800 KB: over the default 512 KiB allowed before login.
TOPICS = 20_000


def big_metadata() -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequestTopic(name=f"no-such-topic-{i:06d}") for i in range(TOPICS)],
                           allow_auto_topic_creation=False)


def test_a_frame_before_login_over_the_limit_closes_at_its_prefix(controller_factory) -> None:
    controller = controller_factory(SASL)
    with socket.create_connection((controller.host, controller.port)) as sock:
        # 100 MiB announced, a few bytes sent: the answer is the close, not a wait for the rest.
        sock.sendall(struct.pack(">i", 100 << 20) + bytes(1000))
        assert closed_by_peer(sock, timeout=60)
    controller.wait_for_stderr(
        r"Failed authentication with /127\.0\.0\.1 \(invalid receive size before authentication: "
        r"frame of 104857600 bytes exceeds sasl\.server\.max\.receive\.size=524288\)", timeout=30)
    # Logged in, the same client may send frames up to socket.request.max.bytes.
    admin = sasl_client(controller.host, controller.port, ADMIN, ADMIN_PASSWORD)
    try:
        assert len(admin.request(big_metadata(), 12).topics) == TOPICS
    finally:
        admin.close()


def test_clients_that_never_log_in_hold_none_of_the_shared_budget(controller_factory) -> None:
    controller = controller_factory({**SASL, "queued.max.request.bytes": "100000"})
    squatters = [socket.create_connection((controller.host, controller.port)) for _ in range(3)]
    try:
        for sock in squatters:  # three half-sent frames, each larger than the whole budget
            sock.sendall(struct.pack(">i", 500_000) + bytes(200_000))
        admin = sasl_client(controller.host, controller.port, ADMIN, ADMIN_PASSWORD)
        try:
            # Larger than one read: it reserves its size from the budget, which is untouched.
            assert len(admin.request(big_metadata(), 12).topics) == TOPICS
        finally:
            admin.close()
    finally:
        for sock in squatters:
            sock.close()


@pytest.mark.parametrize("value,words", [("0", "positive"), ("-2", "at least -1"), ("big", "integer")])
def test_sasl_server_max_receive_size_is_checked(value: str, words: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        config_from_properties({**BASE, "sasl.server.max.receive.size": value})
    assert excinfo.value.key == "sasl.server.max.receive.size" and words in excinfo.value.message
    assert config_from_properties(BASE).security.sasl_server_max_receive_size == 524288
    assert config_from_properties({**BASE, "sasl.server.max.receive.size": "-1"}
                                  ).security.sasl_server_max_receive_size == -1
