"""Deterministic simulations of 1, 3 and 5 voters: Raft's safety after every event, and liveness
once the network is stable.

``RAFT_SIM_SEEDS=N`` runs N random seeds (default 1000); ``RAFT_SIM_SEED=S`` runs seed S alone,
as a failure's message says. ``RAFT_RECONFIG_SEEDS=N`` runs the voter-change scenario under N
seeds (default 4).
"""

from __future__ import annotations

import os

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest, Listener
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.message import Message
from server.raft.core import NotLeader
from server.raft.quorum_config import QuorumConfig
from tests.raft.simulation import (
    CLUSTER, LISTENER, Faults, Simulation, await_controllers, await_leader, await_write, directory,
    run_random_scenario)
from tests.support.raft_writes import propose

_ONE = os.environ.get("RAFT_SIM_SEED")
SEEDS = [int(_ONE)] if _ONE else list(range(int(os.environ.get("RAFT_SIM_SEEDS", "1000"))))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_faults_keep_raft_safe_and_live(seed: int) -> None:
    run_random_scenario(seed)


def _stable(seed: int, voters: int) -> tuple[Simulation, int]:
    sim = Simulation(seed, voters, Faults(max_delay_ms=5.0))
    leader = await_leader(sim, 10_000)
    await_write(sim, 2_000)
    return sim, leader


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", range(20))
def test_voter_back_from_a_partition_does_not_raise_the_epoch(seed: int, voters: int) -> None:
    sim, leader = _stable(seed, voters)
    epoch = sim.nodes[leader].core.epoch  # type: ignore[union-attr]
    cut_off = next(i for i in sorted(sim.nodes) if i != leader)
    sim.partition({cut_off})
    for _ in range(100):  # ten seconds of writes while it is away
        sim.propose()
        sim.run_until(sim.now + 100)
    sim.heal()
    sim.run_until(sim.now + 5_000)
    assert sim.stable_leader() == leader
    core = sim.nodes[cut_off].core
    assert core is not None and core.epoch == epoch and core.leader_id == leader
    assert core.high_watermark == sim.nodes[leader].core.high_watermark  # type: ignore[union-attr]


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", range(10))
def test_leader_cut_off_resigns_and_the_majority_elects_another(seed: int, voters: int) -> None:
    sim, leader = _stable(seed, voters)
    committed = len(sim.committed)
    sim.partition({leader})
    sim.run_until(sim.now + 10_000)
    old = sim.nodes[leader].core
    assert old is not None and not old.is_leader  # check quorum made it resign
    rest = [n.core for i, n in sim.nodes.items() if i != leader]
    leaders = {c.node_id for c in rest if c is not None and c.is_leader}
    assert len(leaders) == 1 and leader not in leaders
    sim.heal()
    new_leader = await_leader(sim, 10_000)
    assert new_leader != leader
    await_write(sim, 2_000)
    assert len(sim.committed) > committed


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", range(10))
def test_graceful_shutdown_hands_leadership_over(seed: int, voters: int) -> None:
    sim, leader = _stable(seed, voters)
    node = sim.nodes[leader]
    sim.call(node, lambda core, now: core.begin_shutdown(now))
    assert node.core is not None and not node.core.is_leader
    with pytest.raises(NotLeader):
        sim.call(node, lambda core, now: propose(core, [b"late"], now))
    start = sim.now
    while not node.core.shutdown_complete:
        sim.run_until(sim.now + 10)
        # EndQuorumEpoch lets the first successor start at once, well before a fetch timeout.
        assert sim.now - start < sim.config.fetch_timeout_ms
    sim.crash(node)
    rest = [n.core for n in sim.nodes.values() if n.core is not None]
    assert sum(c.is_leader for c in rest) == 1


@pytest.mark.parametrize("seed", range(10))
def test_whole_cluster_restart_losing_unflushed_tails_keeps_commits(seed: int) -> None:
    sim, _ = _stable(seed, 3)
    for _ in range(20):
        sim.propose()
        sim.run_until(sim.now + 7)
    committed = list(sim.committed)
    for node in sim.nodes.values():
        sim.crash(node)
    for node in sim.nodes.values():
        sim.restart(node)
    await_leader(sim, 20_000)
    await_write(sim, 2_000)
    assert sim.committed[:len(committed)] == committed


def add_request(node_id: int) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(cluster_id=CLUSTER, timeout_ms=30_000, voter_id=node_id,
                               voter_directory_id=directory(node_id),
                               listeners=[Listener(name=LISTENER, host="127.0.0.1", port=9000 + node_id)])


def remove_request(node_id: int) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(cluster_id=CLUSTER, voter_id=node_id, voter_directory_id=directory(node_id))


def voters_of(sim: Simulation) -> set[int]:
    leader = sim.nodes[await_leader(sim, 30_000)].core
    assert leader is not None
    return set(leader.voters)


def change_voters(sim: Simulation, request: Message, bound_ms: float = 60_000) -> None:
    """Ask the leader until the change is answered NONE, or the answer says it was made (an
    earlier answer was lost), as an operator runs the command again after REQUEST_TIMED_OUT or
    no answer; a crash of some node meanwhile."""
    done = (Error.NONE, Error.DUPLICATE_VOTER if isinstance(request, AddRaftVoterRequest) else Error.VOTER_NOT_FOUND)
    deadline = sim.now + bound_ms
    crashed = False
    while sim.now < deadline:
        leader = await_leader(sim, 30_000)
        asked = sim.ask(leader, request)
        for _ in range(10):  # a client writes meanwhile
            sim.at(sim.now + sim.rng.uniform(0, 2_000), sim.propose)
        if not crashed:
            others = sorted(n for n in sim.nodes if n != leader)
            victim = sim.nodes[sim.rng.choice(others)]
            sim.at(sim.now + sim.rng.uniform(0, 200), lambda: sim.crash(victim))
            sim.at(sim.now + sim.rng.uniform(300, 1_500), lambda: sim.restart(victim))
            crashed = True
        sim.run_until(sim.now + 2_000)
        answer = sim.client_answers.get(asked)
        if answer is not None and answer.error_code in done:
            return
    raise sim.fail(f"{request.NAME} for {request.voter_id} not done within {bound_ms:.0f}ms")


@pytest.mark.parametrize("seed", range(int(os.environ.get("RAFT_RECONFIG_SEEDS", "4"))))
def test_voters_are_added_and_removed_under_loss_crashes_and_writes(seed: int) -> None:
    """KIP-853 on the seeded network: three initial voters and two observers; observers 4 and
    5 are added, voter 2 removed, then the leader removes itself, with messages lost, delayed
    and duplicated, a node crashing during each change and a client writing throughout; the
    safety checks run after every event, and the controllers end as the committed log says."""
    config = QuorumConfig(voters=(), cluster_id="sim", election_timeout_ms=400, fetch_timeout_ms=1_000,
                          request_timeout_ms=1_000, fetch_max_wait_ms=200)
    sim = Simulation(seed, 3, Faults(loss=0.05, duplication=0.02, max_delay_ms=20.0), config, observers=2)
    await_leader(sim, 30_000)
    for request in (add_request(4), add_request(5), remove_request(2)):
        change_voters(sim, request)
    assert voters_of(sim) == {1, 3, 4, 5}
    leader = await_leader(sim, 30_000)
    change_voters(sim, remove_request(leader))
    assert voters_of(sim) == {1, 3, 4, 5} - {leader}
    assert await_leader(sim, 30_000) != leader
    await_write(sim, 10_000)
    await_controllers(sim, 10_000)
