"""Changing the voters of a dynamic quorum (KIP-853), as Kafka's KafkaRaftClientReconfigTest
checks it: AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter with their error codes, observers
that become voters, a leader that removes itself, and the upgrade of a static quorum to
kraft.version 1. The cores run on the seeded simulation's network (``tests.raft.simulation``),
so every message takes its own delay and the controllers replay what commits; an admin client
asks through the same network. Time is simulated: nothing sleeps."""

from __future__ import annotations

import random
from dataclasses import replace

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest, Listener
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.message import Message
from server.raft import messages as rpc
from server.raft.core import RaftCore
from server.raft.outputs import SendRequest
from server.raft.quorum_config import QuorumConfig
from server.raft.state import Follower, Resigned, Unattached
from server.raft.types import ReplicaKey
from tests.raft.simulation import (
    CLUSTER, LISTENER, Faults, Simulation, await_controllers, await_leader, directory, voter_node)
from tests.support.raft_log import InMemoryLog

# Long enough for every bounded wait here to be met many times over on the simulated clock.
BOUND_MS = 30_000
SEED = 853


def quorum(voters: int = 1, observers: int = 0, static: bool = False, kraft_version: int = 1,
           start: bool = True) -> Simulation:
    """``voters`` formatted with --initial-controllers (``static``: listed in
    controller.quorum.voters), then ``observers``; with ``start``, run until one leader is
    followed by all."""
    config = QuorumConfig(voters=tuple(range(1, voters + 1)) if static else (), cluster_id=CLUSTER,
                          election_timeout_ms=1_000, fetch_timeout_ms=2_000, request_timeout_ms=2_000)
    sim = Simulation(SEED, voters, Faults(max_delay_ms=20.0), config, observers=observers,
                     kraft_version=kraft_version)
    if start:
        settle(sim)
    return sim


def settle(sim: Simulation) -> RaftCore:
    """Until one leader is followed by every node and every controller holds what committed."""
    leader = await_leader(sim, BOUND_MS)
    await_controllers(sim, BOUND_MS)
    return core(sim, leader)


def core(sim: Simulation, node_id: int) -> RaftCore:
    found = sim.nodes[node_id].core
    assert found is not None, f"node {node_id} is down"
    return found


def ask(sim: Simulation, node_id: int, message: Message) -> Message:
    """An admin client's request, and its answer once the network brings it."""
    number = sim.ask(node_id, message)
    deadline = sim.now + BOUND_MS
    while number not in sim.client_answers:
        assert sim.now < deadline, f"no answer to {message.NAME} from node {node_id}"
        sim.run_until(sim.now + 10)
    return sim.client_answers[number]


def error_of(sim: Simulation, node_id: int, message: Message) -> int:
    return int(getattr(ask(sim, node_id, message), "error_code"))


def add_request(node_id: int, directory_id: bytes | None = None, cluster_id: str = CLUSTER,
                listener: str = LISTENER) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(cluster_id=cluster_id, timeout_ms=30_000, voter_id=node_id,
                               voter_directory_id=directory(node_id) if directory_id is None else directory_id,
                               listeners=[Listener(name=listener, host="127.0.0.1", port=9000 + node_id)])


def remove_request(node_id: int) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(cluster_id=CLUSTER, voter_id=node_id, voter_directory_id=directory(node_id))


def run_until(sim: Simulation, done: object, what: str) -> None:
    """Run in small steps until ``done()`` holds."""
    deadline = sim.now + BOUND_MS
    while not done():  # type: ignore[operator]
        assert sim.now < deadline, what
        sim.run_until(sim.now + 10)


# --- adding ------------------------------------------------------------------------------------

def test_an_observer_is_added_and_counts_towards_commits() -> None:
    sim = quorum(observers=1)
    leader, observer = core(sim, 1), core(sim, 2)
    assert leader.is_leader and not observer.is_voter
    assert isinstance(observer.state, Follower) and observer.leader_id == 1  # found through bootstrap
    assert error_of(sim, 1, add_request(2)) == Error.NONE
    assert leader.voter_set.keys == [ReplicaKey(1, directory(1)), ReplicaKey(2, directory(2))]
    run_until(sim, lambda: observer.is_voter and observer.voter_set == leader.voter_set,
              "the new voter never learnt it is one")
    await_controllers(sim, BOUND_MS)
    # Two voters now: a write commits only once the new voter has it.
    sim.crash(sim.nodes[2])
    before = leader.high_watermark
    sim.client_target = 1
    assert sim.propose()
    sim.run_until(sim.now + 2_000)
    assert leader.high_watermark == before


def test_a_duplicate_voter_is_refused() -> None:
    assert error_of(quorum(), 1, add_request(1)) == Error.DUPLICATE_VOTER


def test_a_voter_that_has_not_caught_up_is_refused() -> None:
    # It answers ApiVersions, but none of its fetches reaches the leader.
    sim = quorum(observers=1, start=False)
    sim.dropping.add((2, FetchRequest))
    run_until(sim, lambda: core(sim, 1).is_leader and core(sim, 1).high_watermark > 0, "no leader")
    assert error_of(sim, 1, add_request(2)) == Error.REQUEST_TIMED_OUT
    assert core(sim, 1).voters == {1}


