"""PartitionRecords read straight from their framed bytes into partition state.

Nearly all of a large snapshot is PartitionRecords of one shape: version 1 or 2, a few
replicas, no reassignment, no tagged fields. For those the bytes go to ``PartitionState``
with shared lists looked up by their encoding, without building a PartitionRecord and its
lists first. Anything else - another shape, a bad encoding - is left to the generic decoder,
which decodes it or names what is wrong with it.
"""

from __future__ import annotations

import struct

from protocol.constants import LeaderRecoveryState
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.primitives import INT32_ARRAYS
from protocol.records import METADATA_FRAME_VERSION
from server.controller.partitions import DIRECTORY_MIGRATING, PartitionState
from server.controller.shared_lists import SharedLists

_new = object.__new__
_ID = struct.Struct(">i16s")
_LEADER_EPOCHS = struct.Struct(">iii")
_PARTITION_RECORD = PartitionRecord.API_KEY
# Both versions put the directories right after the epochs; version 2 adds only tagged fields.
_VERSIONS_WITH_DIRECTORIES = (1, 2)
_RECOVERED = LeaderRecoveryState.RECOVERED
# A compact array's count byte: no items, and "none here" for the reassignment sets.
_EMPTY_ARRAY = 1
_MAX_ONE_BYTE_COUNT = 126


def partition_state(value: bytes, shared: SharedLists) -> PartitionState | None:
    """The state a framed PartitionRecord of the common shape describes, or None when
    ``value`` is anything else."""
    if value[0] != METADATA_FRAME_VERSION or value[1] != _PARTITION_RECORD \
            or value[2] not in _VERSIONS_WITH_DIRECTORIES:
        return None
    try:
        partition_id, topic_id = _ID.unpack_from(value, 3)
        n = value[23] - 1
        if not 0 < n <= _MAX_ONE_BYTE_COUNT:
            return None
        pos = 24 + 4 * n
        raw = value[23:pos]
        replicas = shared.encoded(raw)
        if replicas is None:
            replicas = shared.remember_encoded(raw, INT32_ARRAYS[n].unpack_from(value, 24))
        n = value[pos] - 1
        if not 0 <= n <= _MAX_ONE_BYTE_COUNT:
            return None
        stop = pos + 1 + 4 * n
        raw = value[pos:stop]
        isr = shared.encoded(raw)
        if isr is None:
            isr = shared.remember_encoded(raw, INT32_ARRAYS[n].unpack_from(value, pos + 1))
        if value[stop] != _EMPTY_ARRAY or value[stop + 1] != _EMPTY_ARRAY:
            return None
        leader, leader_epoch, partition_epoch = _LEADER_EPOCHS.unpack_from(value, stop + 2)
        pos = stop + 14
        n = value[pos] - 1
        if not 0 <= n <= _MAX_ONE_BYTE_COUNT:
            return None
        stop = pos + 1 + 16 * n
        # The record ends with an empty set of tagged fields.
        if stop + 1 != len(value) or value[stop] != 0:
            return None
        if n:
            raw = value[pos:stop]
            directories = shared.encoded(raw)
            if directories is None:
                directories = shared.remember_encoded(
                    raw, [value[p:p + 16] for p in range(pos + 1, stop, 16)])
        else:
            directories = shared.of([DIRECTORY_MIGRATING] * len(replicas))
    except (IndexError, struct.error):
        return None
    # Built slot by slot: the keyword-rich constructor costs as much as the decoding.
    p = _new(PartitionState)
    p.topic_id = topic_id
    p.partition_id = partition_id
    p.replicas = replicas
    p.isr = isr
    p.leader = leader
    p.leader_epoch = leader_epoch
    p.partition_epoch = partition_epoch
    p.recovery = _RECOVERED
    p.removing = p.adding = p.elr = p.last_known_elr = shared.empty
    p.directories = directories
    return p
