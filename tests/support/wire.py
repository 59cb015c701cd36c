"""Speaking to a controller process as a broker would: raw sockets and the generated codecs."""

from __future__ import annotations

import socket
import struct

from protocol.client import ConnectionClosed, KafkaClient
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.generated.messages.broker_registration_request import (
    BrokerRegistrationRequest, Feature, Listener)
from protocol.generated.messages.broker_registration_response import BrokerRegistrationResponse
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_cluster_response import DescribeClusterResponse
from protocol.generated.messages.unregister_broker_request import UnregisterBrokerRequest
from protocol.primitives import random_uuid

REGISTRATION_V = 4
HEARTBEAT_V = 1
DESCRIBE_CLUSTER_V = 1
API_VERSIONS_V = 3
MV_RANGE = (7, 25)


def connect(controller, timeout: float = 15.0) -> KafkaClient:
    """A client of ``controller`` (anything with ``host`` and ``port``)."""
    return KafkaClient(controller.host, controller.port, client_id="kraftwire-test", timeout=timeout)


def registration_request(cluster_id: str, broker_id: int, incarnation: bytes | None = None,
                         mv_range: tuple[int, int] = MV_RANGE, previous_broker_epoch: int = -1,
                         port: int | None = None) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=cluster_id, incarnation_id=incarnation or random_uuid(),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=port or 29000 + broker_id,
                            security_protocol=0)],
        features=[Feature(name="metadata.version", min_supported_version=mv_range[0],
                          max_supported_version=mv_range[1])],
        rack=None, log_dirs=[random_uuid()], previous_broker_epoch=previous_broker_epoch)


def heartbeat_request(broker_id: int, epoch: int, offset: int | None = None, want_fence: bool = False,
                      want_shut_down: bool = False) -> BrokerHeartbeatRequest:
    """A heartbeat; by default the broker claims to have caught up with its own epoch."""
    return BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch,
                                  current_metadata_offset=epoch if offset is None else offset,
                                  want_fence=want_fence, want_shut_down=want_shut_down)


class WireBroker:
    """One simulated broker: an id, an incarnation, and a connection to the controller."""

    def __init__(self, controller, broker_id: int, incarnation: bytes | None = None) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self.incarnation = incarnation or random_uuid()
        self.epoch = -1
        self.client = connect(controller)

    def close(self) -> None:
        self.client.close()

    def reconnect(self) -> None:
        self.client.close()
        self.client = connect(self.controller)

    def register(self, cluster_id: str | None = None, **fields) -> BrokerRegistrationResponse:
        request = registration_request(cluster_id or self.controller.cluster_id, self.broker_id,
                                       self.incarnation, **fields)
        response = self.client.request(request, REGISTRATION_V)
        if response.error_code == 0:
            self.epoch = response.broker_epoch
        return response

    def heartbeat(self, offset: int | None = None, want_fence: bool = False,
                  want_shut_down: bool = False, epoch: int | None = None) -> BrokerHeartbeatResponse:
        return self.client.request(heartbeat_request(
            self.broker_id, self.epoch if epoch is None else epoch, offset, want_fence, want_shut_down), HEARTBEAT_V)


def describe_cluster(client: KafkaClient, endpoint_type: int = 1) -> DescribeClusterResponse:
    return client.request(DescribeClusterRequest(endpoint_type=endpoint_type), DESCRIBE_CLUSTER_V)


def listed_brokers(client: KafkaClient) -> list[int]:
    response = describe_cluster(client)
    assert response.error_code == 0
    return [b.broker_id for b in response.brokers]


def unregister(client: KafkaClient, broker_id: int):
    return client.request(UnregisterBrokerRequest(broker_id=broker_id), 0)


def api_versions(client: KafkaClient, version: int = API_VERSIONS_V):
    return client.request(ApiVersionsRequest(client_software_name="kraftwire-test",
                                             client_software_version="1"), version)


def raw_socket(controller, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection((controller.host, controller.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True once the server has closed ``sock`` (EOF or reset) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _proc_net_address(address: tuple[str, int]) -> str:
    """An IPv4 address as /proc/net/tcp writes it: the address word in host order, in hex."""
    host, port = address
    return f"{struct.unpack('=I', socket.inet_aton(host))[0]:08X}:{port:04X}"


def server_has_read(sock: socket.socket) -> bool:
    """Whether the server's end of ``sock`` (a loopback connection) holds no unread bytes: the
    receive queue that /proc/net/tcp shows for it is empty, so the server took in what was sent."""
    local, remote = _proc_net_address(sock.getpeername()), _proc_net_address(sock.getsockname())
    with open("/proc/net/tcp") as table:
        for line in table:
            fields = line.split()
            if fields[1:3] == [local, remote]:
                return int(fields[4].split(":")[1], 16) == 0
    return False


__all__ = ["ConnectionClosed", "KafkaClient", "WireBroker", "api_versions", "closed_by_peer",
           "connect", "describe_cluster", "frame", "heartbeat_request", "listed_brokers", "raw_socket",
           "registration_request", "server_has_read", "unregister"]
