"""Requests are parsed as Kafka parses them: bytes after a complete body are ignored.

librdkafka 2.16 sends Metadata v12 with three bytes after the body; Kafka answers it, so the
controller must too, and the connection must stay usable for the requests that follow.
"""

from __future__ import annotations

from protocol.error_codes import Error
from server.config import EMBEDDED_NODE_ID
from tests.support.kafka_python_wire import exchange, kp
from tests.support.wire import WireBroker, raw_socket

METADATA_V = 12
HEARTBEAT_V = 1


def metadata_request():
    return kp("MetadataRequest")[METADATA_V](
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_metadata_v12_with_three_trailing_bytes_is_answered(module_controller):
    controller = module_controller
    with raw_socket(controller) as sock:
        padded = exchange(sock, metadata_request(), 1, trailing=b"\x00\x00\x00")
        plain = exchange(sock, metadata_request(), 2)
    assert padded.cluster_id == controller.cluster_id
    assert padded.controller_id == EMBEDDED_NODE_ID
    assert [(b.host, b.port) for b in padded.brokers] == [(b.host, b.port) for b in plain.brokers]
    assert padded.topics == plain.topics


def test_trailing_bytes_after_a_write_keep_the_connection(module_controller):
    controller = module_controller
    broker = WireBroker(controller, 41)
    assert broker.register().error_code == Error.NONE
    beat = kp("BrokerHeartbeatRequest")[HEARTBEAT_V]
    with raw_socket(controller) as sock:
        for correlation_id in (7, 8):
            response = exchange(sock, beat(broker_id=41, broker_epoch=broker.epoch,
                                           current_metadata_offset=broker.epoch,
                                           want_fence=False, want_shut_down=False),
                                correlation_id, trailing=b"\x01\x02\x03\x04\x05")
            assert response.error_code == Error.NONE
            assert response.is_fenced is False
    assert controller.running
