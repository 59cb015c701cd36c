"""Fencing brokers whose sessions expired, cut into bounded slices (Kafka's non-atomic results).

Deterministic: a ManualClock and the controller's own commands, no sockets. The sliced work
must write what the one-command version writes, slice by slice, while the live brokers'
heartbeats are answered in between.
"""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.metadata.partition_change_record import PartitionChangeRecord
from protocol.records import frame_metadata_record, parse_metadata_record
from server.controller.partitions import RECOVERING
from server.controller.quorum_controller import QuorumController
from server.controller.shapes import CopiedChange
from tests.support.replication import SESSION_MS, Cluster, view, without_epochs

DEAD = (1, 2, 3)
LIVE = (4, 5)
BOUND = 7


def cluster(elr: bool, unclean: bool = False) -> Cluster:
    """Five brokers, and partitions whose replicas mix dead and live ones in every order."""
    c = Cluster(min_isr=2 if elr else 1, elr=elr, unclean=unclean)
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
    assert eligible_index(sliced) == eligible_by_scan(sliced)
    assert bool(eligible_index(sliced)) is elr


def eligible_index(qc: QuorumController) -> dict[int, set]:
    return {b: set(ps) for b, ps in qc.replication.elr_of.items() if ps}


def eligible_by_scan(qc: QuorumController) -> dict[int, set]:
    found: dict[int, set] = {}
    for topic in qc.replication.topics.values():
        for p in topic.partitions:
            for b in p.elr:
                found.setdefault(b, set()).add(p)
    return found


def test_nothing_is_placed_on_or_elected_to_a_broker_leaving() -> None:
    c = cluster(elr=False)
    qc = copy(c)
    let_dead_expire(c, qc)
    first = qc.fence_stale_brokers(BOUND)
    assert first is not None and 1 in qc.cluster.leaving
    assert not qc.cluster.is_usable(1)
    while qc.fence_stale_brokers(BOUND) is not None:
        pass
    assert qc.cluster.leaving == set()


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



def test_partitions_alike_follow_a_broker_leaving_service_during_the_pass() -> None:
    """Partitions in the same state get the same change, decided once; a broker that leaves
    service between slices is elected nowhere after it, although the partitions left are
    exactly as those it was elected to before (its own moves wait for later slices)."""
    c = Cluster()
    c.brokers(*DEAD, *LIVE)
    c.topic("alike", [[1, 4]] * 30)
    qc = copy(c)
    c.qc = qc
    qc.replication.slice_records = BOUND
    let_dead_expire(c, qc)
    assert qc.fence_stale_brokers(BOUND) is not None
    alike = qc.replication.topics[qc.replication.names["alike"]].partitions
    assert [(p.leader, p.isr) for p in alike[:BOUND]] == [(4, [4])] * BOUND
    assert [(p.leader, p.isr) for p in alike[BOUND:]] == [(1, [1, 4])] * (30 - BOUND)
    c.shut_down(4)
    assert not qc.cluster.is_usable(4)
    while qc.fence_stale_brokers(BOUND) is not None:
        pass
    assert [(p.leader, p.isr) for p in alike[BOUND:]] == [(-1, [4])] * (30 - BOUND)
    assert all(qc.cluster.brokers[b].fenced for b in DEAD)

# --- commands whose leadership moves and elections are many ---------------------------------------

def drain(c: Cluster, qc: QuorumController, live: tuple[int, ...] = LIVE) -> list:
    """Write what commands left for later, slice by slice, with heartbeats in between."""
    written = []
    while (applied := qc.next_slice(BOUND)) is not None:
        assert 0 < len(applied.records) <= BOUND
        written += [r for r, _ in applied.records]
        for b in live:
            heartbeat(c, qc, b)
    return written


def command_both_ways(c: Cluster, command):
    """``command`` on two copies of the cluster: with every change written at once, and with
    the moves cut into slices written afterwards. Returns both controllers and the sliced
    command's own records."""
    atomic, sliced = copy(c), copy(c)
    c.qc = atomic
    command(c)
    sliced.replication.slice_records = BOUND
    c.qc = sliced
    first = command(c)
    return atomic, sliced, first


