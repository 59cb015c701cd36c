"""Deterministic simulations of 1, 3 and 5 voters: Raft's safety after every event, and liveness
once the network is stable.

``RAFT_SIM_SEEDS=N`` runs N random seeds (default 1000); ``RAFT_SIM_SEED=S`` runs seed S alone,
as a failure's message says.
"""

from __future__ import annotations

import os

import pytest

from server.raft.core import NotLeader
from tests.raft.simulation import Faults, Simulation, await_leader, await_write, run_random_scenario
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
