"""Fencing brokers whose sessions expired, cut into bounded slices (Kafka's non-atomic results).

Deterministic: a ManualClock and the controller's own commands, no sockets. The sliced work
must write what the one-command version writes, slice by slice, while the live brokers'
heartbeats are answered in between.
"""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.records import frame_metadata_record
from server.controller.quorum_controller import QuorumController
from tests.server.test_replication import SESSION_MS, Cluster, view

DEAD = (1, 2, 3)
LIVE = (4, 5)
BOUND = 7


def cluster(elr: bool) -> Cluster:
    """Five brokers, and partitions whose replicas mix dead and live ones in every order."""
    c = Cluster(min_isr=2 if elr else 1, elr=elr)
    c.brokers(*DEAD, *LIVE)
    brokers = [*DEAD, *LIVE]
    assignments = [[brokers[i % 5], brokers[(i + 1) % 5], brokers[(i + 3) % 5]] for i in range(40)]
    c.topic("mixed", assignments)
    c.topic("dead-only", [[1, 2, 3], [3, 2, 1]])
    c.topic("single", [[2]] * 5)
    return c


def copy(c: Cluster) -> QuorumController:
    """A controller fed the journal, active from now on: every lease starts now."""
    qc = c.replayed()
    qc.activate()
    return qc


def heartbeat(c: Cluster, qc: QuorumController, broker_id: int) -> None:
    applied = qc.broker_heartbeat(BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=c.epochs[broker_id],
        current_metadata_offset=qc.last_applied_offset), 1)
    assert applied.response.error_code == Error.NONE and not applied.response.is_fenced
    assert applied.records == []


def encoded(records: list) -> list[bytes]:
    return [frame_metadata_record(r, v) for r, v in records]


def let_dead_expire(c: Cluster, *controllers: QuorumController) -> None:
    c.clock.advance(SESSION_MS)
    for qc in controllers:
        for b in LIVE:
            heartbeat(c, qc, b)
    c.clock.advance(1)


@pytest.mark.parametrize("elr", [False, True], ids=["isr", "elr"])
def test_slices_write_what_one_command_writes(elr: bool) -> None:
    c = cluster(elr)
    atomic, sliced = copy(c), copy(c)
    let_dead_expire(c, atomic, sliced)
    whole = atomic.fence_expired_brokers()

    pieces = []
    while (applied := sliced.fence_stale_brokers(BOUND)) is not None:
        assert 0 < len(applied.records) <= BOUND
        assert applied.base_offset == (pieces[-1].last_offset + 1 if pieces else whole.base_offset)
        pieces.append(applied)
        for b in LIVE:  # answered between slices, and never fenced
            heartbeat(c, sliced, b)
    assert len(pieces) > len(DEAD)
    assert encoded([r for p in pieces for r in p.records]) == encoded(whole.records)
    assert view(sliced) == view(atomic)
    assert all(sliced.cluster.brokers[b].fenced for b in DEAD)
    assert not any(sliced.cluster.brokers[b].fenced for b in LIVE)
    assert sliced.timed_out_heartbeats == atomic.timed_out_heartbeats == len(DEAD)


def test_nothing_is_placed_on_or_elected_to_a_broker_being_fenced() -> None:
    c = cluster(elr=False)
    qc = copy(c)
    let_dead_expire(c, qc)
    first = qc.fence_stale_brokers(BOUND)
    assert first is not None and 1 in qc.cluster.being_fenced
    assert not qc.cluster.is_usable(1)
    while qc.fence_stale_brokers(BOUND) is not None:
        pass
    assert qc.cluster.being_fenced == set()


def test_a_broker_that_registers_again_meanwhile_is_not_fenced() -> None:
    """Its new incarnation is fenced until it catches up; the old one's remaining work is
    dropped rather than fencing the new registration."""
    c = cluster(elr=False)
    qc = copy(c)
    c.qc = qc
    let_dead_expire(c, qc)
    first = qc.fence_stale_brokers(BOUND)
    assert first is not None and not qc.cluster.brokers[1].fenced
    c.register(1, previous_epoch=c.epochs[1])
    c.unfence(1)
    rest = []
    while (applied := qc.fence_stale_brokers(BOUND)) is not None:
        rest += [r for r, _ in applied.records]
    assert not any(r.NAME == "FenceBrokerRecord" and r.id == 1 for r in rest)
    assert not qc.cluster.brokers[1].fenced
    assert all(qc.cluster.brokers[b].fenced for b in (2, 3))


def test_a_topic_deleted_meanwhile_is_passed_over() -> None:
    c = cluster(elr=False)
    qc = copy(c)
    c.qc = qc
    let_dead_expire(c, qc)
    assert qc.fence_stale_brokers(BOUND) is not None
    c.delete("mixed")
    while qc.fence_stale_brokers(BOUND) is not None:
        pass
    assert all(qc.cluster.brokers[b].fenced for b in DEAD)
    assert "mixed" not in qc.replication.names
