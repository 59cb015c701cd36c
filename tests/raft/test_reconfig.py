"""Changing the voters of a dynamic quorum (KIP-853), as Kafka's KafkaRaftClientReconfigTest
checks it: AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter with their error codes, observers
that become voters, and a leader that removes itself. Cores talk through an in-process network
that delivers at once; time is passed in."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest, Listener
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse, SupportedFeatureKey
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.generated.messages.update_raft_voter_request import KRaftVersionFeature, UpdateRaftVoterRequest
from protocol.generated.messages.update_raft_voter_request import Listener as UpdateListener
from protocol.message import Message
from server.raft import messages as rpc
from server.raft.core import RaftCore
from tests.support.raft_log import InMemoryLog
from server.raft.outputs import SendRequest, SendResponse
from server.raft.quorum_config import QuorumConfig
from server.raft.state import Follower, Leader, Resigned, Unattached
from server.raft.voters import VoterNode, VoterSet
from server.raft.types import ReplicaKey
from tests.support.raft_writes import propose, propose_control, kraft_version_batch

CLUSTER = "reconfig"
LISTENER = "CONTROLLER"
CLIENT = 1000  # the admin client's id on the network


def directory(node_id: int) -> bytes:
    return bytes([node_id]) * 16


def endpoints(node_id: int) -> tuple[tuple[str, str, int], ...]:
    return ((LISTENER, "127.0.0.1", 9000 + node_id),)


def voter(node_id: int) -> VoterNode:
    return VoterNode(ReplicaKey(node_id, directory(node_id)), endpoints(node_id), (0, 1))


def bootstrap_log(voters: list[int], kraft_version: int = 1) -> InMemoryLog:
    """What `format --initial-controllers` leaves: kraft.version and the voter set at the start."""
    log = InMemoryLog()
    log.append([kraft_version_batch(0, 0, kraft_version, VoterSet.of(voter(v) for v in voters), 0)])
    log.flush()
    return log


@dataclass
class Network:
    cores: dict[int, RaftCore] = field(default_factory=dict)
    now: int = 0
    kraft_versions: dict[int, tuple[int, int]] = field(default_factory=dict)  # what ApiVersions says
    client_answers: dict[int, Message] = field(default_factory=dict)  # by the client's correlation id
    _routes: dict[tuple[int, int], tuple[int, int, int]] = field(default_factory=dict)
    _next: int = 0

    def start(self, node_id: int, voters: list[int], kraft_version: int = 1, static: bool = False) -> RaftCore:
        """``static``: ``voters`` are controller.quorum.voters (kraft.version 0, nothing in the log)."""
        config = QuorumConfig(voters=tuple(voters) if static else (), cluster_id=CLUSTER, directory_id=directory(node_id), listener_name=LISTENER,
                              endpoints=endpoints(node_id), election_timeout_ms=1000, fetch_timeout_ms=2000,
                              fetch_max_wait_ms=0,
                              bootstrap_servers=tuple(("127.0.0.1", 9000 + n) for n in (1, 2, 3)))
        log = bootstrap_log(voters, kraft_version) if voters and not static else InMemoryLog()
        core = RaftCore(node_id, config, log, None, random.Random(node_id), self.now)
        self.cores[node_id] = core
        return core

    def send(self, node_id: int, message: Message) -> int:
        """A client request to ``node_id``; returns the correlation id its answer is kept under."""
        self._next += 1
        correlation = self._next
        self._routes[(node_id, correlation)] = (CLIENT, correlation, node_id)
        self.cores[node_id].receive_request(CLIENT, correlation, message, self.now)
        self.pump()
        return correlation

    def pump(self, rounds: int = 8) -> None:
        """Deliver what the cores sent, ``rounds`` hops deep: a fetch answered at once is sent
        again at once, so delivering until nothing moves would never end."""
        for _ in range(rounds):
            for node_id, core in list(self.cores.items()):
                for out in core.take_outputs():
                    if isinstance(out, SendRequest):
                        self._request(node_id, out)
                    elif isinstance(out, SendResponse):
                        source, correlation, asked = self._routes.pop((node_id, out.correlation_id))
                        if source == CLIENT:
                            self.client_answers[correlation] = out.message
                        elif source in self.cores:
                            self.cores[source].receive_response(asked, correlation, out.message, self.now)

    def _request(self, source: int, out: SendRequest) -> None:
        # Bootstrap servers (ids below -1) are nodes 1, 2 and 3 here.
        destination = -1 - out.destination if out.destination <= -2 else out.destination
        target = self.cores.get(destination)
        if target is None:
            self.cores[source].request_failed(out.correlation_id, self.now)
            return
        if isinstance(out.message, ApiVersionsRequest):
            low, high = self.kraft_versions.get(destination, (0, 1))
            answer = ApiVersionsResponse(supported_features=[
                SupportedFeatureKey(name="kraft.version", min_version=low, max_version=high)])
            self.cores[source].receive_response(out.destination, out.correlation_id, answer, self.now)
            return
        self._next += 1
        self._routes[(destination, self._next)] = (source, out.correlation_id, out.destination)
        target.receive_request(source, self._next, out.message, self.now)

    def run(self, ms: int, step: int = 50) -> None:
        end = self.now + ms
        while self.now < end:
            self.now += step
            for core in self.cores.values():
                core.tick(self.now)
            self.pump()

    def leader(self) -> RaftCore:
        leaders = [c for c in self.cores.values() if isinstance(c.state, Leader)]
        assert len(leaders) == 1, [c.state for c in self.cores.values()]
        return leaders[0]


def add_request(node_id: int, directory_id: bytes | None = None, cluster_id: str = CLUSTER,
                listener: str = LISTENER) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(cluster_id=cluster_id, timeout_ms=30_000, voter_id=node_id,
                               voter_directory_id=directory(node_id) if directory_id is None else directory_id,
                               listeners=[Listener(name=listener, host="127.0.0.1", port=9000 + node_id)])


def remove_request(node_id: int) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(cluster_id=CLUSTER, voter_id=node_id, voter_directory_id=directory(node_id))


def error_of(net: Network, correlation: int) -> int:
    answer = net.client_answers[correlation]
    return getattr(answer, "error_code")


def standalone_with_observers(*observers: int) -> Network:
    net = Network()
    net.start(1, [1])
    for node_id in observers:
        net.start(node_id, [])
    net.run(3_000)
    return net


# --- adding ------------------------------------------------------------------------------------

def test_an_observer_is_added_and_counts_towards_commits() -> None:
    net = standalone_with_observers(2)
    leader = net.leader()
    assert leader.node_id == 1 and not net.cores[2].is_voter
    assert isinstance(net.cores[2].state, Follower) and net.cores[2].leader_id == 1  # found through bootstrap
    correlation = net.send(1, add_request(2))
    net.run(500)
    assert error_of(net, correlation) == Error.NONE
    assert leader.voter_set.keys == [ReplicaKey(1, directory(1)), ReplicaKey(2, directory(2))]
    assert net.cores[2].is_voter and net.cores[2].voter_set == leader.voter_set
    # Two voters now: a write commits only once the new voter has it.
    before = leader.high_watermark
    del net.cores[2]
    propose(leader, [b"x"], net.now)
    net.run(200)
    assert leader.high_watermark == before


def test_a_duplicate_voter_is_refused() -> None:
    net = standalone_with_observers()
    assert error_of(net, net.send(1, add_request(1))) == Error.DUPLICATE_VOTER


def test_a_voter_that_has_not_caught_up_times_out() -> None:
    net = standalone_with_observers()
    net.start(3, [])  # started, but has not fetched yet when the request comes
    net._routes[(1, 77)] = (CLIENT, 77, 1)
    net.cores[1].receive_request(CLIENT, 77, add_request(3), net.now)
    net.cores[3].take_outputs()  # its first fetch is lost
    net.pump()
    assert error_of(net, 77) == Error.REQUEST_TIMED_OUT


def test_add_needs_a_directory_id_and_the_controller_listener() -> None:
    net = standalone_with_observers(2)
    assert error_of(net, net.send(1, add_request(2, directory_id=bytes(16)))) == Error.INVALID_REQUEST
    assert error_of(net, net.send(1, add_request(2, listener="OTHER"))) == Error.INVALID_REQUEST


def test_another_cluster_is_refused() -> None:
    net = standalone_with_observers(2)
    assert error_of(net, net.send(1, add_request(2, cluster_id="other"))) == Error.INCONSISTENT_CLUSTER_ID


def test_only_the_leader_changes_voters() -> None:
    net = standalone_with_observers(2)
    assert error_of(net, net.send(2, add_request(3))) == Error.NOT_LEADER_OR_FOLLOWER


def test_a_static_quorum_does_not_change_voters() -> None:
    net = Network()
    net.start(1, [1], kraft_version=0)
    net.start(2, [])
    net.run(3_000)
    assert error_of(net, net.send(1, add_request(2))) == Error.UNSUPPORTED_VERSION
    assert error_of(net, net.send(1, remove_request(1))) == Error.UNSUPPORTED_VERSION


def test_a_new_voter_without_kraft_version_1_is_refused() -> None:
    net = standalone_with_observers(2)
    net.kraft_versions[2] = (0, 0)
    assert error_of(net, net.send(1, add_request(2))) == Error.INVALID_REQUEST
    assert not net.cores[2].is_voter


def test_one_change_at_a_time() -> None:
    net = standalone_with_observers(2, 3)
    net.send(1, add_request(2))  # its record cannot commit yet: 2 fetches after this
    second = net.send(1, add_request(3))
    assert error_of(net, second) == Error.REQUEST_TIMED_OUT


# --- removing ------------------------------------------------------------------------------------

def three_voters() -> Network:
    net = Network()
    for node_id in (1, 2, 3):
        net.start(node_id, [1, 2, 3])
    net.run(6_000)
    return net


def test_a_follower_is_removed_and_becomes_an_observer() -> None:
    net = three_voters()
    leader = net.leader()
    gone = next(n for n in (1, 2, 3) if n != leader.node_id)
    correlation = net.send(leader.node_id, remove_request(gone))
    net.run(500)
    assert error_of(net, correlation) == Error.NONE
    assert leader.voters == {1, 2, 3} - {gone}
    assert not net.cores[gone].is_voter
    net.run(10_000)  # an observer never stands, however long it waits
    assert net.leader() is leader


def test_a_leader_that_removes_itself_leads_until_it_commits_then_resigns() -> None:
    net = three_voters()
    leader = net.leader()
    correlation = net.send(leader.node_id, remove_request(leader.node_id))
    net.run(5_000)
    assert error_of(net, correlation) == Error.NONE
    new_leader = net.leader()
    assert new_leader is not leader and new_leader.voters == {1, 2, 3} - {leader.node_id}
    assert not leader.is_voter and leader.leader_id == new_leader.node_id


def test_a_leader_that_removed_itself_never_stands_again() -> None:
    # Cut off from the others once its removal commits, the old leader's resignation times
    # out with nobody to hear from: as Kafka's, it moves to the next epoch as an observer
    # instead of asking for votes it may no longer get (a dynamic voter grants any candidate).
    net = three_voters()
    leader = net.leader()
    epoch = leader.epoch
    correlation = net.send(leader.node_id, remove_request(leader.node_id))
    net.run(200)
    assert error_of(net, correlation) == Error.NONE and isinstance(leader.state, Resigned)
    alone = Network(cores={leader.node_id: leader}, now=net.now)
    alone.run(10_000)
    assert isinstance(leader.state, Unattached) and leader.epoch == epoch + 1 and not leader.is_voter


def test_a_removed_leader_whose_only_bootstrap_server_is_itself_finds_the_new_leader() -> None:
    # `--standalone` then add-controller: the first controller's bootstrap server is itself.
    # Removed and out of the voters, it asks the voters the log names instead.
    net = three_voters()
    leader = net.leader()
    leader.config = replace(leader.config, bootstrap_servers=(endpoints(leader.node_id)[0][1:],))
    correlation = net.send(leader.node_id, remove_request(leader.node_id))
    net.run(10_000)
    assert error_of(net, correlation) == Error.NONE
    new_leader = net.leader()
    assert not leader.is_voter and (leader.epoch, leader.leader_id) == (new_leader.epoch, new_leader.node_id)


def test_removing_a_voter_that_is_not_there() -> None:
    net = three_voters()
    leader = net.leader()
    assert error_of(net, net.send(leader.node_id, remove_request(7))) == Error.VOTER_NOT_FOUND
    wrong_directory = RemoveRaftVoterRequest(cluster_id=CLUSTER, voter_id=2, voter_directory_id=directory(9))
    assert error_of(net, net.send(leader.node_id, wrong_directory)) == Error.VOTER_NOT_FOUND


# --- updating and voter keys ----------------------------------------------------------------------

def test_a_voter_updates_its_listeners() -> None:
    net = three_voters()
    leader = net.leader()
    follower = next(n for n in (1, 2, 3) if n != leader.node_id)
    update = UpdateRaftVoterRequest(
        cluster_id=CLUSTER, current_leader_epoch=leader.epoch, voter_id=follower,
        voter_directory_id=directory(follower),
        listeners=[UpdateListener(name=LISTENER, host="10.0.0.9", port=9999)],
        k_raft_version_feature=KRaftVersionFeature(min_supported_version=0, max_supported_version=1))
    assert error_of(net, net.send(leader.node_id, update)) == Error.NONE
    node = leader.voter_set.node(follower)
    assert node is not None and node.endpoints == ((LISTENER, "10.0.0.9", 9999),)


def test_a_vote_for_another_directory_is_refused_with_invalid_voter_key() -> None:
    net = three_voters()
    follower = next(c for c in net.cores.values() if not isinstance(c.state, Leader))
    request = rpc.vote_request(CLUSTER, follower.epoch + 1, ReplicaKey(9, directory(9)),
                               ReplicaKey(follower.node_id, directory(42)), follower.epoch, 100)
    answer = error_of_vote(net, follower.node_id, request)
    assert answer == Error.INVALID_VOTER_KEY


def error_of_vote(net: Network, node_id: int, request: Message) -> int:
    correlation = net.send(node_id, request)
    part = rpc.only_partition(getattr(net.client_answers[correlation], "topics"))
    return int(part.error_code)


# --- kraft.version 0 -> 1 (Kafka 4.1) ---------------------------------------------------------------

def test_a_static_quorum_is_upgraded_to_kraft_version_1_and_then_grows() -> None:
    net = Network()
    for node_id in (1, 2, 3):
        net.start(node_id, [1, 2, 3], static=True)
    net.start(4, [])
    net.run(6_000)
    leader = net.leader()
    assert leader.history.kraft_version == 0
    code, _, records = leader.kraft_upgrade(1)
    # Every voter told the leader its key and listeners (UpdateRaftVoter under kraft.version 0).
    assert code == Error.NONE and len(records) == 2
    propose_control(leader, records, net.now)
    net.run(1_000)
    for node_id in (1, 2, 3):
        core = net.cores[node_id]
        assert core.history.kraft_version == 1
        assert core.voter_set.keys == [ReplicaKey(n, directory(n)) for n in (1, 2, 3)]
    assert error_of(net, net.send(leader.node_id, add_request(4))) == Error.NONE
    net.run(500)
    assert leader.voters == {1, 2, 3, 4}


def test_the_upgrade_waits_for_every_voter_to_be_known() -> None:
    net = Network()
    for node_id in (1, 2, 3):
        net.start(node_id, [1, 2, 3], static=True)
    net.run(6_000)
    leader = net.leader()
    silent = next(n for n in (1, 2, 3) if n != leader.node_id)
    assert leader.state.learnt_voters.pop(silent) is not None  # type: ignore[union-attr]
    code, message, records = leader.kraft_upgrade(1)
    assert code == Error.INVALID_UPDATE_VERSION and f"voter {silent}" in (message or "") and records == []
    assert leader.kraft_upgrade(0)[0] == Error.NONE


def test_a_new_voter_that_does_not_answer_api_versions_is_refused_at_once() -> None:
    net = standalone_with_observers(2)
    del net.cores[2]  # gone before the leader asks it for its kraft.version range
    correlation = net.send(1, add_request(2))
    net.run(100)  # far below the request's 30 s timeout
    assert error_of(net, correlation) == Error.REQUEST_TIMED_OUT
    assert net.cores[1].voters == {1}


def test_an_observer_with_nobody_to_ask_waits_instead_of_spinning() -> None:
    net = Network()
    observer = net.start(2, [])
    net.cores.pop(2)  # alone: its bootstrap servers do not answer
    observer.tick(0)
    asked = 0
    for now in range(0, 1_000, 10):
        observer.tick(now)
        for out in observer.take_outputs():
            if isinstance(out, SendRequest):
                asked += 1
                observer.request_failed(out.correlation_id, now)
        # Its next deadline is always ahead of it: the shell's timer never fires at once.
        assert observer.next_deadline() > now
    assert asked > 0
