"""The one voter change in flight at the leader (``Leader.change``): what every handler of
AddRaftVoter and RemoveRaftVoter shares, from the checks a request meets before it may start
to the answer once its VotersRecord commits, times out or leadership goes."""

from __future__ import annotations

from typing import Callable, Protocol

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.add_raft_voter_response import AddRaftVoterResponse
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.generated.messages.remove_raft_voter_response import RemoveRaftVoterResponse
from protocol.message import Message
from protocol.primitives import ZERO_UUID
from server.raft.outbox import Outbox
from server.raft.quorum_config import QuorumConfig
from server.raft.state import ChangeKind, EpochState, Leader, VoterChange
from server.raft.types import ReplicaKey
from server.raft.voters import KRAFT_VERSION_DYNAMIC, VoterHistory, VoterSet

KRAFT_VERSION_FEATURE = "kraft.version"

Reply = Callable[[int, "str | None"], None]


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


def replier(host: MembershipHost, source: int, correlation_id: int, kind: ChangeKind) -> Reply:
    """How an AddRaftVoter or RemoveRaftVoter request is answered."""
    cls: type[AddRaftVoterResponse] | type[RemoveRaftVoterResponse]
    cls = AddRaftVoterResponse if kind is ChangeKind.ADD else RemoveRaftVoterResponse

    def reply(error: int, text: str | None) -> None:
        host.respond(source, correlation_id, cls(error_code=error, error_message=text))
    return reply


def admitted(host: MembershipHost, source: int, message: AddRaftVoterRequest | RemoveRaftVoterRequest,
             reply: Reply, doing: str, now: int) -> tuple[Leader, ReplicaKey] | None:
    """The leader's state and the voter key, if the request may start a change now; else it
    is answered here, with the first of Kafka's checks it fails."""
    if not host.cluster_id_matches(source, message.cluster_id, message.NAME):
        reply(Error.INCONSISTENT_CLUSTER_ID, f"The given id \"{message.cluster_id}\" doesn't match the "
                                             f"cluster id \"{host.config.cluster_id}\"")
        return None
    state = host.state
    if not isinstance(state, Leader) or state.resign_requested or host.shutting_down:
        reply(Error.NOT_LEADER_OR_FOLLOWER, None)
        return None
    key = ReplicaKey(message.voter_id, message.voter_directory_id)
    if key.id < 0 or key.directory_id == ZERO_UUID:
        reply(Error.INVALID_REQUEST, f"{message.NAME} request didn't include a valid voter")
        return None
    if isinstance(message, AddRaftVoterRequest) and not any(
            listener.name == host.config.listener_name for listener in message.listeners):
        reply(Error.INVALID_REQUEST, f"Add voter request didn't include the endpoint for the default "
                                     f"listener {host.config.listener_name}")
        return None
    problem = not_now(host, state, now, doing)
    if problem is not None:
        reply(*problem)
        return None
    return state, key


def not_now(host: MembershipHost, state: Leader, now: int, doing: str) -> tuple[int, str] | None:
    """Why no voter change can start now, as Kafka's handlers check it, or None."""
    expire(host, state, now)
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


def write(host: MembershipHost, state: Leader, change: VoterChange, voters: VoterSet, now: int) -> None:
    """The leader appends the new voter set itself, as Kafka's does; the change is answered
    once it commits."""
    if state.resign_requested or host.shutting_down:
        finish(host, state, Error.NOT_LEADER_OR_FOLLOWER, None)
        return
    change.voters = voters
    change.last_offset = host.append_control([voters.to_record()], now)


def expire(host: MembershipHost, state: Leader, now: int) -> None:
    change = state.change
    if change is not None and now >= change.deadline:
        finish(host, state, Error.REQUEST_TIMED_OUT, "Request timed out waiting for the voter change to commit")


def finish(host: MembershipHost, state: Leader, error: int, text: str | None) -> None:
    change = state.change
    assert change is not None
    state.change = None
    replier(host, change.source, change.correlation_id, change.kind)(error, text)
