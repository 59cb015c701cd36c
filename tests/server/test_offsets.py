"""A command applies all or nothing, and metadata transactions (KIP-868) apply together.

The history below touches every kind of state replay changes (registrations, fencing,
topics, partitions and their indexes, reassignments, configs, features, removals). A fresh
controller replays part of it as committed state; the next part is then applied as one
command that fails on its last record, and the controller must be exactly as before; applied
again without the failing record, it must equal a plain replay of the same records.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.generated.metadata.abort_transaction_record import AbortTransactionRecord
from protocol.generated.metadata.begin_transaction_record import BeginTransactionRecord
from protocol.generated.metadata.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol.generated.metadata.config_record import ConfigRecord
from protocol.generated.metadata.end_transaction_record import EndTransactionRecord
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.generated.metadata.fence_broker_record import FenceBrokerRecord
from protocol.generated.metadata.no_op_record import NoOpRecord
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.generated.metadata.partition_record import PartitionRecord
from protocol.generated.metadata.register_broker_record import RegisterBrokerRecord
from protocol.generated.metadata.register_controller_record import RegisterControllerRecord
from protocol.generated.metadata.remove_topic_record import RemoveTopicRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.generated.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.generated.metadata.unregister_broker_record import UnregisterBrokerRecord
from protocol.message import Message
from protocol.records import frame_metadata_record
from server.controller.clock import ManualClock
from server.controller.quorum_controller import QuorumController
from server.controller.result import MAX_RECORDS_PER_BATCH, ControllerResult, VersionedRecord

T1, T2 = bytes(range(1, 17)), bytes(range(2, 18))
UNKNOWN_TOPIC = bytes(16)


def broker(broker_id: int, epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch, incarnation_id=bytes([broker_id]) * 16,
                                rack=None, fenced=True)


def partition(topic_id: bytes, pid: int, replicas: list[int], leader: int) -> PartitionRecord:
    return PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=replicas, isr=list(replicas),
                           leader=leader, leader_epoch=0, partition_epoch=0)


HISTORY: list[Message] = [
    FeatureLevelRecord(name="metadata.version", feature_level=25),
    broker(1, 10), broker(2, 11), broker(3, 12),
    UnfenceBrokerRecord(id=1, epoch=10), UnfenceBrokerRecord(id=2, epoch=11), UnfenceBrokerRecord(id=3, epoch=12),
    RegisterControllerRecord(controller_id=9, incarnation_id=bytes(16), zk_migration_ready=False),
    TopicRecord(name="orders", topic_id=T1),
    partition(T1, 0, [1, 2, 3], 1), partition(T1, 1, [2, 3, 1], 2),
    ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
    ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="2"),
    PartitionChangeRecord(topic_id=T1, partition_id=0, isr=[1, 2]),
    PartitionChangeRecord(topic_id=T1, partition_id=1, leader=3),
    TopicRecord(name="payments", topic_id=T2),
    partition(T2, 0, [3, 1], 3),
    PartitionChangeRecord(topic_id=T2, partition_id=0, replicas=[3, 1, 2], adding_replicas=[2]),
    FenceBrokerRecord(id=3, epoch=12),
    PartitionChangeRecord(topic_id=T2, partition_id=0, leader=-1, isr=[1]),
    BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=11, in_controlled_shutdown=1),
    partition(T1, 1, [1, 2], 1),  # a partition record for an existing partition replaces it
    ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value=None),
    FeatureLevelRecord(name="group.version", feature_level=1),
    RemoveTopicRecord(topic_id=T1),
    UnregisterBrokerRecord(broker_id=3, broker_epoch=12),
    broker(3, 40),
    NoOpRecord(),
]


def fingerprint(qc: QuorumController) -> tuple:
    """Everything replay maintains, including the indexes a snapshot does not show."""
    records = [frame_metadata_record(r, v) for r, v in qc.snapshot_records()]
    rep = qc.replication
    isr_of = {b: sorted((p.topic_id, p.partition_id) for p in ps) for b, ps in rep.isr_of.items() if ps}
    return (records, qc.next_offset, isr_of, rep.partition_count,
            sorted((p.topic_id, p.partition_id) for p in rep.leaderless),
            sorted((p.topic_id, p.partition_id) for p in rep.reassigning),
            {b: (r.fenced, r.in_controlled_shutdown, r.controlled_shutdown_offset)
             for b, r in qc.cluster.brokers.items()},
            sorted(qc.cluster.controllers), dict(qc.features.finalized))


def controller() -> QuorumController:
    return QuorumController("c", 1, ManualClock())


def replayed(records: list[Message]) -> QuorumController:
    qc = controller()
    for offset, record in enumerate(records):
        qc.replay(record, offset)
    return qc


def as_result(records: list[Message]) -> ControllerResult:
    versioned: list[VersionedRecord] = [(r, 0) for r in records]
    return ControllerResult(versioned)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_failing_command_changes_nothing_and_a_good_one_matches_replay(data):
    committed = data.draw(st.integers(0, len(HISTORY) - 1), label="committed")
    end = data.draw(st.integers(committed + 1, len(HISTORY)), label="end")
    qc = replayed(HISTORY[:committed])
    qc.activate()
    before = fingerprint(qc)

    poison = PartitionChangeRecord(topic_id=UNKNOWN_TOPIC, partition_id=0, leader=1)
    with pytest.raises(KeyError):
        qc.apply(as_result(HISTORY[committed:end] + [poison]))
    assert fingerprint(qc) == before
    assert qc.offsets.pending_undo == 0

    applied = qc.apply(as_result(HISTORY[committed:end]))
    assert applied.base_offset == committed
    assert fingerprint(qc) == fingerprint(replayed(HISTORY[:end]))


def test_uncommitted_records_can_be_dropped_and_committed_ones_cannot():
    qc = replayed(HISTORY[:10])
    qc.activate()
    at_ten = fingerprint(qc)
    qc.apply(as_result(HISTORY[10:16]))
    qc.committed(12)
    at_sixteen = fingerprint(qc)
    qc.apply(as_result(HISTORY[16:20]))
    qc.offsets.revert_to(16)
    assert fingerprint(qc) == at_sixteen
    assert fingerprint(qc) != at_ten
    qc.offsets.revert_to(13)  # 13.. are not committed yet
    assert fingerprint(qc) == fingerprint(replayed(HISTORY[:13]))
    qc.committed(15)
    assert qc.offsets.pending_undo == 0


def test_a_failure_in_a_later_step_undoes_the_earlier_steps():
    qc = replayed(HISTORY[:7])
    qc.activate()
    before = fingerprint(qc)

    def failing_step() -> ControllerResult:
        raise RuntimeError("the second step fails")
    with pytest.raises(RuntimeError):
        qc._steps([lambda: as_result(HISTORY[7:12]), failing_step])
    assert fingerprint(qc) == before


def test_an_aborted_transaction_leaves_the_state_it_found():
    records = HISTORY[:9] + [BeginTransactionRecord(name="t")] + HISTORY[9:14] + [AbortTransactionRecord(reason="r")]
    qc = replayed(records)
    expected = replayed(HISTORY[:9])
    assert fingerprint(qc)[2:] == fingerprint(expected)[2:]  # the same state, later offset
    assert qc.next_offset == len(records)
    assert qc.offsets.transaction_start == -1


def test_a_finished_transaction_applies_and_keeps_no_undo_while_loading():
    records = HISTORY[:9] + [BeginTransactionRecord(name="t")] + HISTORY[9:14] + [EndTransactionRecord()]
    qc = replayed(records)
    assert fingerprint(qc)[2:] == fingerprint(replayed(HISTORY[:14]))[2:]
    assert qc.offsets.pending_undo == 0


def test_an_open_transaction_is_undone_by_the_abort_written_on_activation():
    records = HISTORY[:9] + [BeginTransactionRecord(name="t")] + HISTORY[9:14]
    qc = replayed(records)
    assert qc.offsets.transaction_start == 9
    qc.apply(as_result([AbortTransactionRecord(reason="Controller failover")]))
    assert fingerprint(qc)[2:] == fingerprint(replayed(HISTORY[:9]))[2:]


@pytest.mark.parametrize("record", [EndTransactionRecord(), AbortTransactionRecord(reason="x")])
def test_transaction_markers_outside_a_transaction_are_refused(record):
    qc = replayed(HISTORY[:3])
    with pytest.raises(ValueError, match="outside a transaction"):
        qc.replay(record, 3)


def test_a_command_larger_than_a_batch_is_wrapped_in_a_transaction():
    qc = replayed(HISTORY[:1])
    qc.activate()
    many = [NoOpRecord() for _ in range(MAX_RECORDS_PER_BATCH + 1)]
    applied = qc.apply(as_result(many))
    names = [r.NAME for r, _ in applied.records]
    assert names[0] == "BeginTransactionRecord" and names[-1] == "EndTransactionRecord"
    assert len(names) == MAX_RECORDS_PER_BATCH + 3
    assert qc.next_offset == 1 + MAX_RECORDS_PER_BATCH + 3
    assert qc.offsets.transaction_start == -1