def test_add_needs_a_directory_id_and_the_controller_listener() -> None:
    sim = quorum(observers=1)
    assert error_of(sim, 1, add_request(2, directory_id=bytes(16))) == Error.INVALID_REQUEST
    assert error_of(sim, 1, add_request(2, listener="OTHER")) == Error.INVALID_REQUEST


def test_another_cluster_is_refused() -> None:
    assert error_of(quorum(observers=1), 1, add_request(2, cluster_id="other")) == Error.INCONSISTENT_CLUSTER_ID


def test_only_the_leader_changes_voters() -> None:
    assert error_of(quorum(observers=1), 2, add_request(3)) == Error.NOT_LEADER_OR_FOLLOWER


def test_a_static_quorum_does_not_change_voters() -> None:
    sim = quorum(static=True, observers=1)
    assert error_of(sim, 1, add_request(2)) == Error.UNSUPPORTED_VERSION
    assert error_of(sim, 1, remove_request(1)) == Error.UNSUPPORTED_VERSION


def test_a_quorum_formatted_at_kraft_version_0_does_not_change_voters() -> None:
    sim = quorum(observers=1, kraft_version=0)
    assert error_of(sim, 1, add_request(2)) == Error.UNSUPPORTED_VERSION


def test_a_new_voter_without_kraft_version_1_is_refused() -> None:
    sim = quorum(observers=1)
    sim.kraft_versions[2] = (0, 0)
    assert error_of(sim, 1, add_request(2)) == Error.INVALID_REQUEST
    assert not core(sim, 2).is_voter


def test_one_change_at_a_time() -> None:
    sim = quorum(observers=2)
    first, second = sim.ask(1, add_request(2)), sim.ask(1, add_request(3))
    run_until(sim, lambda: {first, second} <= set(sim.client_answers), "a voter change was never answered")
    codes = sorted(int(getattr(sim.client_answers[n], "error_code")) for n in (first, second))
    # Whichever arrived first is made; the other finds it in flight.
    assert codes == sorted([Error.NONE, Error.REQUEST_TIMED_OUT])
    assert len(core(sim, 1).voters) == 2


def test_a_new_voter_that_does_not_answer_api_versions_is_refused() -> None:
    sim = quorum(observers=1)
    sim.crash(sim.nodes[2])  # gone before the leader asks it for its kraft.version range
    assert error_of(sim, 1, add_request(2)) == Error.REQUEST_TIMED_OUT
    assert core(sim, 1).voters == {1}


# --- removing ------------------------------------------------------------------------------------

def test_a_follower_is_removed_and_becomes_an_observer() -> None:
    sim = quorum(voters=3)
    leader = next(c for c in (core(sim, n) for n in (1, 2, 3)) if c.is_leader)
    gone = next(n for n in (1, 2, 3) if n != leader.node_id)
    assert error_of(sim, leader.node_id, remove_request(gone)) == Error.NONE
    assert leader.voters == {1, 2, 3} - {gone}
    run_until(sim, lambda: not core(sim, gone).is_voter, "the removed voter still counts itself one")
    epoch = leader.epoch
    sim.run_until(sim.now + 10_000)  # an observer never stands, however long it waits
    assert leader.is_leader and leader.epoch == epoch
    await_controllers(sim, BOUND_MS)


def test_a_leader_that_removes_itself_leads_until_it_commits_then_resigns() -> None:
    sim = quorum(voters=3)
    leader = settle(sim)
    assert error_of(sim, leader.node_id, remove_request(leader.node_id)) == Error.NONE
    new_leader = settle(sim)
    assert new_leader is not leader and new_leader.voters == {1, 2, 3} - {leader.node_id}
    assert not leader.is_voter and leader.leader_id == new_leader.node_id


def test_a_leader_that_removed_itself_never_stands_again() -> None:
    # Cut off from the others once it resigns, the old leader's resignation times out with
    # nobody to hear from: as Kafka's, it moves to the next epoch as an observer instead of
    # asking for votes it may no longer get (a dynamic voter grants any candidate).
    sim = quorum(voters=3)
    leader = settle(sim)
    epoch = leader.epoch
    sim.ask(leader.node_id, remove_request(leader.node_id))
    deadline = sim.now + BOUND_MS
    while not isinstance(leader.state, Resigned):
        assert sim.now < deadline, "the leader never resigned"
        sim.run_until(sim.now + 0.5)
    sim.partition({leader.node_id})
    sim.run_until(sim.now + 10_000)
    assert isinstance(leader.state, Unattached) and leader.epoch == epoch + 1 and not leader.is_voter


