"""AllocateProducerIds (API 67) over the wire, with kafka-python's protocol engine as the client,
and the producer id control's rules."""

from __future__ import annotations

import socket
import struct

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.generated.metadata.producer_ids_record import ProducerIdsRecord
from server.controller.cluster import BrokerRegistration
from server.controller.offsets import OffsetControl
from server.controller.producer_ids import BLOCK_SIZE, MAX_PRODUCER_ID, ProducerIdControl
from tests.support.metalog import new_controller
from tests.support.wire import WireBroker, raw_socket


from tools.bench.kafka_python_engine import kafka_python_class


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the controller closed the connection"
        data += chunk
    return data


class KafkaPythonClient:
    """Requests encoded and responses decoded by kafka-python, over a plain socket."""

    def __init__(self, controller) -> None:
        self.sock = raw_socket(controller)
        self.correlation_id = 0

    def allocate(self, broker_id: int, broker_epoch: int):
        request = kafka_python_class("AllocateProducerIdsRequest")(broker_id=broker_id, broker_epoch=broker_epoch)
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="kafka-python-engine")
        self.sock.sendall(request.encode(version=0, header=True, framed=True))
        (size,) = struct.unpack(">i", _read_exactly(self.sock, 4))
        response = kafka_python_class("AllocateProducerIdsResponse").decode(
            _read_exactly(self.sock, size), version=0, header=True)
        assert response.header.correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()


def test_blocks_of_1000_follow_each_other_and_survive_a_restart(controller) -> None:
    broker = WireBroker(controller, 1)
    assert broker.register().error_code == Error.NONE
    client = KafkaPythonClient(controller)
    first = client.allocate(1, broker.epoch)
    second = client.allocate(1, broker.epoch)
    assert (first.error_code, first.producer_id_start, first.producer_id_len) == (0, 0, 1000)
    assert (second.error_code, second.producer_id_start, second.producer_id_len) == (0, 1000, 1000)
    client.close()
    broker.close()

    controller.restart()
    broker = WireBroker(controller, 1)
    assert broker.register().error_code == Error.NONE
    client = KafkaPythonClient(controller)
    third = client.allocate(1, broker.epoch)
    assert (third.error_code, third.producer_id_start) == (0, 2000)
    client.close()
    broker.close()


def test_unknown_broker_and_stale_epoch_are_stale_broker_epoch(controller) -> None:
    broker = WireBroker(controller, 2)
    assert broker.register().error_code == Error.NONE
    client = KafkaPythonClient(controller)
    assert client.allocate(7, 0).error_code == Error.STALE_BROKER_EPOCH
    assert client.allocate(2, broker.epoch + 1).error_code == Error.STALE_BROKER_EPOCH
    # Nothing was handed out by the refused requests.
    assert client.allocate(2, broker.epoch).producer_id_start == 0
    client.close()
    broker.close()


def test_exhausted_id_space_is_an_unknown_server_error() -> None:
    qc = new_controller()
    qc.replay(ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=MAX_PRODUCER_ID - BLOCK_SIZE + 1), 0)
    qc.cluster.brokers[1] = BrokerRegistration(broker_id=1, epoch=5, incarnation_id=bytes(16), endpoints=[],
                                               features={}, rack=None)
    result = qc.producer_ids.allocate(AllocateProducerIdsRequest(broker_id=1, broker_epoch=5))
    assert result.records == [] and result.response.error_code == Error.UNKNOWN_SERVER_ERROR


def test_replay_moves_the_block_forward_only_and_undoes() -> None:
    offsets = OffsetControl()
    control = ProducerIdControl(cluster=None, offsets=offsets)  # replay needs no cluster
    control.replay(ProducerIdsRecord(broker_id=1, broker_epoch=3, next_producer_id=1000))
    with pytest.raises(ValueError, match="not above"):
        control.replay(ProducerIdsRecord(broker_id=1, broker_epoch=3, next_producer_id=1000))
    offsets.activate()
    offsets.replaying(5)
    control.replay(ProducerIdsRecord(broker_id=2, broker_epoch=9, next_producer_id=2000))
    offsets.revert_to(5)
    assert (control.next_producer_id, control.broker_id, control.broker_epoch) == (1000, 1, 3)
    assert list(control.snapshot_records()) == [
        (ProducerIdsRecord(broker_id=1, broker_epoch=3, next_producer_id=1000), 0)]
