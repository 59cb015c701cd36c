"""A shape's change copied to another partition: written, compared and shown as the plain
PartitionChangeRecord with the same fields, whichever version it is written at, and replayed
as it."""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.records import frame_metadata_record, parse_metadata_record
from server.controller.partitions import PartitionState
from server.controller.quorum_controller import QuorumController
from server.controller.result import ControllerResult
from server.controller.shapes import Shape
from tests.support.replication import Cluster, view

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
        assert copy.framed(version) == frame_metadata_record(plain, version)
    decoded, _ = parse_metadata_record(frame_metadata_record(copy, decided_at))
    assert decoded == plain


def test_a_copy_replays_as_its_plain_record_on_a_partition_in_another_state() -> None:
    """The first copy replayed teaches its shape what the change does; a copy whose partition
    is in another state (here its ISR shrank meanwhile) replays as its plain record does."""
    c = Cluster()
    c.brokers(1, 2, 3)
    topic_id = c.topic("t", [[1, 2, 3]] * 3)
    _, result = c.alter(1, "t", 2, [1, 3])
    assert result.error_code == Error.NONE
    parts = c.qc.replication.topics[topic_id].partitions
    decided = PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=[2], leader=2)
    shape = Shape(decided, 0, (parts[0].isr,))
    copies = [(shape.copy_to(p), 0) for p in parts]
    plain = copy_of(c)
    plain.apply(ControllerResult([(copy.plain(), 0) for copy, _ in copies]))
    before = view(c.qc)
    start = c.qc.next_offset
    c.qc.apply(ControllerResult(copies))
    assert view(c.qc) == view(plain)
    assert [p.isr for p in parts] == [[2]] * 3
    c.qc.offsets.revert_to(start)
    assert view(c.qc) == before


def copy_of(c: Cluster) -> QuorumController:
    qc = c.replayed()
    qc.activate()
    return qc