def test_controlled_shutdown_of_a_broker_with_many_leaderships() -> None:
    c = cluster(elr=False)
    atomic, sliced, first = command_both_ways(c, lambda c: c.shut_down(1))
    assert [r.NAME for r, _ in first.records] == ["BrokerRegistrationChangeRecord"]
    assert not first.response.should_shut_down and not sliced.cluster.is_usable(1)
    assert sliced.replication.leads_any(1)
    assert not c.heartbeat(1).response.should_shut_down  # still leads: not yet
    drain(c, sliced, live=(2, 3, *LIVE))
    assert not sliced.replication.leads_any(1) and sliced.cluster.leaving == set()
    assert view(sliced) == view(atomic)
    assert c.heartbeat(1).response.should_shut_down


def test_moves_cut_short_by_a_failover_are_taken_up_again() -> None:
    c = cluster(elr=False)
    _, sliced, _ = command_both_ways(c, lambda c: c.shut_down(1))
    assert sliced.next_slice(BOUND) is not None
    sliced.activate()  # what a controller keeps for later does not survive leadership changes
    assert sliced.next_slice(BOUND) is None
    again = c.heartbeat(1)
    assert not again.response.should_shut_down and 1 in sliced.cluster.leaving
    drain(c, sliced, live=(2, 3, *LIVE))
    assert c.heartbeat(1).response.should_shut_down


def test_a_broker_asking_to_be_fenced_is_fenced_first() -> None:
    c = cluster(elr=True)
    atomic, sliced, first = command_both_ways(c, lambda c: c.heartbeat(2, want_fence=True))
    assert [r.NAME for r, _ in first.records] == ["FenceBrokerRecord"] and first.response.is_fenced
    drain(c, sliced)
    assert view(sliced) == view(atomic)


def test_unfencing_elects_many_leaderless_partitions_in_slices() -> None:
    c = Cluster(unclean=True)
    c.brokers(*DEAD, *LIVE)
    c.topic("dead-only", [[1, 2, 3], [3, 2, 1], [2, 3, 1]] * 6)
    c.expire(1, 2, 3)
    assert all(p.leader == -1 for p in c.qc.replication.topics[c.qc.replication.names["dead-only"]].partitions)
    atomic, sliced, first = command_both_ways(c, lambda c: c.unfence(3))
    assert [r.NAME for r, _ in first.records] == ["UnfenceBrokerRecord"]
    drain(c, sliced, live=(3, *LIVE))
    assert view(sliced) == view(atomic)



def test_finding_the_partitions_an_unfenced_broker_may_lead_is_cut_into_slices() -> None:
    """After a fleet was fenced, most leaderless partitions are not the returning broker's:
    a slice counts those it looks at too, so that finding its own among a million is never
    one turn of the loop."""
    c = Cluster()
    c.brokers(*DEAD, *LIVE)
    c.topic("others", [[1, 2]] * 40)
    c.topic("mine", [[3, 1]] * 5)
    c.expire(1, 2, 3)
    atomic, sliced, first = command_both_ways(c, lambda c: c.unfence(3))
    slices = []
    while (applied := sliced.next_slice(BOUND)) is not None:
        assert len(applied.records) <= BOUND
        slices.append(applied)
    assert any(not s.records for s in slices) and len(slices) >= 45 // BOUND
    assert view(sliced) == view(atomic)
    mine = sliced.replication.topics[sliced.replication.names["mine"]].partitions
    assert [p.leader for p in mine] == [3] * 5

def test_unregistering_a_broker_with_many_partitions() -> None:
    c = cluster(elr=False)
    atomic, sliced, first = command_both_ways(c, lambda c: c.unregister(2))
    assert first.response.error_code == Error.NONE and 2 not in sliced.cluster.brokers
    assert [r.NAME for r, _ in first.records][-1] == "UnregisterBrokerRecord"
    drain(c, sliced, live=(1, 3, *LIVE))
    assert view(sliced) == view(atomic)


def test_elections_stop_when_the_unfenced_broker_is_fenced_again() -> None:
    c = Cluster(unclean=True)
    c.brokers(*DEAD, *LIVE)
    c.topic("dead-only", [[1, 2, 3], [3, 2, 1], [2, 3, 1]] * 6)
    c.expire(1, 2, 3)
    c.qc.replication.slice_records = BOUND
    c.unfence(3)
    assert c.qc.next_slice(BOUND) is not None
    c.heartbeat(3, want_fence=True)
    drain(c, c.qc)
    leaders = {p.leader for p in c.qc.replication.topics[c.qc.replication.names["dead-only"]].partitions}
    assert leaders == {-1}


# --- a fleet that died together ------------------------------------------------------------------

def dead_leaders(records: list, topic_id: bytes) -> list[int]:
    return [r.leader for r in records
            if r.NAME == "PartitionChangeRecord" and r.topic_id == topic_id and r.leader in DEAD]


