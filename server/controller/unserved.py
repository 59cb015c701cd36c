"""Answers to data-plane requests from nodes that keep no partition logs and coordinate no groups.

A KRaft controller is such a node, and so is a simulated broker. Each answer carries an
authorization error, which every client treats as final, so that producers and consumers stop
at once with the reason (where the answer has room for a message) instead of retrying until
their own timeouts; a retriable error such as COORDINATOR_NOT_AVAILABLE keeps librdkafka's
consumers asking forever.
"""

from __future__ import annotations

from protocol.error_codes import Error
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from protocol.generated.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.generated.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from protocol.generated.messages.init_producer_id_response import InitProducerIdResponse
from protocol.generated.messages.list_offsets_request import ListOffsetsRequest
from protocol.generated.messages.list_offsets_response import (
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse)
from protocol.generated.messages.produce_request import ProduceRequest
from protocol.generated.messages.produce_response import (
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse)

# FindCoordinator key types: a consumer group, a transactional id.
TRANSACTION_KEY = 1
# FindCoordinator answers one key in the top-level fields before v4, a list of keys from v4.
BATCHED_FIND_COORDINATOR = 4


def refuse_produce(request: ProduceRequest, why: str) -> ProduceResponse:
    return ProduceResponse(responses=[
        TopicProduceResponse(name=t.name, partition_responses=[
            PartitionProduceResponse(index=p.index, error_code=Error.TOPIC_AUTHORIZATION_FAILED, base_offset=-1,
                                     error_message=why)
            for p in t.partition_data])
        for t in request.topic_data])


def refuse_fetch(request: FetchRequest) -> FetchResponse:
    return FetchResponse(responses=[
        FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
            PartitionData(partition_index=p.partition, error_code=Error.TOPIC_AUTHORIZATION_FAILED, high_watermark=-1)
            for p in t.partitions])
        for t in request.topics])


def refuse_list_offsets(request: ListOffsetsRequest) -> ListOffsetsResponse:
    return ListOffsetsResponse(topics=[
        ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=Error.TOPIC_AUTHORIZATION_FAILED,
                                         offset=-1, timestamp=-1)
            for p in t.partitions])
        for t in request.topics])


def refuse_find_coordinator(request: FindCoordinatorRequest, version: int, why: str) -> FindCoordinatorResponse:
    code = (Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if request.key_type == TRANSACTION_KEY
            else Error.GROUP_AUTHORIZATION_FAILED)
    if version < BATCHED_FIND_COORDINATOR:
        return FindCoordinatorResponse(error_code=code, error_message=why, node_id=-1, host="", port=-1)
    return FindCoordinatorResponse(coordinators=[
        Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=why)
        for k in request.coordinator_keys])


def refuse_init_producer_id() -> InitProducerIdResponse:
    # No room for a message in any version of the answer.
    return InitProducerIdResponse(error_code=Error.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
