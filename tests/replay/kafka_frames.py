"""Kafka conversations encoded with the generated codecs and written as captures, for the
decoder and rule tests."""
from __future__ import annotations

import io
import struct

from protocol.api_keys import APIS
from protocol.framing import begin_frame, end_frame
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.generated.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.messages.metadata_response import MetadataResponse
from protocol.headers import encode_request_header, encode_response_header
from protocol.message import Message
from protocol.records import Record, RecordBatch, encode_batch
from captures import pcapng_writer
from tools.replay.capture import Packet, read_packets

T0 = 1_700_000_000_000_000_000
CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9093)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
TOPIC_ID = bytes(range(16))


def request(message: Message, version: int, correlation_id: int, client_id: str | None = "replay-test",
            api_key: int | None = None) -> bytes:
    out = begin_frame()
    encode_request_header(out, message.API_KEY if api_key is None else api_key, version, correlation_id, client_id)
    message.encode_into(out, version)
    return end_frame(out)


def response(message: Message, version: int, correlation_id: int) -> bytes:
    out = begin_frame()
    encode_response_header(out, message.API_KEY, version, correlation_id)
    message.encode_into(out, version)
    return end_frame(out)


def raw_frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def advertised(**overrides: tuple[int, int]) -> ApiVersionsResponse:
    """What the controller would advertise; `overrides` by API name."""
    keys = [ApiVersion(api_key=key, min_version=api.min_version, max_version=api.max_version)
            for key, api in APIS.items()]
    for key in keys:
        name = APIS[key.api_key].name
        if name in overrides:
            key.min_version, key.max_version = overrides[name]
    return ApiVersionsResponse(error_code=0, api_keys=keys)


def api_versions(correlation_id: int = 1, **overrides) -> tuple[bytes, bytes]:
    return (request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, correlation_id),
            response(advertised(**overrides), 3, correlation_id))


def metadata(correlation_id: int) -> tuple[bytes, bytes]:
    return (request(MetadataRequest(topics=None), 12, correlation_id),
            response(MetadataResponse(cluster_id=CLUSTER_ID, controller_id=1), 12, correlation_id))


def registration(correlation_id: int, broker_id: int, epoch: int, cluster_id: str = CLUSTER_ID) -> tuple[bytes, bytes]:
    body = BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=cluster_id, incarnation_id=bytes(16),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=29000 + broker_id, security_protocol=0)],
        features=[Feature(name="metadata.version", min_supported_version=7, max_supported_version=25)])
    return (request(body, 4, correlation_id),
            response(BrokerRegistrationResponse(error_code=0, broker_epoch=epoch), 4, correlation_id))


def heartbeat(correlation_id: int, broker_id: int, epoch: int) -> tuple[bytes, bytes]:
    body = BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=epoch)
    return request(body, 1, correlation_id), response(BrokerHeartbeatResponse(), 1, correlation_id)


def record_batch(base_offset: int = 0, count: int = 3) -> bytes:
    return encode_batch(RecordBatch(base_offset=base_offset, last_offset_delta=count - 1,
                                    records=[Record(value=b"v%d" % i, offset_delta=i) for i in range(count)]))


def fetch(correlation_id: int, records: bytes) -> tuple[bytes, bytes]:
    body = FetchRequest(max_wait_ms=500, topics=[
        FetchTopic(topic_id=TOPIC_ID, partitions=[FetchPartition(partition=0, fetch_offset=0)])])
    answer = FetchResponse(responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=[
        PartitionData(partition_index=0, high_watermark=10, records=records)])])
    return request(body, 16, correlation_id), response(answer, 16, correlation_id)


def capture(*flows: list[tuple[bytes, bytes | None]], mss: int = 1460) -> bytes:
    """A pcapng of one connection per flow, each a list of (request, response or None)."""
    buffer = io.BytesIO()
    with pcapng_writer.open(buffer) as writer:
        t = T0
        for n, exchanges in enumerate(flows):
            conn = writer.connection((CLIENT[0], CLIENT[1] + n), SERVER, t, client_isn=1000, server_isn=5000, mss=mss)
            for req, resp in exchanges:
                t += 1000
                conn.client_to_server(req, t)
                if resp is not None:
                    t += 500_000
                    conn.server_to_client(resp, t)
            t += 1000
            conn.close(t)
        return buffer.getvalue()


def packets(data: bytes) -> list[Packet]:
    return [p for p in read_packets(data) if isinstance(p, Packet)]


def rewrite(packet_list: list[Packet]) -> bytes:
    """A pcapng of exactly these packets, in this order."""
    buffer = io.BytesIO()
    with pcapng_writer.open(buffer) as writer:
        for p in packet_list:
            writer.write_packet(p.timestamp_ns, p.data, p.orig_len)
        return buffer.getvalue()
