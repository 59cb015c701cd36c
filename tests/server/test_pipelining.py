"""Pipelined requests on one connection are answered in request order.

Registrations wait for an fsync before they are answered; ApiVersions is answered at once and
DescribeCluster as soon as what it could see is durable. Kafka clients rely on answers coming
back in the order of the requests, whatever each one waited for.
"""

from __future__ import annotations

from protocol.api_keys import APIS
from protocol.error_codes import Error
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.response_header import ResponseHeader
from tests.support.wire import connect, registration_request


def build_pipeline(controller, client, count: int, first_broker: int):
    """(frames, expectations): a mix of writes that wait for fsync and reads that do not."""
    frames, sent = [], []
    broker_id = first_broker
    for i in range(count):
        kind = i % 5
        if kind == 0:
            request, version = registration_request(controller.cluster_id, broker_id), 4
            broker_id += 1
        elif kind in (1, 3):
            request, version = ApiVersionsRequest(client_software_name="pipeline",
                                                  client_software_version="1"), 3
        elif kind == 2:
            request, version = DescribeClusterRequest(endpoint_type=1), 1
        else:
            request, version = BrokerHeartbeatRequest(broker_id=9999, broker_epoch=1), 1
        frame, correlation_id = client.encode_request(request, version)
        frames.append(frame)
        sent.append((correlation_id, request.API_KEY, version))
    return b"".join(frames), sent


def read_answers(client, sent):
    answers = []
    for correlation_id, api_key, version in sent:
        frame = client.read_frame()
        api = APIS[api_key]
        header, pos = ResponseHeader.decode(frame, api.response_header_version(version))
        assert header.correlation_id == correlation_id, (
            f"answer {header.correlation_id} arrived where {correlation_id} was due")
        body, end = api.response.decode(frame, version, pos)
        assert end == len(frame)
        answers.append((api_key, body))
    return answers


def test_fifty_pipelined_requests_are_answered_in_order(controller):
    with connect(controller) as client:
        payload, sent = build_pipeline(controller, client, 50, first_broker=1)
        client.sock.sendall(payload)  # all 50 back to back, before reading anything
        answers = read_answers(client, sent)

    epochs = [body.broker_epoch for key, body in answers if key == 62]
    assert len(epochs) == 10
    assert all(body.error_code == Error.NONE for key, body in answers if key != 63)
    assert epochs == sorted(epochs) and len(set(epochs)) == 10
    for key, body in answers:
        if key == 60:
            assert body.cluster_id == controller.cluster_id
            assert body.brokers == []  # registered brokers stay fenced until they heartbeat
        elif key == 18:
            assert {k.api_key for k in body.api_keys} >= {18, 60, 62, 63}
    heartbeats = [body.error_code for key, body in answers if key == 63]
    assert heartbeats == [Error.STALE_BROKER_EPOCH] * 10


def test_pipelines_on_several_connections_stay_in_order(controller):
    clients = [connect(controller) for _ in range(4)]
    try:
        pipelines = []
        for n, client in enumerate(clients):
            payload, sent = build_pipeline(controller, client, 100, first_broker=1000 * (n + 1))
            pipelines.append((client, payload, sent))
        # Interleave the sends so that every connection has requests in flight at once.
        for client, payload, _ in pipelines:
            client.sock.sendall(payload[: len(payload) // 2])
        for client, payload, _ in pipelines:
            client.sock.sendall(payload[len(payload) // 2:])
        all_epochs = []
        for client, _, sent in pipelines:
            answers = read_answers(client, sent)
            epochs = [body.broker_epoch for key, body in answers if key == 62]
            assert len(epochs) == 20 and epochs == sorted(epochs)
            all_epochs += epochs
        assert len(set(all_epochs)) == 80  # every registration got its own offset
    finally:
        for client in clients:
            client.close()
