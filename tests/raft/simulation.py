"""A seeded, single-process network of Raft cores, with faults and Raft's safety checks.

One ``random.Random(seed)`` drives everything: message delays (so reordering), loss,
duplication, partitions, crashes (with or without the unflushed log tail surviving, and
possibly in the middle of a core's outputs or just after a vote), per-node clock skew and
drift, snapshots that drop the log's prefix (so lagging voters need FetchSnapshot), and a
client that proposes writes to whichever node it believes leads. Simulated time only: nothing
sleeps, and a seed replays exactly.

After every event ``check_safety`` asserts: one leader per epoch (as any node ever saw it);
every batch ever reported committed is held, unchanged, by every log that reaches it and
durably by a majority; a leader holds every batch committed in an earlier epoch; a node's
high watermark never goes back within one run of it; and a batch at a given (offset, epoch)
is the same bytes in every log (log matching).

Each node runs the server's own shell code around its core: the driver that carries out the
core's outputs (``QuorumDriver``, with this network and disk as its I/O) and the controller's
lifecycle (``ControllerLifecycle`` over a ``ControllerReplica``): standbys replay what commits,
a slice per event, the leader applies the client's commands before they commit and undoes them
if it loses its epoch. ``check_controllers`` asserts that every voter's controller state is the
state of replaying the committed log.

A dynamic quorum (KIP-853) starts from the voters ``format --initial-controllers`` names, with
observers beside them (formatted without), which find the leader through the voters as their
bootstrap servers; an admin client adds and removes voters (``ask``), the leader writes each
change itself, and the controllers replay it where it lies.
"""

from __future__ import annotations

import heapq
import itertools
import random
from bisect import bisect_left
from functools import partial
from dataclasses import dataclass, field, replace
from typing import Callable, cast

from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse, SupportedFeatureKey
from protocol.generated.metadata.config_record import ConfigRecord
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.message import Message
from protocol.records import ControlMessage, control_value, frame_metadata_record
from server.controller.clock import ManualClock
from server.controller.quorum_controller import Applied, QuorumController
from server.controller.result import ControllerResult, VersionedRecord
from server.controller.lifecycle import ControllerLifecycle
from server.controller.replica import ControllerReplica
from server.image.loader import MetadataLoader
from server.metalog.commit_path import encode_batches
from server.raft.core import NotLeader, RaftCore
from server.raft.log import split_batches
from tests.support.raft_log import InMemoryLog
from server.quorum_driver import QuorumDriver, QuorumEvents
from server.raft.outputs import Committed, SendRequest, SendResponse
from server.raft.quorum_config import QuorumConfig
from server.raft.state import Election
from server.raft.types import OffsetAndEpoch, ReplicaKey
from server.raft.voters import SUPPORTED_KRAFT_VERSIONS, VoterNode, VoterSet, quorum_messages
from tests.support.raft_writes import kraft_version_batch


class SafetyViolation(AssertionError):
    pass


CLUSTER = "sim"
LISTENER = "CONTROLLER"
CLIENT = 1000  # the admin client's id on the network


def directory(node_id: int) -> bytes:
    return bytes([node_id]) * 16


def voter_node(node_id: int) -> VoterNode:
    return VoterNode(ReplicaKey(node_id, directory(node_id)), ((LISTENER, "127.0.0.1", 9000 + node_id),),
                     (SUPPORTED_KRAFT_VERSIONS[0], SUPPORTED_KRAFT_VERSIONS[-1]))
