"""Changing the voters (KIP-853): AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter at the leader.

Kafka's checks, in Kafka's order and with its error codes: the request must be of this cluster
and reach the leader; a voter key needs a directory id and the leader's listener; only one
change is in flight; the leader must have committed in its epoch and the last voter change
must be committed; the quorum must run kraft.version 1. A new voter is asked for its ApiVersions
(its kraft.version range must hold the cluster's) and must be a caught-up observer; then a
VotersRecord with the new set is appended and the answer waits for it to commit. A leader that
removes itself leads until that record commits, then resigns. UpdateRaftVoter is answered at
once, as Kafka does.
"""

from __future__ import annotations

from typing import Callable, Protocol

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.add_raft_voter_response import AddRaftVoterResponse
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.generated.messages.remove_raft_voter_response import RemoveRaftVoterResponse
from protocol.generated.messages.update_raft_voter_request import UpdateRaftVoterRequest
from protocol.generated.messages.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse
from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.message import Message
from protocol.primitives import ZERO_UUID
from server.raft.outbox import Outbox
from server.raft.quorum_config import QuorumConfig
from server.raft.state import ChangeKind, EpochState, Leader, VoterChange
from server.raft.voters import KRAFT_VERSION_DYNAMIC, SUPPORTED_KRAFT_VERSIONS, VoterHistory, VoterNode, VoterSet
from server.raft.types import ReplicaKey


