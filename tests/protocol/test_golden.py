"""Byte vectors worked out by hand from the Kafka protocol rules, one comment per field.

Classic encodings: int16 string lengths, int32 array/bytes lengths. Flexible versions: compact
lengths (unsigned varint of length + 1, 0 for null) and a tagged-field section after every
struct: a count, then (tag, size, payload) in ascending tag order, all unsigned varints.
"""

from __future__ import annotations

import pytest

from protocol.errors import EncodeError
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.describe_topic_partitions_request import (
    Cursor, DescribeTopicPartitionsRequest, TopicRequest)
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord


def hexbytes(text: str) -> bytes:
    """Hex digits with whitespace and ``#`` comments (to the end of the line) ignored."""
    return bytes.fromhex("".join(line.split("#", 1)[0] for line in text.splitlines()))


def assert_golden(obj, version: int, expected: bytes) -> None:
    assert obj.encode(version).hex(" ") == expected.hex(" ")
    decoded, end = type(obj).decode(expected, version)
    assert end == len(expected)
    assert decoded == obj
    assert decoded.encode(version) == expected


UUID_A = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
UUID_B = bytes.fromhex("f0e1d2c3b4a5968778695a4b3c2d1e0f")


# --- ApiVersionsRequest ---------------------------------------------------------------------

API_VERSIONS_V3 = hexbytes("""
    0a                              # ClientSoftwareName: compact string, length 9 + 1
    6b 72 61 66 74 77 69 72 65      #   "kraftwire"
    04                              # ClientSoftwareVersion: compact string, length 3 + 1
    30 2e 31                        #   "0.1"
    00                              # tagged fields: none
""")


def test_api_versions_request_v3():
    req = ApiVersionsRequest(client_software_name="kraftwire", client_software_version="0.1")
    assert_golden(req, 3, API_VERSIONS_V3)
    # v4 only changed what the broker may answer, not the request layout.
    assert_golden(req, 4, API_VERSIONS_V3)


def test_api_versions_request_before_v3_drops_ignorable_fields():
    # Both fields are ignorable and absent before v3: silently left out, the body is empty.
    req = ApiVersionsRequest(client_software_name="kraftwire", client_software_version="0.1")
    for version in (0, 1, 2):
        assert req.encode(version) == b""
        decoded, end = ApiVersionsRequest.decode(b"", version)
        assert end == 0
        assert decoded == ApiVersionsRequest()


# --- BrokerHeartbeatRequest -----------------------------------------------------------------

HEARTBEAT_FIXED = hexbytes("""
    00 00 00 01                     # BrokerId int32 = 1
    00 00 00 00 00 00 00 05         # BrokerEpoch int64 = 5
    00 00 00 00 00 00 00 64         # CurrentMetadataOffset int64 = 100
    01                              # WantFence bool = true
    00                              # WantShutDown bool = false
""")

HEARTBEAT_V1_NO_DIRS = HEARTBEAT_FIXED + hexbytes("""
    00                              # tagged fields: none (OfflineLogDirs is empty = default)
""")

HEARTBEAT_V1_DIRS = HEARTBEAT_FIXED + hexbytes("""
    01                              # tagged fields: 1
    00                              #   tag 0 = OfflineLogDirs
    21                              #   size 33 = 1 length byte + 2 * 16
    03                              #   compact array: 2 elements + 1
    00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f   # UUID_A
    f0 e1 d2 c3 b4 a5 96 87 78 69 5a 4b 3c 2d 1e 0f   # UUID_B
""")


def _heartbeat(**kw) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=100,
                                  want_fence=True, want_shut_down=False, **kw)


def test_broker_heartbeat_request_v1_without_offline_dirs():
    assert_golden(_heartbeat(), 1, HEARTBEAT_V1_NO_DIRS)
    # v0 has the same layout; OfflineLogDirs does not exist there.
    assert_golden(_heartbeat(), 0, HEARTBEAT_V1_NO_DIRS)


def test_broker_heartbeat_request_v1_with_offline_dirs():
    assert_golden(_heartbeat(offline_log_dirs=[UUID_A, UUID_B]), 1, HEARTBEAT_V1_DIRS)


def test_broker_heartbeat_request_v0_refuses_offline_dirs():
    # OfflineLogDirs is not ignorable: v0 cannot carry it, so encoding must fail loudly.
    with pytest.raises(EncodeError):
        _heartbeat(offline_log_dirs=[UUID_A]).encode(0)


# --- PartitionChangeRecord ------------------------------------------------------------------

TOPIC_ID = bytes(range(0x10, 0x20))

PARTITION_CHANGE_V2 = hexbytes("""
    00 00 00 03                     # PartitionId int32 = 3
    10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f   # TopicId uuid
    05                              # tagged fields: 5, in ascending tag order
    00 09                           #   tag 0 = Isr, size 9
    03 00 00 00 01 00 00 00 02      #     compact array of 2: [1, 2]
    01 04                           #   tag 1 = Leader, size 4
    00 00 00 01                     #     int32 1
    06 05                           #   tag 6 = EligibleLeaderReplicas, size 5
    02 00 00 00 03                  #     compact array of 1: [3]
    07 01                           #   tag 7 = LastKnownElr, size 1
    01                              #     compact array of 0: [] (not null, so it is written)
    08 21                           #   tag 8 = Directories, size 33 (declared before 6 and 7
    03                              #     in the schema, but the wire order is by tag)
    00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f   #     UUID_A
    f0 e1 d2 c3 b4 a5 96 87 78 69 5a 4b 3c 2d 1e 0f   #     UUID_B
""")