BOOTSTRAP: list[VersionedRecord] = [(FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]


def new_controller(node_id: int, snapshot: bytes = b"") -> QuorumController:
    """A controller holding a snapshot of the simulated log (its batches, as the in-memory
    log keeps it)."""
    controller = QuorumController(CLUSTER, node_id, ManualClock())
    loader = MetadataLoader(controller)
    for batch in split_batches(snapshot):
        loader.raw_batch(batch, 0, f"node {node_id}'s snapshot")
    return controller


def controller_state(controller: QuorumController) -> list[bytes]:
    """The controller's whole state, as the records of a snapshot of it (the quorum's control
    records, which a snapshot holds in its header batch, as their control values)."""
    return [frame_metadata_record(record, version) if record.API_KEY is not None
            else control_value(cast(ControlMessage, record)) for record, version in controller.snapshot_records()]


class CheckedLog(InMemoryLog):
    """An in-memory log that reports every batch it takes to the cluster-wide registry of
    (base offset, epoch) -> bytes, which must never hold two different batches."""

    def __init__(self, registry: dict[tuple[int, int], bytes], fail: Callable[[str], SafetyViolation],
                 check_snapshot: Callable[[tuple[int, int], bytes], None]) -> None:
        super().__init__()
        self.registry = registry
        self.fail = fail
        self.check_snapshot = check_snapshot
        # How many leading batches equal the committed log's; a truncation lowers it, as
        # the batches after it may be replaced, and a snapshot starts it again.
        self.verified = 0

    def truncate_to(self, offset: int) -> None:
        super().truncate_to(offset)
        self.verified = min(self.verified, len(self.batches))

    def take_snapshot(self, end_offset: int) -> None:
        super().take_snapshot(end_offset)
        self.verified = 0

    def install_snapshot(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        self.check_snapshot(snapshot, data)
        super().install_snapshot(snapshot, data)
        self.verified = 0

    def append(self, batches: list[bytes]) -> None:
        super().append(batches)
        for stored in self.batches[len(self.batches) - len(batches):]:
            key = (stored.base_offset, stored.epoch)
            known = self.registry.setdefault(key, stored.data)
            if known != stored.data:
                raise self.fail(f"two different batches at offset {key[0]} in epoch {key[1]}")


@dataclass
class Faults:
    loss: float = 0.0
    duplication: float = 0.0
    max_delay_ms: float = 5.0
    partitions: bool = False
    crashes: bool = False
    crash_mid_outputs: bool = False
    skew: bool = False
    shutdowns: bool = False
    snapshots: bool = False

    @classmethod
    def random(cls, rng: random.Random) -> "Faults":
        return cls(loss=rng.choice([0.0, 0.01, 0.05, 0.2]), duplication=rng.choice([0.0, 0.02, 0.1]),
                   max_delay_ms=rng.choice([2.0, 10.0, 60.0]), partitions=rng.random() < 0.5,
                   crashes=rng.random() < 0.5, crash_mid_outputs=rng.random() < 0.3,
                   skew=rng.random() < 0.5, shutdowns=rng.random() < 0.2, snapshots=rng.random() < 0.5)


@dataclass
class Node:
    node_id: int
    log: CheckedLog
    offset_ms: float = 0.0  # local clock = offset + rate * simulated time
    rate: float = 1.0
    persisted: Election | None = None
    core: RaftCore | None = None
    tick_generation: int = 0
    last_committed: int = -1  # within the current run of the node
    incarnation: int = 0
    replica: ControllerReplica | None = None
    lifecycle: ControllerLifecycle | None = None
    driver: QuorumDriver | None = None

    def local(self, t: float) -> int:
        return int(self.offset_ms + self.rate * t)

    def global_time(self, local_ms: int) -> float:
        return (local_ms - self.offset_ms) / self.rate


@dataclass(order=True)
class _Event:
    time: float
    seq: int
    action: Callable[[], object] = field(compare=False)


@dataclass
class _NodeIO:
    """A node's quorum-state file, outbound requests and answers, on the simulated network."""

    sim: "Simulation"
    node: Node

    def persist(self, election: Election) -> None:
        sim, node = self.sim, self.node
        node.persisted = election
        if sim.faults.crashes and election.leader_id < 0 <= election.voted_id and sim.rng.random() < 0.1:
            # Die just after voting and come straight back, while the election still runs:
            # the vote must survive, or this node could vote twice in the epoch.
            sim.at(sim.now + sim.rng.uniform(0, 1), lambda: sim.crash(node))
            sim.at(sim.now + sim.rng.uniform(1, 30), lambda: sim.restart(node))

    def send(self, request: SendRequest) -> None:
        source = self.node.node_id
        self.sim._send(source, request.destination, self.sim._deliver_request(
            source, request.destination, request.correlation_id, request.message))

    def answer(self, response: SendResponse) -> None:
        source = self.node.node_id
        self.sim._send(source, response.destination,
                       self.sim._deliver_response(source, response.correlation_id, response.message))


class Simulation:
    def __init__(self, seed: int, voters: int, faults: Faults, config: QuorumConfig | None = None,
                 observers: int = 0, kraft_version: int = 1) -> None:
        """``config`` with no voters: a dynamic quorum, whose first ``voters`` nodes are its
        initial voters (formatted at ``kraft_version``); with voters, a static quorum. The
        next ``observers`` nodes observe either."""
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults
        initial = tuple(range(1, voters + 1))
        ids = tuple(range(1, voters + observers + 1))
        self.config = config or QuorumConfig(voters=initial, cluster_id="sim")
        self.dynamic = not self.config.voters
        self.initial_voters = initial
        self.registry: dict[tuple[int, int], bytes] = {}
        self.now = 0.0
        self.step = 0
        self.nodes = {i: Node(i, CheckedLog(self.registry, self.fail, self._check_snapshot)) for i in ids}
        # Every voter set the committed log has held: committed batches are durable on a
        # majority of the smallest (one voter changes at a time, so majorities of successive
        # sets overlap).
        self.smallest_voter_set = len(initial)
        self.client_answers: dict[int, Message] = {}
        self._client_asks = itertools.count()
        if self.dynamic:
            bootstrap = kraft_version_batch(0, 0, kraft_version, VoterSet.of(voter_node(v) for v in initial), 0)
            for v in initial:
                self.nodes[v].log.append([bootstrap])
                self.nodes[v].log.flush()
        if faults.skew:
            for node in self.nodes.values():
                node.offset_ms = self.rng.uniform(0, 10_000_000)
                node.rate = self.rng.uniform(0.9, 1.1)
        self._queue: list[_Event] = []
        self._seq = itertools.count()
        self._connections = itertools.count()
        # connection -> (asker, its run, correlation id, the id it asked: a bootstrap server's is below -1)
        self._askers: dict[int, tuple[int, int, int, int]] = {}
        self.cut: set[frozenset[int]] = set()  # pairs that cannot talk
        # Requests lost on the way, by (sender, request type): a node that answers some
        # requests and never manages others.
        self.dropping: set[tuple[int, type[Message]]] = set()
        # The kraft.version range each node's ApiVersions answer gives, where not this build's.
        self.kraft_versions: dict[int, tuple[int, int]] = {}
        # Everything ever reported committed, as the batches of the log's committed prefix,
        # with the offset each ends at.
        self.committed: list[bytes] = []
        self.committed_ends: list[int] = []
        self.committed_end = 0
        # (epoch a node was in when it reported a commit, committed end offset it reported)
        self.commit_epochs: dict[int, int] = {}
        self.leader_of_epoch: dict[int, int] = {}
        self.proposed: list[bytes] = []
        self.client_target = ids[0]
        for node in self.nodes.values():
            self._start(node)

    # --- the event loop -----------------------------------------------------------------------
    def at(self, time: float, action: Callable[[], object]) -> None:
        heapq.heappush(self._queue, _Event(time, next(self._seq), action))

    def run_until(self, end: float) -> None:
        while self._queue and self._queue[0].time <= end:
            event = heapq.heappop(self._queue)
            self.now = event.time
            self.step += 1
            event.action()
            self.check_safety()
        self.now = end

    def fail(self, what: str) -> SafetyViolation:
        return SafetyViolation(
            f"seed {self.seed}, step {self.step}, t={self.now:.1f}ms: {what} "
            f"(rerun: RAFT_SIM_SEED={self.seed} pytest tests/raft/test_simulation.py -k random_faults)")

    # --- nodes --------------------------------------------------------------------------------
    def _start(self, node: Node) -> None:
        node.incarnation += 1
        node.last_committed = -1
        rng = random.Random(f"{self.seed}/{node.node_id}/{node.incarnation}")
        node.core = RaftCore(node.node_id, self._config_of(node.node_id), node.log, node.persisted, rng,
                             node.local(self.now))
        node.core.tick(node.local(self.now))
        node.replica = ControllerReplica(self._controller_from_log(node), node.log, f"node {node.node_id}")
        # The server's own listener of the quorum's events; its slices of replay are events
        # here, so that other messages land between them as they do on the server's loop.
        node.lifecycle = ControllerLifecycle(node.replica, partial(self._later, node), lambda: BOOTSTRAP,
                                             partial(self._activated, node), slice_bytes=1)
        # The server's own driver of the core's outputs, with this network and disk as its I/O.
        node.driver = QuorumDriver(_NodeIO(self, node), self._events(node))
        self._drain(node)

    def _config_of(self, node_id: int) -> QuorumConfig:
        identity = replace(self.config, directory_id=directory(node_id), listener_name=LISTENER,
                           endpoints=voter_node(node_id).endpoints)
        if not self.dynamic:
            return identity
        # Bootstrap servers (ids -2, -3, ... in the core) are the initial voters.
        return replace(identity, bootstrap_servers=tuple(("127.0.0.1", 9000 + v) for v in self.initial_voters))

    def _controller_from_log(self, node: Node) -> QuorumController:
        controller = new_controller(node.node_id, node.log.snapshot_data)
        if node.log.latest_snapshot is not None:
            controller.offsets.skip_to(node.log.latest_snapshot[0])
        return controller

    def call(self, node: Node, action: Callable[[RaftCore, int], object]) -> object:
        """Run one input on a live node and carry out its outputs."""
        assert node.core is not None
        result = action(node.core, node.local(self.now))
        self._drain(node)
        return result

    def _drain(self, node: Node) -> None:
        core = node.core
        assert core is not None
        outputs = core.take_outputs()
        crash_at = None
        if self.faults.crash_mid_outputs and outputs and self.rng.random() < 0.01:
            crash_at = self.rng.randrange(len(outputs))
        for i, output in enumerate(outputs):
            if i == crash_at:
                self.crash(node)
                return
            if isinstance(output, Committed):
                self._check_commit_order(node, output.last_offset)
            assert node.driver is not None
            node.driver.perform(output)
        self._schedule_tick(node)

    # --- the quorum's events, as the server's controller shell takes them --------------------------
    def _events(self, node: Node) -> QuorumEvents:
        def lifecycle() -> ControllerLifecycle:
            assert node.lifecycle is not None
            return node.lifecycle

        def committed(last_offset: int) -> None:
            self._on_committed(node, last_offset)
            lifecycle().committed(last_offset)

        def became_leader(epoch: int, epoch_start_offset: int) -> None:
            self._note_leader(epoch, node.node_id)
            self.client_target = node.node_id
            lifecycle().became_leader()

        return QuorumEvents(
            committed=committed, became_leader=became_leader,
            lost_leadership=lambda epoch: lifecycle().lost_leadership(node.last_committed),
            leader_changed=self._note_leader,
            snapshot_installed=lambda end_offset, epoch: lifecycle().installed(self._controller_from_log(node)),
            control_appended=lambda base_offset, messages: lifecycle().control_appended(base_offset, messages))

    def _later(self, node: Node, work: Callable[[], None]) -> None:
        """Work of the node's controller, run as an event of its own, unless the node crashed
        or restarted meanwhile."""
        incarnation = node.incarnation

        def run() -> None:
            if node.incarnation == incarnation and node.core is not None:
                work()
        self.at(self.now, run)

    def _activated(self, node: Node, writes: list[Applied]) -> None:
        for applied in writes:
            self._queue_proposal(node, applied.records, applied.base_offset)

    def write(self, node: Node, records: list[VersionedRecord]) -> None:
        """The active controller of ``node`` applies ``records`` as one command's, and they go
        to the quorum as the server's shell sends them (a kraft.version upgrade goes this way
        too: its quorum records are the controller's to write)."""
        assert node.replica is not None and node.replica.active
        applied = node.replica.controller.apply(ControllerResult(records))
        self._queue_proposal(node, applied.records, applied.base_offset)

    def _queue_proposal(self, node: Node, records: list[VersionedRecord], base_offset: int) -> None:
        """As the server's shell (``QuorumReplication.submit``): the records are prepared at
        once, at the offsets the controller gave them, and appended at the core's next step,
        with whatever else this turn prepares."""
        if not records:
            return
        assert node.core is not None
        try:
            node.core.prepare_append(encode_batches(records, base_offset, node.core.epoch, 0), node.local(self.now))
        except NotLeader:
            return  # leadership went meanwhile: the replica undoes these records
        incarnation = node.incarnation
        self.at(self.now, lambda: node.core is not None and node.incarnation == incarnation
                and self.call(node, lambda core, now: core.tick(now)))

    def _schedule_tick(self, node: Node) -> None:
        core = node.core
        assert core is not None
        node.tick_generation += 1
        generation = node.tick_generation
        # At least a millisecond on: a deadline already due would spin at one instant.
        when = max(node.global_time(core.next_deadline()), self.now + 1.0)

        def tick() -> None:
            if node.core is not None and node.tick_generation == generation:
                self.call(node, lambda core, now: core.tick(now))
        self.at(when, tick)

    def crash(self, node: Node) -> None:
        """The process dies: the quorum-state file is as last persisted; the log keeps its
        flushed part and, as the operating system wrote it or not, some of the rest."""
        if node.core is None:
            return
        node.core = None
        node.replica = None
        node.lifecycle = None
        node.driver = None
        unflushed = sum(1 for b in node.log.batches if b.last_offset >= node.log.flushed_offset)
        keep = self.rng.choice([0, 0, unflushed, self.rng.randint(0, unflushed)])
        node.log.lose_unflushed(keep)

    def restart(self, node: Node) -> None:
        if node.core is None:
            self._start(node)

    # --- network ------------------------------------------------------------------------------
    def _send(self, source: int, destination: int, deliver: Callable[[], None]) -> None:
        copies = 2 if self.rng.random() < self.faults.duplication else 1
        for _ in range(copies):
            if self.rng.random() < self.faults.loss:
                continue
            self.at(self.now + self.rng.uniform(0.1, self.faults.max_delay_ms), deliver)

    def _reachable(self, source: int, destination: int) -> bool:
        return frozenset((source, destination)) not in self.cut

    def _deliver_request(self, source: int, destination: int, correlation_id: int,
                         message: Message) -> Callable[[], None]:
        asker = (source, self.nodes[source].incarnation if source in self.nodes else 0, correlation_id, destination)
        if destination <= -2:
            destination = -1 - destination  # a bootstrap server: an initial voter

        def deliver() -> None:
            if (source, type(message)) in self.dropping:
                return
            node = self.nodes[destination]
            if node.core is not None and self._reachable(source, destination) and isinstance(message,
                                                                                              ApiVersionsRequest):
                # The shell answers ApiVersions, not the core: every node here runs this version.
                low, high = self.kraft_versions.get(destination, (SUPPORTED_KRAFT_VERSIONS[0],
                                                                  SUPPORTED_KRAFT_VERSIONS[-1]))
                features = [SupportedFeatureKey(name="kraft.version", min_version=low, max_version=high)]
                answer = ApiVersionsResponse(supported_features=features)
                connection = next(self._connections)
                self._askers[connection] = asker
                self._send(destination, source, self._deliver_response(destination, connection, answer))
            elif node.core is not None and self._reachable(source, destination):
                # The receiver answers on the connection the request came in on: a response
                # never reaches a later run of the asker (see _deliver_response).
                connection = next(self._connections)
                self._askers[connection] = asker
                self.call(node, lambda core, now: core.receive_request(source, connection, message, now))
        return deliver

    def _deliver_response(self, source: int, connection: int, message: Message) -> Callable[[], None]:
        destination, incarnation, correlation_id, asked = self._askers.pop(connection)

        def deliver() -> None:
            if destination == CLIENT:
                self.client_answers[correlation_id] = message
                return
            node = self.nodes[destination]
            if node.core is not None and node.incarnation == incarnation and self._reachable(source, destination):
                self.call(node, lambda core, now: core.receive_response(asked, correlation_id, message, now))
        return deliver

    def partition(self, group: set[int]) -> None:
        """Cut ``group`` off from every other node."""
        self.cut = {frozenset((a, b)) for a in group for b in self.nodes if b not in group}

    def cut_links(self, links: set[frozenset[int]]) -> None:
        """Cut only these pairs: a partial partition, where A hears B and B hears C but A
        does not hear C."""
        self.cut = set(links)

    def heal(self) -> None:
        self.cut = set()

    # --- the clients ----------------------------------------------------------------------------
    def ask(self, node_id: int, message: Message) -> int:
        """An admin client's request to ``node_id`` (AddRaftVoter, RemoveRaftVoter); its answer
        lands in ``client_answers`` under the number returned, unless the network loses it."""
        number = next(self._client_asks)
        self._send(CLIENT, node_id, self._deliver_request(CLIENT, node_id, number, message))
        return number

    def propose(self) -> bool:
        """A client command to the node it believes active: a config change, applied by that
        node's controller and proposed with everything else applied in this turn."""
        node = self.nodes[self.client_target]
        payload = f"{self.seed}:{len(self.proposed)}"
        if node.core is not None:
            replica = node.replica
            if replica is not None and replica.active and node.core.is_leader:
                self.write(node, [(ConfigRecord(resource_type=4, resource_name="", name=f"sim.{len(self.proposed) % 7}",
                                                value=payload), 0)])
                self.proposed.append(payload.encode())
                return True
            if node.core.leader_id in self.nodes and node.core.leader_id != node.node_id:
                self.client_target = node.core.leader_id
                return False
        self.client_target = self.rng.choice(sorted(self.nodes))
        return False

    # --- safety -------------------------------------------------------------------------------
    def _note_leader(self, epoch: int, leader_id: int) -> None:
        if leader_id < 0:
            return
        known = self.leader_of_epoch.setdefault(epoch, leader_id)
        if known != leader_id:
            raise self.fail(f"two leaders in epoch {epoch}: {known} and {leader_id}")

    def _committed_index(self, node: Node) -> int:
        """Where the node's log starts in the committed log: its snapshot holds the rest."""
        start = node.log.start_offset
        i = bisect_left(self.committed_ends, start)
        if start and (i == len(self.committed_ends) or self.committed_ends[i] != start):
            raise self.fail(f"node {node.node_id}'s log starts at {start}, not at the end of a committed batch")
        return i + 1 if start else 0

    def check_controllers(self) -> None:
        """Every live voter's controller holds what replaying the committed log gives, once
        it has replayed (or, leading, applied) everything committed and nothing more."""
        expected = new_controller(0)
        loader = MetadataLoader(expected)
        for batch in self.committed:
            loader.raw_batch(batch, 0, "the committed log")
        want = controller_state(expected)
        for node in self.nodes.values():
            if node.replica is None:
                continue
            controller = node.replica.controller
            if controller.next_offset != self.committed_end:
                raise self.fail(f"node {node.node_id}'s controller is at offset {controller.next_offset}, "
                                f"the committed log ends at {self.committed_end}")
            if controller_state(controller) != want:
                raise self.fail(f"node {node.node_id}'s controller state differs from replaying the committed log")

    def _check_snapshot(self, snapshot: tuple[int, int], data: bytes) -> None:
        batches = split_batches(data)
        if batches != self.committed[:len(batches)] or self.committed_ends[len(batches) - 1] != snapshot[0]:
            raise self.fail(f"a snapshot ending at {snapshot[0]} is not the committed log up to there")

    def _check_commit_order(self, node: Node, last_offset: int) -> None:
        """Every commit the core reports moves its high watermark on, within one run of it."""
        if last_offset <= node.last_committed:
            raise self.fail(f"node {node.node_id}'s high watermark went back from "
                            f"{node.last_committed + 1} to {last_offset + 1}")

    def _on_committed(self, node: Node, last_offset: int) -> None:
        node.last_committed = last_offset
        if node.log.end_offset <= last_offset:
            raise self.fail(f"node {node.node_id} reports offset {last_offset} committed "
                            f"but its log ends at {node.log.end_offset}")
        first = self._committed_index(node)
        for i, stored in enumerate(node.log.batches, first):
            if stored.base_offset > last_offset:
                break
            if i < len(self.committed):
                if self.committed[i] != stored.data:
                    raise self.fail(f"node {node.node_id} committed a different batch at offset "
                                    f"{stored.base_offset} than was committed before")
            else:
                self.committed.append(stored.data)
                self.committed_ends.append(stored.last_offset + 1)
                self.committed_end = stored.last_offset + 1
                for _, record in quorum_messages(stored.data):
                    if record.NAME == "VotersRecord":
                        self.smallest_voter_set = min(self.smallest_voter_set, len(VoterSet.from_record(record).ids))
        assert node.core is not None
        epoch = node.core.epoch
        self.commit_epochs[epoch] = max(self.commit_epochs.get(epoch, 0), last_offset + 1)

    def check_safety(self) -> None:
        majority = self.smallest_voter_set // 2 + 1
        durable = 0
        for node in self.nodes.values():
            log = node.log
            batches = log.batches
            first = self._committed_index(node)
            reach = min(len(batches), len(self.committed) - first)
            while log.verified < reach and batches[log.verified].data == self.committed[first + log.verified]:
                log.verified += 1
            agreed = first + log.verified  # committed batches this log (with its snapshot) holds
            agreed_end = self.committed_ends[agreed - 1] if agreed else 0
            # A log may still hold a stale uncommitted tail where the committed log has other
            # batches (it is truncated on its next fetch), but never below its own high
            # watermark, and a leader never.
            core = node.core
            if log.verified < reach and core is not None and core.high_watermark > agreed_end:
                raise self.fail(f"node {node.node_id} has offset {agreed_end} below its high watermark "
                                f"{core.high_watermark} different from the committed log")
            if agreed == len(self.committed) and log.flushed_offset >= self.committed_end:
                durable += 1
            if core is not None and core.is_leader:
                self._note_leader(core.epoch, node.node_id)
                needed = max((end for epoch, end in self.commit_epochs.items() if epoch < core.epoch), default=0)
                if agreed_end < min(needed, self.committed_end):
                    raise self.fail(f"leader {node.node_id} of epoch {core.epoch} lacks committed records: "
                                    f"its log agrees with the committed log up to {agreed_end}, "
                                    f"{needed} were committed before its epoch")
        if self.committed and durable < majority:
            raise self.fail(f"only {durable} voters hold the committed log durably, fewer than a majority")

    def snapshot(self, node: Node) -> None:
        """The node's controller snapshots what it has applied (up to its high watermark) and
        the log drops the records the snapshot holds."""
        core = node.core
        if core is None:
            return
        ends = [b.last_offset + 1 for b in node.log.batches if b.last_offset < core.high_watermark]
        if ends:
            node.log.take_snapshot(self.rng.choice(ends))

    # --- liveness helpers ---------------------------------------------------------------------
    def stable_leader(self) -> int | None:
        """The leader every live node follows in its epoch, if there is one."""
        live = [n.core for n in self.nodes.values() if n.core is not None]
        leaders = {c.node_id for c in live if c.is_leader}
        if len(leaders) != 1:
            return None
        leader = next(iter(leaders))
        epoch = self.nodes[leader].core.epoch  # type: ignore[union-attr]
        if all(c.epoch == epoch and c.leader_id == leader for c in live):
            return leader
        return None


# --- the randomised scenario ----------------------------------------------------------------------

# Bounds for liveness once the network is stable and every node is up. A leader: a fetch
# timeout for followers to give up on a dead leader, 1.5 of them for a cut-off leader to
# resign, then pre-vote and vote rounds of up to two election timeouts each, several times
# over for split votes and skewed clocks.
ELECTION_BOUND_MS = 30_000
COMMIT_BOUND_MS = 5_000
SETTLE_MS = 5_000


def run_random_scenario(seed: int) -> Simulation:
    """Chaos for a few simulated seconds, then a stable network in which a leader must be
    elected and a write committed within the bounds."""
    plan = random.Random(f"{seed}/plan")
    faults = Faults.random(plan)
    # One voter is a quorum of one: the same core, with crashes, snapshots and shutdowns.
    voters = plan.choice([1, 3, 5])
    # Short timeouts against slow links make elections collide and time out more often.
    election_ms = plan.choice([150, 400, 1000])
    config = QuorumConfig(voters=tuple(range(1, voters + 1)), cluster_id="sim", election_timeout_ms=election_ms,
                          fetch_timeout_ms=election_ms * plan.choice([2, 3]),
                          request_timeout_ms=plan.choice([election_ms, 2_000]),
                          fetch_max_wait_ms=min(500, election_ms // 2))
    sim = Simulation(seed, voters, faults, config)
    chaos_end = plan.uniform(3_000, 10_000)
    ids = sorted(sim.nodes)

    t = 0.0
    while t < chaos_end:
        t += plan.uniform(10, 200)
        sim.at(t, sim.propose)
    if faults.partitions and voters > 1:
        t = plan.uniform(0, 2_000)
        while t < chaos_end:
            if plan.random() < 0.7:
                group = set(plan.sample(ids, plan.randint(1, len(ids) // 2)))
                sim.at(t, partial(sim.partition, group))
            else:
                pairs = [frozenset(pair) for pair in itertools.combinations(ids, 2)]
                sim.at(t, partial(sim.cut_links, set(plan.sample(pairs, plan.randint(1, len(pairs) // 2)))))
            t += plan.uniform(200, 4_000)
            sim.at(t, sim.heal)
            t += plan.uniform(0, 2_000)
    if faults.crashes or faults.crash_mid_outputs:
        t = plan.uniform(0, 2_000)
        while t < chaos_end:
            node = sim.nodes[plan.choice(ids)]
            sim.at(t, partial(sim.crash, node))
            t += plan.uniform(0, 3_000)
            sim.at(t, partial(sim.restart, node))
            t += plan.uniform(0, 2_000)
    if faults.snapshots:
        t = 0.0
        while t < chaos_end:
            t += plan.uniform(200, 2_000)
            sim.at(t, partial(sim.snapshot, sim.nodes[plan.choice(ids)]))
    if faults.shutdowns:
        t = plan.uniform(0, chaos_end)
        node = sim.nodes[plan.choice(ids)]
        sim.at(t, lambda: node.core is not None and sim.call(node, lambda core, now: core.begin_shutdown(now)))
        stopped = t + plan.uniform(100, 3_000)
        sim.at(stopped, lambda: sim.crash(node))
        if voters == 1:
            # Nobody else can take over: it must come back, even after the chaos.
            sim.at(stopped + plan.uniform(0, 1_000), lambda: sim.restart(node))
    sim.run_until(chaos_end)

    sim.faults = Faults(max_delay_ms=5.0)
    sim.heal()
    for node in sim.nodes.values():
        if node.core is not None and node.core.shutting_down:
            sim.crash(node)
        sim.restart(node)
    await_leader(sim, ELECTION_BOUND_MS)
    await_write(sim, COMMIT_BOUND_MS)
    await_controllers(sim, SETTLE_MS)
    return sim


def await_controllers(sim: Simulation, bound_ms: float) -> None:
    """Until every live voter has heard of the last commit (a follower learns it with its
    next fetch), then compare their controllers with the committed log."""
    deadline = sim.now + bound_ms
    while sim.now < deadline:
        live = [n.replica for n in sim.nodes.values() if n.replica is not None]
        if all(r.controller.next_offset == sim.committed_end for r in live):
            break
        sim.run_until(sim.now + 50)
    sim.check_controllers()


def await_leader(sim: Simulation, bound_ms: float) -> int:
    deadline = sim.now + bound_ms
    while sim.now < deadline:
        sim.run_until(sim.now + 50)
        leader = sim.stable_leader()
        if leader is not None:
            return leader
    raise sim.fail(f"no leader that every node follows within {bound_ms:.0f}ms of a stable network")


def await_write(sim: Simulation, bound_ms: float) -> None:
    deadline = sim.now + bound_ms
    start = len(sim.committed)
    while sim.now < deadline:
        sim.propose()
        sim.run_until(sim.now + 50)
        if len(sim.committed) > start and any(p in b for b in sim.committed[start:] for p in sim.proposed[-3:]):
            return
    raise sim.fail(f"no write committed within {bound_ms:.0f}ms of a stable network with a leader")