class MembershipHost(Protocol):
    """What the voter-change handlers read and do of the Raft core that hosts them: the
    quorum as it stands, answering, and the leader's own writes and requests."""

    node_id: int
    local_key: ReplicaKey
    config: QuorumConfig
    history: VoterHistory
    high_watermark: int
    shutting_down: bool
    outbox: Outbox

    @property
    def state(self) -> EpochState: ...
    @property
    def epoch(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def voter_set(self) -> VoterSet: ...
    @property
    def voters(self) -> frozenset[int]: ...
    @property
    def is_voter(self) -> bool: ...

    def respond(self, destination: int, correlation_id: int, message: Message) -> None: ...
    def cluster_id_matches(self, source: int, cluster_id: str | None, api: str) -> bool: ...
    def leader_error(self, request_epoch: int) -> int: ...
    def address_of(self, node_id: int) -> tuple[str, int] | None: ...
    def send_api_versions(self, node_id: int, address: tuple[str, int], now: int) -> None: ...
    def append_control(self, messages: list[Message], now: int) -> int: ...

KRAFT_VERSION_FEATURE = "kraft.version"
# Kafka counts an observer as caught up for AddRaftVoter if it fetched from the leader's log
# end and fetched at all within the last hour.
CAUGHT_UP_WINDOW_MS = 3_600_000


class Membership:
    def __init__(self, host: MembershipHost) -> None:
        self.host = host

    # --- requests ------------------------------------------------------------------------------
    def receive_request(self, source: int, correlation_id: int, message: Message, now: int) -> None:
        host = self.host
        if isinstance(message, UpdateRaftVoterRequest):
            self._update(source, correlation_id, message, now)
            return
        assert isinstance(message, (AddRaftVoterRequest, RemoveRaftVoterRequest))
        reply = _replier(host, source, correlation_id,
                         ChangeKind.ADD if isinstance(message, AddRaftVoterRequest) else ChangeKind.REMOVE)
        if not host.cluster_id_matches(source, message.cluster_id, message.NAME):
            reply(Error.INCONSISTENT_CLUSTER_ID, f"The given id \"{message.cluster_id}\" doesn't match the "
                                                 f"cluster id \"{host.config.cluster_id}\"")
            return
        state = host.state
        if not isinstance(state, Leader) or state.resign_requested or host.shutting_down:
            reply(Error.NOT_LEADER_OR_FOLLOWER, None)
            return
        key = ReplicaKey(message.voter_id, message.voter_directory_id)
        if key.id < 0 or key.directory_id == ZERO_UUID:
            reply(Error.INVALID_REQUEST, f"{message.NAME} request didn't include a valid voter")
            return
        endpoints: tuple[tuple[str, str, int], ...] = ()
        if isinstance(message, AddRaftVoterRequest):
            endpoints = tuple((listener.name, listener.host, listener.port) for listener in message.listeners)
            if not any(name == host.config.listener_name for name, _, _ in endpoints):
                reply(Error.INVALID_REQUEST, f"Add voter request didn't include the endpoint for the default "
                                             f"listener {host.config.listener_name}")
                return
        problem = self._not_now(state, now, "adding" if endpoints else "removing")
        if problem is not None:
            reply(*problem)
            return
        voters = host.voter_set
        if isinstance(message, AddRaftVoterRequest):
            if key.id in voters.ids:
                reply(Error.DUPLICATE_VOTER, f"The voter id for {key} is already part of the set of voters "
                                             f"{voters.describe()}.")
                return
            timeout = message.timeout_ms if message.timeout_ms > 0 else host.config.request_timeout_ms
            state.change = VoterChange(ChangeKind.ADD, source, correlation_id, now + timeout, key, endpoints)
            host_port = next((h, p) for n, h, p in endpoints if n == host.config.listener_name)
            host.send_api_versions(key.id, host_port, now)
            return
        removed = voters.remove(key)
        if removed is None:
            reply(Error.VOTER_NOT_FOUND, f"Cannot remove voter {key} from the set of voters {voters.describe()}")
            return
        change = VoterChange(ChangeKind.REMOVE, source, correlation_id, now + host.config.request_timeout_ms, key)
        state.change = change
        self._write(state, change, removed, now)

    def _not_now(self, state: Leader, now: int, doing: str) -> tuple[int, str] | None:
        """Why no voter change can start now, as Kafka's handlers check it, or None."""
        host = self.host
        self._expire(state, now)
        if state.change is not None:
            return Error.REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle previous voter change request"
        if host.high_watermark <= state.epoch_start_offset:
            return Error.REQUEST_TIMED_OUT, ("Request timed out waiting for leader to establish HWM and fence "
                                             "previous voter changes")
        if host.history.kraft_version < KRAFT_VERSION_DYNAMIC:
            return Error.UNSUPPORTED_VERSION, (f"Cluster doesn't support {doing} voter because the "
                                               f"{KRAFT_VERSION_FEATURE} feature is {host.history.kraft_version}")
        last = host.history.latest_offset
        if last is not None and last >= host.high_watermark:
            return Error.REQUEST_TIMED_OUT, (f"Request timed out waiting for voters to commit the latest voter "
                                             f"change at {last} with HWM {host.high_watermark}")
        return None

    def _update(self, source: int, correlation_id: int, message: UpdateRaftVoterRequest, now: int) -> None:
        host = self.host

        def reply(error: int) -> None:
            address = host.address_of(host.leader_id)
            leader = CurrentLeader(leader_id=host.leader_id, leader_epoch=host.epoch,
                                   host=address[0] if address else "", port=address[1] if address else -1)
            host.respond(source, correlation_id, UpdateRaftVoterResponse(error_code=error, current_leader=leader))

        if not host.cluster_id_matches(source, message.cluster_id, message.NAME):
            reply(Error.INCONSISTENT_CLUSTER_ID)
            return
        error = host.leader_error(message.current_leader_epoch)
        state = host.state
        if error != Error.NONE or not isinstance(state, Leader):
            reply(error if error != Error.NONE else Error.NOT_LEADER_OR_FOLLOWER)
            return
        key = ReplicaKey(message.voter_id, message.voter_directory_id)
        endpoints = tuple((listener.name, listener.host, listener.port) for listener in message.listeners)
        versions = message.k_raft_version_feature
        if key.id < 0 or key.directory_id == ZERO_UUID \
                or not any(name == host.config.listener_name for name, _, _ in endpoints) \
                or versions.min_supported_version < 0 or versions.max_supported_version < versions.min_supported_version:
            reply(Error.INVALID_REQUEST)
            return
        level = host.history.kraft_version
        if level < KRAFT_VERSION_DYNAMIC:
            # A static quorum keeps what its voters say of themselves, for the upgrade to
            # kraft.version 1 (Kafka 4.1).
            if key.id not in host.voters:
                reply(Error.VOTER_NOT_FOUND)
                return
            state.learnt_voters[key.id] = VoterNode(key, endpoints, (versions.min_supported_version,
                                                                     versions.max_supported_version))
            reply(Error.NONE)
            return
        problem = self._not_now(state, now, "updating")
        if problem is not None:
            reply(problem[0])
            return
        if not versions.min_supported_version <= level <= versions.max_supported_version:
            reply(Error.INVALID_REQUEST)
            return
        updated = host.voter_set.update(VoterNode(key, endpoints, (versions.min_supported_version,
                                                                   versions.max_supported_version)))
        if updated is None:
            reply(Error.VOTER_NOT_FOUND)
            return
        host.append_control([updated.to_record()], now)
        reply(Error.NONE)

    # --- kraft.version 0 -> 1 ----------------------------------------------------------------
    def kraft_upgrade(self, level: int) -> tuple[int, str | None, list[Message]]:
        """The records that raise kraft.version to ``level`` (the voter set they start from, as
        the voters told it), or why it cannot be raised now."""
        host = self.host
        current = host.history.kraft_version
        if level == current:
            return Error.NONE, None, []
        if level < current:
            return Error.INVALID_UPDATE_VERSION, f"{KRAFT_VERSION_FEATURE} cannot go down from {current} to {level}", []
        state = host.state
        if not isinstance(state, Leader):
            return Error.NOT_CONTROLLER, None, []
        if level != KRAFT_VERSION_DYNAMIC:
            return Error.INVALID_UPDATE_VERSION, f"{KRAFT_VERSION_FEATURE} {level} is not supported", []
        nodes: list[VoterNode] = []
        for voter in sorted(host.voters):
            if voter == host.node_id:
                node = VoterNode(host.local_key, host.config.endpoints,
                                 (SUPPORTED_KRAFT_VERSIONS[0], SUPPORTED_KRAFT_VERSIONS[-1]))
            else:
                learnt = state.learnt_voters.get(voter)
                if learnt is None:
                    return Error.INVALID_UPDATE_VERSION, (
                        f"voter {voter} has not told the leader its directory id and listeners yet "
                        f"(UpdateRaftVoter); try again once every voter runs"), []
                node = learnt
            if node.key.directory_id == ZERO_UUID or not node.kraft_versions[0] <= level <= node.kraft_versions[1]:
                return Error.INVALID_UPDATE_VERSION, (f"voter {voter} does not support {KRAFT_VERSION_FEATURE} "
                                                      f"{level}"), []
            nodes.append(node)
        return Error.NONE, None, [KRaftVersionRecord(version=0, k_raft_version=level), VoterSet.of(nodes).to_record()]

    # --- the new voter's ApiVersions ------------------------------------------------------------
    def on_api_versions(self, source: int, response: ApiVersionsResponse, now: int) -> None:
        host = self.host
        state = host.state
        if not isinstance(state, Leader) or state.change is None or state.change.last_offset is not None:
            return
        change = state.change
        if change.key.id != source:
            return
        if response.error_code != Error.NONE:
            self._finish(state, Error.REQUEST_TIMED_OUT, f"Aborted add voter operation since API_VERSIONS returned "
                                                         f"an error {response.error_code}")
            return
        level = host.history.kraft_version
        supported = next((f for f in response.supported_features if f.name == KRAFT_VERSION_FEATURE), None)
        if supported is None or not supported.min_version <= level <= supported.max_version:
            shown = f"(min: {supported.min_version}, max: {supported.max_version})" if supported else "(min: 0, max: 0)"
            self._finish(state, Error.INVALID_REQUEST, f"Aborted add voter operation for {change.key} since the "
                                                       f"{KRAFT_VERSION_FEATURE} range {shown} doesn't support the "
                                                       f"finalized version {level}")
            return
        progress = state.replicas.get(change.key.id)
        caught_up = progress is not None and progress.directory_id == change.key.directory_id \
            and progress.last_caught_up_ms > 0 and progress.last_fetch_ms > now - CAUGHT_UP_WINDOW_MS
        if not caught_up:
            self._finish(state, Error.REQUEST_TIMED_OUT, f"Aborted add voter operation for {change.key} since it is "
                                                         f"lagging behind")
            return
        added = host.voter_set.add(VoterNode(change.key, change.endpoints, (supported.min_version,
                                                                            supported.max_version)))
        assert added is not None  # checked when the request came, and no other change since
        self._write(state, change, added, now)

    def _write(self, state: Leader, change: VoterChange, voters: VoterSet, now: int) -> None:
        """The leader appends the new voter set itself, as Kafka's does; the change is answered
        once it commits."""
        if state.resign_requested or self.host.shutting_down:
            self._finish(state, Error.NOT_LEADER_OR_FOLLOWER, None)
            return
        change.voters = voters
        change.last_offset = self.host.append_control([voters.to_record()], now)

    # --- the change committing, timing out, or leadership going ---------------------------------
    def committed(self, state: Leader, now: int) -> None:
        """The high watermark moved: a change whose record it passed is done."""
        change = state.change
        if change is None or change.last_offset is None or self.host.high_watermark <= change.last_offset:
            return
        self._finish(state, Error.NONE, None)
        if not self.host.is_voter:
            # Removed itself: it led until the change committed, and now hands over.
            state.resign_requested = True

    def poll(self, state: Leader, now: int) -> None:
        self._expire(state, now)
        change = state.change
        if change is not None and change.voters is None and change.kind is ChangeKind.ADD:
            if not self.host.outbox.busy(change.key.id):
                # Its ApiVersions failed or went unanswered: Kafka gives up at once too.
                self._finish(state, Error.REQUEST_TIMED_OUT, f"New voter {change.key} is not ready to receive "
                                                             f"requests")

    def _expire(self, state: Leader, now: int) -> None:
        change = state.change
        if change is not None and now >= change.deadline:
            self._finish(state, Error.REQUEST_TIMED_OUT, "Request timed out waiting for the voter change to commit")

    def leadership_lost(self, state: Leader) -> None:
        if state.change is not None:
            self._finish(state, Error.NOT_LEADER_OR_FOLLOWER, None)

    def _finish(self, state: Leader, error: int, text: str | None) -> None:
        change = state.change
        assert change is not None
        state.change = None
        _replier(self.host, change.source, change.correlation_id, change.kind)(error, text)


def _replier(host: MembershipHost, source: int, correlation_id: int, kind: ChangeKind) -> Callable[[int, str | None], None]:
    """How an AddRaftVoter or RemoveRaftVoter request is answered."""
    cls: type[AddRaftVoterResponse] | type[RemoveRaftVoterResponse]
    cls = AddRaftVoterResponse if kind is ChangeKind.ADD else RemoveRaftVoterResponse

    def reply(error: int, text: str | None) -> None:
        host.respond(source, correlation_id, cls(error_code=error, error_message=text))
    return reply