@pytest.mark.parametrize("elr, unclean", [(False, False), (True, False), (False, True)],
                         ids=["isr", "elr", "unclean"])
def test_brokers_awaiting_their_fence_are_not_elected_on_the_way(elr: bool, unclean: bool) -> None:
    """Fenced one at a time as Kafka does, the dead brokers hand a partition from one to the
    next before a live replica gets it. Fenced together, a broker of the same pass is passed
    over; the end state is the one-by-one fencing's, in bounded slices, and the live brokers
    stay unfenced."""
    c = cluster(elr, unclean)
    together = copy(c)
    mixed = c.qc.replication.names["mixed"]
    one_by_one = c.journal[:]
    c.expire(*DEAD)  # each fenced while the next one still heartbeats: Kafka's order
    one_by_one = [r for _, r, _ in c.journal[len(one_by_one):]]
    assert dead_leaders(one_by_one, mixed), "the reference hands leaderships between dead brokers"

    let_dead_expire(c, together)
    written = []
    while (applied := together.fence_stale_brokers(BOUND)) is not None:
        assert 0 < len(applied.records) <= BOUND
        written += [r for r, _ in applied.records]
        for b in LIVE:
            heartbeat(c, together, b)
    assert dead_leaders(written, mixed) == []
    # One change per partition, however many of its replicas died: a partition whose
    # replicas all died waits leaderless at once instead of passing through each of them.
    changed = [(r.topic_id, r.partition_id) for r in written if r.NAME == "PartitionChangeRecord"]
    assert len(changed) == len(set(changed))
    assert len(written) < len(one_by_one)
    assert without_epochs(together) == without_epochs(c.qc)
    assert all(together.cluster.brokers[b].fenced for b in DEAD)
    assert not any(together.cluster.brokers[b].fenced for b in LIVE)


def test_partitions_being_reassigned_end_as_one_by_one_fencing_leaves_them() -> None:
    c = cluster(elr=False, unclean=True)
    c.topic("moving", [[1, 2, 4], [2, 3, 5], [3, 1, 2], [1, 2, 3]])
    for index, target in enumerate([[4, 5, 1], [5, 4, 3], [4, 1, 5], [2, 4, 5]]):
        c.reassign("moving", index, target)
    together = copy(c)
    c.expire(*DEAD)
    let_dead_expire(c, together)
    while (applied := together.fence_stale_brokers(BOUND)) is not None:
        assert 0 < len(applied.records) <= BOUND
        for b in LIVE:
            heartbeat(c, together, b)
    assert together.replication.reassigning
    assert without_epochs(together) == without_epochs(c.qc)
    assert not any(together.cluster.brokers[b].fenced for b in LIVE)


def test_a_slice_looks_at_a_bounded_number_of_partitions() -> None:
    """When the partitions are walked rather than sorted, those the dead brokers are not in
    count too: a slice that finds nothing to change writes nothing, and the pass goes on."""
    c = Cluster()
    c.brokers(*DEAD, *LIVE)
    c.topic("live-only", [[4, 5]] * 30)
    c.topic("dead-pairs", [[1, 2]] * 5)
    qc = copy(c)
    c.qc = qc
    let_dead_expire(c, qc)
    slices = []
    while (applied := qc.fence_stale_brokers(BOUND)) is not None:
        assert len(applied.records) <= BOUND
        slices.append(applied)
        for b in LIVE:
            heartbeat(c, qc, b)
    assert any(not s.records for s in slices) and len(slices) >= 35 // BOUND
    pairs = qc.replication.topics[qc.replication.names["dead-pairs"]].partitions
    assert [(p.leader, p.isr) for p in pairs] == [(-1, [2])] * 5
    assert all(qc.cluster.brokers[b].fenced for b in DEAD)
    assert not any(qc.cluster.brokers[b].fenced for b in LIVE)