PARTITION_CHANGE_V0 = hexbytes("""
    00 00 00 03                     # PartitionId int32 = 3
    10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f   # TopicId uuid
    02                              # tagged fields: 2
    02 01                           #   tag 2 = Replicas, size 1
    00                              #     compact null array
    05 01                           #   tag 5 = LeaderRecoveryState, size 1
    01                              #     int8 1
""")


def test_partition_change_record_v2_tagged_fields():
    record = PartitionChangeRecord(
        partition_id=3, topic_id=TOPIC_ID, isr=[1, 2], leader=1,
        eligible_leader_replicas=[3], last_known_elr=[], directories=[UUID_A, UUID_B])
    assert_golden(record, 2, PARTITION_CHANGE_V2)


def test_partition_change_record_v0_null_is_default():
    # Replicas defaults to null: a null value is not written. Replicas = [] would be.
    record = PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, leader_recovery_state=1)
    assert record.encode(0) == PARTITION_CHANGE_V0[:20] + hexbytes("""
        01                          # tagged fields: 1
        05 01 01                    #   tag 5 = LeaderRecoveryState, size 1, int8 1
    """)
    # Written explicitly as null, Replicas decodes to null, which is its default: the record
    # is the same, and it re-encodes without the redundant tag.
    decoded, end = PartitionChangeRecord.decode(PARTITION_CHANGE_V0, 0)
    assert end == len(PARTITION_CHANGE_V0)
    assert decoded == record
    assert decoded.replicas is None


def test_partition_change_record_v0_refuses_directories():
    with pytest.raises(EncodeError):
        PartitionChangeRecord(directories=[UUID_A]).encode(0)


# --- unknown tagged fields ------------------------------------------------------------------

HEARTBEAT_V1_UNKNOWN = HEARTBEAT_FIXED + hexbytes("""
    03                              # tagged fields: 3
    00 11                           #   tag 0 = OfflineLogDirs, size 17
    02                              #     compact array of 1
    00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f   #     UUID_A
    05 03                           #   tag 5 (unknown), size 3
    61 62 63                        #     "abc"
    ac 02                           #   tag 300 (unknown; uvarint 0x2c | 0x80, 0x02)
    80 01                           #     size 128 (uvarint 0x00 | 0x80, 0x01)
""") + bytes(range(128))            # 128 payload bytes 00..7f


def test_unknown_tags_are_kept_and_rewritten():
    decoded, end = BrokerHeartbeatRequest.decode(HEARTBEAT_V1_UNKNOWN, 1)
    assert end == len(HEARTBEAT_V1_UNKNOWN)
    assert decoded.offline_log_dirs == [UUID_A]
    assert decoded.unknown_tagged_fields == {5: b"abc", 300: bytes(range(128))}
    assert decoded.encode(1) == HEARTBEAT_V1_UNKNOWN
    # Built by hand, the same message encodes to the same bytes.
    built = _heartbeat(offline_log_dirs=[UUID_A],
                       unknown_tagged_fields={300: bytes(range(128)), 5: b"abc"})
    assert built.encode(1) == HEARTBEAT_V1_UNKNOWN


DESCRIBE_TOPIC_PARTITIONS_UNKNOWN = hexbytes("""
    02                              # Topics: compact array of 1
    02 74                           #   Name: compact string "t"
    01 03 02 ab cd                  #   element tagged fields: 1, tag 3 (unknown), size 2, abcd
    00 00 07 d0                     # ResponsePartitionLimit int32 = 2000
    01                              # Cursor: present (int8 1; -1 would be null)
    02 74                           #   TopicName: compact string "t"
    00 00 00 04                     #   PartitionIndex int32 = 4
    01 09 01 ee                     #   Cursor tagged fields: 1, tag 9 (unknown), size 1, ee
    01 00 00                        # root tagged fields: 1, tag 0 (unknown), size 0
""")


def test_unknown_tags_in_nested_structs():
    expected = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name="t", unknown_tagged_fields={3: b"\xab\xcd"})],
        response_partition_limit=2000,
        cursor=Cursor(topic_name="t", partition_index=4, unknown_tagged_fields={9: b"\xee"}),
        unknown_tagged_fields={0: b""})
    assert_golden(expected, 0, DESCRIBE_TOPIC_PARTITIONS_UNKNOWN)


def test_unknown_tags_are_dropped_in_non_flexible_versions():
    # ApiVersionsRequest v0-2 have no tagged-field section at all.
    req = ApiVersionsRequest(unknown_tagged_fields={7: b"x"})
    assert req.encode(2) == b""
    assert req.encode(3) == hexbytes("""
        01                          # ClientSoftwareName: compact string "" (0 + 1)
        01                          # ClientSoftwareVersion: compact string ""
        01 07 01 78                 # tagged fields: 1, tag 7, size 1, "x"
    """)