def test_a_removed_leader_whose_only_bootstrap_server_is_itself_finds_the_new_leader() -> None:
    # `--standalone` then add-controller: the first controller's bootstrap server is itself.
    # Removed and out of the voters, it asks the voters the log names instead.
    sim = quorum(voters=3)
    leader = settle(sim)
    leader.config = replace(leader.config, bootstrap_servers=(voter_node(leader.node_id).endpoints[0][1:],))
    assert error_of(sim, leader.node_id, remove_request(leader.node_id)) == Error.NONE
    new_leader = settle(sim)
    assert not leader.is_voter and (leader.epoch, leader.leader_id) == (new_leader.epoch, new_leader.node_id)


def test_removing_a_voter_that_is_not_there() -> None:
    sim = quorum(voters=3)
    leader = settle(sim)
    assert error_of(sim, leader.node_id, remove_request(7)) == Error.VOTER_NOT_FOUND
    wrong_directory = RemoveRaftVoterRequest(cluster_id=CLUSTER, voter_id=2, voter_directory_id=directory(9))
    assert error_of(sim, leader.node_id, wrong_directory) == Error.VOTER_NOT_FOUND


# --- updating and voter keys ----------------------------------------------------------------------

def test_a_voter_that_moved_updates_its_listeners() -> None:
    sim = quorum(voters=3)
    leader = settle(sim)
    follower = core(sim, next(n for n in (1, 2, 3) if n != leader.node_id))
    moved = ((LISTENER, "10.0.0.9", 9999),)
    follower.config = replace(follower.config, endpoints=moved)

    def recorded() -> bool:
        node = leader.voter_set.node(follower.node_id)
        return node is not None and node.endpoints == moved
    run_until(sim, recorded, "the leader never recorded the voter's new listeners")
    run_until(sim, lambda: follower.voter_set == leader.voter_set, "the voter never learnt its own update")
    await_controllers(sim, BOUND_MS)


def test_a_vote_for_another_directory_is_refused_with_invalid_voter_key() -> None:
    sim = quorum(voters=3)
    leader = settle(sim)
    follower = core(sim, next(n for n in (1, 2, 3) if n != leader.node_id))
    request = rpc.vote_request(CLUSTER, follower.epoch + 1, ReplicaKey(9, directory(9)),
                               ReplicaKey(follower.node_id, directory(42)), follower.epoch, 100)
    part = rpc.only_partition(getattr(ask(sim, follower.node_id, request), "topics"))
    assert part is not None and part.error_code == Error.INVALID_VOTER_KEY


# --- kraft.version 0 -> 1 (Kafka 4.1) ---------------------------------------------------------------

def test_a_static_quorum_is_upgraded_to_kraft_version_1_and_then_grows() -> None:
    sim = quorum(voters=3, static=True, observers=1)
    leader = settle(sim)
    assert leader.history.kraft_version == 0
    # Every voter told the leader its key and listeners (UpdateRaftVoter under kraft.version 0).
    run_until(sim, lambda: len(leader.kraft_upgrade(1)[2]) == 2, "the leader never learnt every voter")
    code, _, records = leader.kraft_upgrade(1)
    assert code == Error.NONE
    # The controller writes the upgrade, as UpdateFeatures does.
    sim.write(sim.nodes[leader.node_id], [(record, 0) for record in records])
    for node_id in (1, 2, 3):
        voter = core(sim, node_id)
        run_until(sim, lambda: voter.history.kraft_version == 1, f"voter {node_id} never reached kraft.version 1")
        assert voter.voter_set.keys == [ReplicaKey(n, directory(n)) for n in (1, 2, 3)]
    assert error_of(sim, leader.node_id, add_request(4)) == Error.NONE
    assert leader.voters == {1, 2, 3, 4}
    await_controllers(sim, BOUND_MS)


def test_the_upgrade_waits_for_every_voter_to_be_known() -> None:
    sim = quorum(voters=3, static=True)
    leader = settle(sim)
    run_until(sim, lambda: len(leader.kraft_upgrade(1)[2]) == 2, "the leader never learnt every voter")
    silent = next(n for n in (1, 2, 3) if n != leader.node_id)
    assert leader.state.learnt_voters.pop(silent) is not None  # type: ignore[union-attr]
    code, message, records = leader.kraft_upgrade(1)
    assert code == Error.INVALID_UPDATE_VERSION and f"voter {silent}" in (message or "") and records == []
    assert leader.kraft_upgrade(0)[0] == Error.NONE


# --- an observer alone ----------------------------------------------------------------------------

def test_an_observer_with_nobody_to_ask_waits_instead_of_spinning() -> None:
    config = QuorumConfig(voters=(), cluster_id=CLUSTER, directory_id=directory(2), listener_name=LISTENER,
                          endpoints=voter_node(2).endpoints, bootstrap_servers=(("127.0.0.1", 9001),))
    observer = RaftCore(2, config, InMemoryLog(), None, random.Random(2), 0)
    observer.tick(0)
    asked = 0
    for now in range(0, 1_000, 10):
        observer.tick(now)
        for out in observer.take_outputs():
            if isinstance(out, SendRequest):
                asked += 1
                observer.request_failed(out.correlation_id, now)  # its bootstrap server does not answer
        # Its next deadline is always ahead of it: the shell's timer never fires at once.
        assert observer.next_deadline() > now
    assert asked > 0