def test_a_broker_back_during_its_pass_is_fenced_then_leads_what_waited_for_it() -> None:
    """Its lease ran out with the others', so it is fenced in their pass even though it
    heartbeats meanwhile, and elected nowhere until then; its next heartbeat unfences it, and
    the partitions left leaderless for it get it as leader."""
    c = Cluster()
    c.brokers(*DEAD, *LIVE)
    c.topic("pair", [[1, 2]] * 10)
    qc = copy(c)
    c.qc = qc
    let_dead_expire(c, qc)
    first = qc.fence_stale_brokers(BOUND)
    assert first is not None
    pair = qc.replication.topics[qc.replication.names["pair"]].partitions
    assert [(p.leader, p.isr) for p in pair[:BOUND]] == [(-1, [2])] * BOUND  # 2 is fenced in this pass
    back = c.heartbeat(2)
    assert back.records == [] and not back.response.is_fenced
    while qc.fence_stale_brokers(BOUND) is not None:
        pass
    assert [(p.leader, p.isr) for p in pair] == [(-1, [2])] * 10
    assert all(qc.cluster.brokers[b].fenced for b in DEAD)
    assert not any(qc.cluster.brokers[b].fenced for b in LIVE)
    again = c.heartbeat(2)
    assert not again.response.is_fenced
    assert [(p.leader, p.isr) for p in pair] == [(2, [2])] * 10


def test_a_broker_back_while_its_own_fencing_runs_is_elected_nowhere() -> None:
    c = Cluster()
    c.brokers(*DEAD, *LIVE)
    c.topic("pair", [[2, 1]] * 3 + [[1, 2]] * 20)
    qc = copy(c)
    c.qc = qc
    let_dead_expire(c, qc)
    assert qc.fence_stale_brokers(BOUND) is not None and 1 in qc.cluster.leaving
    back = c.heartbeat(1)
    assert back.records == []
    while qc.fence_stale_brokers(BOUND) is not None:
        pass
    assert qc.cluster.brokers[1].fenced


# --- fenced together against Kafka's order, case by case -----------------------------------------

SETTINGS = {
    "isr": {},
    "min-isr-2-elr": {"min_isr": 2, "elr": True},
    "min-isr-3-elr": {"min_isr": 3, "elr": True},
    "unclean": {"unclean": True},
    "elr-unclean": {"min_isr": 2, "elr": True, "unclean": True},
}


def fleet(settings: dict) -> Cluster:
    """Three brokers about to die and two that live, in partitions of every kind: replicas
    mixing both in every order (four of them, so that a min ISR of 3 can hold), replicas all
    dead (one or three), live leaders followed by dead replicas, live replicas that fell out
    of the ISR before the dead ones died (only an unclean election can elect them), and dead
    ones that did (Kafka's order elects them uncleanly while they still count as live)."""
    c = Cluster(**settings)
    c.brokers(*DEAD, *LIVE)
    brokers = [*DEAD, *LIVE]
    c.topic("mixed", [[brokers[(i + k) % 5] for k in (0, 1, 2, 4)] for i in range(20)])
    c.topic("all-dead", [[1, 2, 3], [3, 1, 2], [2, 3, 1]])
    c.topic("lone", [[2], [3]])
    c.topic("live-led", [[4, 1, 2], [5, 3, 1], [4, 5, 3]])
    c.topic("behind", [[1, 4, 2], [2, 3, 5], [3, 5, 4], [1, 2, 4]])
    c.topic("dead-behind", [[1, 2, 3], [3, 1, 2]])
    for name, isrs in (("behind", [[1, 2], [2, 3], [3], [1]]), ("dead-behind", [[1], [3, 2]])):
        for index, isr in enumerate(isrs):
            _, result = c.alter(isr[0], name, index, isr)
            assert result is not None and result.error_code == Error.NONE
    return c


def epochs(qc: QuorumController) -> dict:
    return {(name, p[0]): (p[4], p[5]) for name, (_, parts) in view(qc)["topics"].items() for p in parts}


def assert_as_kafka_leaves_it(start: dict, together: QuorumController, one_by_one: QuorumController) -> None:
    """Kafka's end state, but for epochs: a partition changed advances its leader and
    partition epochs at most as often as one-at-a-time fencing does, and never goes back."""
    assert without_epochs(together) == without_epochs(one_by_one)
    after, reference = epochs(together), epochs(one_by_one)
    for key, (leader_epoch, partition_epoch) in after.items():
        assert start[key][0] <= leader_epoch <= reference[key][0]
        assert start[key][1] <= partition_epoch <= reference[key][1]
        assert (partition_epoch > start[key][1]) == (reference[key][1] > start[key][1])
    assert all(together.cluster.brokers[b].fenced for b in DEAD)
    assert not any(together.cluster.brokers[b].fenced for b in LIVE)


