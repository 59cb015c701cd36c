"""A shape's change copied to another partition: written, compared and shown as the plain
PartitionChangeRecord with the same fields, whichever version it is written at."""

from __future__ import annotations

import pytest

from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.records import frame_metadata_record, parse_metadata_record
from server.controller.partitions import PartitionState
from server.controller.shapes import Shape

TOPIC_A, TOPIC_B = bytes(range(16)), bytes(range(16, 32))


def decided(**fields: object) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=3, topic_id=TOPIC_A, **fields)  # type: ignore[arg-type]


# Each change, and the record versions that can hold it (eligible leader replicas need 2).
CHANGES = {
    "isr": (decided(isr=[2]), (0, 1, 2)),
    "leaderless": (decided(isr=[2], leader=-1), (0, 1, 2)),
    "elr": (decided(isr=[], leader=-1, eligible_leader_replicas=[1, 2], last_known_elr=[1]), (2,)),
    "unclean": (decided(isr=[5], leader=5, leader_recovery_state=1), (0, 1, 2)),
    "many": (decided(isr=list(range(200)), leader=7), (0, 1, 2)),
}
CASES = [pytest.param(change, versions, at, id=f"{name}-v{at}")
         for name, (change, versions) in CHANGES.items() for at in versions]


@pytest.mark.parametrize("change, versions, decided_at", CASES)
def test_a_copy_is_the_plain_record_for_its_partition(change: PartitionChangeRecord, versions: tuple[int, ...],
                                                      decided_at: int) -> None:
    shape = Shape(change, decided_at, ())
    copy = shape.copy_to(PartitionState(TOPIC_B, 70_000, [1, 2, 5], [1, 2, 5], leader=1))
    plain = PartitionChangeRecord(**{name: getattr(change, name) for name in PartitionChangeRecord.__slots__})
    plain.partition_id, plain.topic_id = 70_000, TOPIC_B
    assert copy == plain and plain == copy and copy != change
    assert repr(copy) == repr(plain)
    for version in versions:  # its own version from the shape's bytes, the others field by field
        assert frame_metadata_record(copy, version) == frame_metadata_record(plain, version)
    decoded, _ = parse_metadata_record(frame_metadata_record(copy, decided_at))
    assert decoded == plain
