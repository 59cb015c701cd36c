"""The generated classes carry their types and name their API keys through enums."""

from __future__ import annotations

import typing

from protocol.api_keys import APIS
from protocol.generated.messages import BY_API_KEY, ApiKey
from protocol.generated.messages.describe_quorum_response import (
    DescribeQuorumResponse, PartitionData, ReplicaState)
from protocol.generated.metadata import BY_API_KEY as RECORDS_BY_KEY
from protocol.generated.metadata import MetadataRecordType
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord


def test_api_keys_are_named() -> None:
    assert ApiKey.DESCRIBE_QUORUM == 55
    assert ApiKey.API_VERSIONS == 18
    assert DescribeQuorumResponse.API_KEY is ApiKey.DESCRIBE_QUORUM
    assert {key for (_, key) in BY_API_KEY} == set(ApiKey)
    assert all(isinstance(api.key, ApiKey) for api in APIS.values())


def test_metadata_record_types_are_named() -> None:
    assert MetadataRecordType.PARTITION_CHANGE_RECORD == 5
    assert MetadataRecordType.REGISTER_BROKER_RECORD == 0
    assert {key for (kind, key) in RECORDS_BY_KEY if kind == "metadata"} == set(MetadataRecordType)


def test_attributes_and_parameters_are_typed() -> None:
    hints = typing.get_type_hints(PartitionData)
    assert hints["partition_index"] is int
    assert hints["error_message"] == str | None
    assert hints["current_voters"] == list[ReplicaState]
    record = typing.get_type_hints(PartitionChangeRecord.__init__)
    assert record["isr"] == list[int] | None
    assert record["topic_id"] is bytes
    assert record["leader"] is int