def fence_in_slices(c: Cluster, qc: QuorumController) -> list:
    """Every slice of the fencing under way, the live brokers heartbeating in between: the
    records written, each with its version."""
    written = []
    while (applied := qc.fence_stale_brokers(BOUND)) is not None:
        assert len(applied.records) <= BOUND
        written += applied.records
        for b in LIVE:
            heartbeat(c, qc, b)
    return written


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
def test_a_fleet_fenced_together_ends_as_kafkas_order_leaves_it(settings: dict) -> None:
    c = fleet(settings)
    together = copy(c)
    start = epochs(together)
    c.expire(*DEAD)
    let_dead_expire(c, together)
    written = fence_in_slices(c, together)
    assert_as_kafka_leaves_it(start, together, c.qc)
    changed = [(r.topic_id, r.partition_id) for r, _ in written if r.NAME == "PartitionChangeRecord"]
    assert len(changed) == len(set(changed))
    assert [r.id for r, _ in written if r.NAME == "FenceBrokerRecord"] == list(DEAD)
    # Copies of a shape's change are written, and compare, as the plain record with their
    # fields.
    plain = [(PartitionChangeRecord(**{s: getattr(r, s) for s in PartitionChangeRecord.__slots__}), v)
             if r.NAME == "PartitionChangeRecord" else (r, v) for r, v in written]
    assert encoded(written) == encoded(plain)
    assert written == plain
    behind = together.replication.topics[together.replication.names["behind"]].partitions
    assert any(p.recovery == RECOVERING for p in behind) is settings.get("unclean", False)


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
@pytest.mark.parametrize("lapse", ["after the pass", "during the pass"])
def test_a_broker_whose_session_ran_out_later_is_fenced_in_a_pass_of_its_own(settings: dict, lapse: str) -> None:
    """Broker 3 heartbeats once more after the others went silent: the pass that fences 1 and
    2 treats it as live (it may lead), and a pass of its own fences it once its session runs
    out, before or after theirs ends; the end state is still that of Kafka's order."""
    late_ms = 3000
    c = fleet(settings)
    together = copy(c)
    start = epochs(together)
    c.expire(*DEAD)
    c.clock.advance(late_ms)
    heartbeat(c, together, 3)
    c.clock.advance(SESSION_MS - late_ms)
    for b in LIVE:
        heartbeat(c, together, b)
    c.clock.advance(1)
    first = together.fence_stale_brokers(BOUND)
    assert first is not None and 3 not in together.cluster.leaving and together.cluster.is_usable(3)
    written = first.records
    if lapse == "after the pass":
        written += fence_in_slices(c, together)
        assert not together.cluster.brokers[3].fenced
    c.clock.advance(late_ms)
    for b in LIVE:
        heartbeat(c, together, b)
    written += fence_in_slices(c, together)
    assert [r.id for r, _ in written if r.NAME == "FenceBrokerRecord"] == [1, 2, 3]
    assert_as_kafka_leaves_it(start, together, c.qc)


# --- copies replayed in one go, and undone -------------------------------------------------------

def isr_index(qc: QuorumController) -> dict[int, set]:
    return {b: {(p.topic_id, p.partition_id) for p in ps} for b, ps in qc.replication.isr_of.items() if ps}


@pytest.mark.parametrize("build", [lambda: fleet({}), lambda: cluster(elr=False)], ids=["fleet", "mixed"])
def test_copies_replay_as_their_plain_records_and_undo_to_any_offset(build) -> None:
    """The active controller replays a shape's copies in one go; the same records replayed
    one by one from their log encoding end in the same state, indexes included; and going
    back to any offset of the pass, inside a slice too, leaves the state that replaying the
    records before it leaves."""
    c = build()
    together, reference, partly = copy(c), copy(c), copy(c)
    before = (view(together), eligible_index(together), isr_index(together))
    start = together.next_offset
    let_dead_expire(c, together, reference, partly)
    written = fence_in_slices(c, together)
    assert together.next_offset == start + len(written)
    assert sum(isinstance(r, CopiedChange) for r, _ in written) > len(written) // 2
    for offset, (record, version) in enumerate(written, start):
        reference.replay(parse_metadata_record(frame_metadata_record(record, version))[0], offset)
    assert view(together) == view(reference)
    assert isr_index(together) == isr_index(reference)

    middle = start + len(written) // 2 + 1
    for offset, (record, version) in enumerate(written[:middle - start], start):
        partly.replay(parse_metadata_record(frame_metadata_record(record, version))[0], offset)
    together.offsets.revert_to(middle)
    assert view(together) == view(partly) and isr_index(together) == isr_index(partly)
    together.offsets.revert_to(start)
    assert (view(together), eligible_index(together), isr_index(together)) == before
