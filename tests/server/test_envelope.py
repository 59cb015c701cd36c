"""Envelope (API 58): admin requests a broker forwards to the controller for its clients.

The broker's side is played with kafka-python's schema engine: it builds the inner request
(header and body), wraps it with the client's serialized principal and address, and reads the
inner answer out of the EnvelopeResponse as Kafka's ForwardingManager does, header included.
"""

from __future__ import annotations

import struct

import pytest

from protocol.error_codes import Error
from server.context import Principal, forwarded_address, forwarded_principal
from tests.support.envelope import ALICE, LOCALHOST_V4, create_topics, envelope, forward, principal_bytes
from tests.support.kafka_python_wire import encode_request, exchange, kp
from tests.support.wire import WireBroker, raw_socket
from tools.controller_process import ControllerProcess

TOPIC, BROKER = 2, 4  # config resource types
SET = 0  # IncrementalAlterConfigs operation


def refused(sock, inner: bytes, **kwargs) -> int:
    """Forward raw inner bytes that must fail the envelope; returns its error code."""
    answer = exchange(sock, envelope(inner, **kwargs), 901)
    assert answer.response_data is None
    return answer.error_code


def describe_configs(resource_type: int, name: str, version: int = 4):
    cls = kp("DescribeConfigsRequest")
    return cls[version](resources=[cls.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None)],
        include_synonyms=False, include_documentation=False)


def incremental_alter(topic: str, key: str, value: str, version: int = 1):
    cls = kp("IncrementalAlterConfigsRequest")
    resource = cls.AlterConfigsResource
    return cls[version](resources=[resource(resource_type=TOPIC, resource_name=topic, configs=[
        resource.AlterableConfig(name=key, config_operation=SET, value=value)])], validate_only=False)


def config_value(sock, topic: str, key: str, correlation_id: int) -> str | None:
    described = exchange(sock, describe_configs(TOPIC, topic), correlation_id)
    [result] = described.results
    assert result.error_code == Error.NONE
    return {c.name: c.value for c in result.configs}.get(key)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A controller with one live broker (its session outlasts the module), so topics can
    be placed."""
    controller = ControllerProcess(tmp_path_factory.mktemp("envelope"), {"broker.session.timeout.ms": "600000"})
    try:
        controller.start()
        broker = WireBroker(controller, 1)
        assert broker.register().error_code == Error.NONE
        assert broker.heartbeat().is_fenced is False
        broker.close()
        yield controller
    finally:
        controller.stop()


@pytest.fixture
def sock(cluster):
    with raw_socket(cluster) as s:
        yield s


def test_create_topics_forwarded_is_served_and_answered_inside_the_envelope(sock):
    created = forward(sock, create_topics("forwarded-topic"), 31)
    [topic] = created.topics
    assert (topic.name, topic.error_code, topic.num_partitions) == ("forwarded-topic", Error.NONE, 3)
    # The topic exists for everyone, not only inside the envelope's answer.
    again = exchange(sock, create_topics("forwarded-topic"), 32)
    assert again.topics[0].error_code == Error.TOPIC_ALREADY_EXISTS


def test_an_inner_request_with_the_old_header_gets_the_old_response_header(sock):
    created = forward(sock, create_topics("forwarded-v4", version=4), 33)
    assert created.topics[0].error_code == Error.NONE


def test_incremental_alter_configs_forwarded(sock):
    forward(sock, create_topics("configured"), 41)
    altered = forward(sock, incremental_alter("configured", "retention.ms", "4242"), 42)
    assert [(r.resource_name, r.error_code) for r in altered.responses] == [("configured", Error.NONE)]
    assert config_value(sock, "configured", "retention.ms", 43) == "4242"


def test_alter_configs_forwarded(sock):
    forward(sock, create_topics("legacy-configured"), 51)
    cls = kp("AlterConfigsRequest")
    resource = cls.AlterConfigsResource
    request = cls[2](resources=[resource(resource_type=TOPIC, resource_name="legacy-configured", configs=[
        resource.AlterableConfig(name="cleanup.policy", value="compact")])], validate_only=False)
    altered = forward(sock, request, 52)
    assert [r.error_code for r in altered.responses] == [Error.NONE]
    assert config_value(sock, "legacy-configured", "cleanup.policy", 53) == "compact"


def test_describe_configs_is_not_forwardable(sock):
    """Kafka does not forward DescribeConfigs (a broker answers it from its own metadata), and
    its controller refuses it inside an envelope."""
    assert refused(sock, encode_request(describe_configs(BROKER, "1"), 61)) == Error.INVALID_REQUEST


def test_a_nested_envelope_is_refused(sock):
    inner = encode_request(envelope(encode_request(create_topics("nested"), 71)), 72)
    assert refused(sock, inner) == Error.INVALID_REQUEST
    # Nothing inside it was served.
    assert exchange(sock, create_topics("nested"), 73).topics[0].error_code == Error.NONE


def test_api_versions_is_not_forwardable(sock):
    request = kp("ApiVersionsRequest")[3](client_software_name="x", client_software_version="1")
    assert refused(sock, encode_request(request, 81)) == Error.INVALID_REQUEST


def test_a_malformed_inner_request_fails_only_the_envelope(sock):
    whole = encode_request(create_topics("truncated"), 91)
    assert refused(sock, whole[:-6]) == Error.UNSUPPORTED_VERSION
    assert refused(sock, whole[:5]) == Error.UNSUPPORTED_VERSION  # not even a header
    # The broker's connection is still served, and the truncated topic was never created.
    assert exchange(sock, create_topics("truncated"), 92).topics[0].error_code == Error.NONE


def test_an_inner_version_or_api_the_controller_does_not_serve(sock):
    whole = encode_request(create_topics("v99"), 93)
    assert refused(sock, whole[:2] + struct.pack(">h", 99) + whole[4:]) == Error.UNSUPPORTED_VERSION
    create_acls = 30  # forwardable in Kafka, not served here
    assert refused(sock, struct.pack(">hhih", create_acls, 3, 94, -1) + b"\x00\x00") == Error.UNSUPPORTED_VERSION


@pytest.mark.parametrize("principal", [None, b"", b"\x00", principal_bytes("User", "bob", version=7),
                                       struct.pack(">h", 0) + b"\x09User"])
def test_an_unreadable_principal(sock, principal):
    inner = encode_request(create_topics("no-principal"), 95)
    assert refused(sock, inner, principal=principal) == Error.PRINCIPAL_DESERIALIZATION_FAILURE


@pytest.mark.parametrize("address", [b"", b"\x7f\x00\x01", bytes(5)])
def test_an_unreadable_client_address(sock, address):
    inner = encode_request(create_topics("no-address"), 96)
    assert refused(sock, inner, address=address) == Error.INVALID_REQUEST


def test_the_forwarded_principal_and_address_are_read_as_kafka_writes_them():
    assert forwarded_principal(ALICE) == Principal("User", "alice")
    assert forwarded_principal(ALICE + b"\x01\x02") == Principal("User", "alice")
    token = struct.pack(">h", 0) + b"\x05User\x04svc\x01\x00"
    assert forwarded_principal(token) == Principal("User", "svc", token_authenticated=True)
    assert forwarded_address(LOCALHOST_V4) == "127.0.0.1"
    assert forwarded_address(bytes(15) + b"\x01") == "::1"
