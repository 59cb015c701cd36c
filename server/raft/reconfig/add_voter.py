"""AddRaftVoter at the leader: the new voter is asked for its ApiVersions (its kraft.version
range must hold the cluster's) and must be a caught-up observer of this log; then the leader
appends the voter set with it, and the answer waits for that record to commit."""

from __future__ import annotations

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from server.raft.reconfig.pending import (
    KRAFT_VERSION_FEATURE, MembershipHost, admitted, finish, replier, write)
from server.raft.state import ChangeKind, Leader, VoterChange
from server.raft.voters import VoterNode

# Kafka counts an observer as caught up for AddRaftVoter if it fetched from the leader's log
# end and fetched at all within the last hour.
CAUGHT_UP_WINDOW_MS = 3_600_000


def receive(host: MembershipHost, source: int, correlation_id: int, message: AddRaftVoterRequest,
            now: int) -> None:
    reply = replier(host, source, correlation_id, ChangeKind.ADD)
    found = admitted(host, source, message, reply, "adding", now)
    if found is None:
        return
    state, key = found
    voters = host.voter_set
    if key.id in voters.ids:
        reply(Error.DUPLICATE_VOTER, f"The voter id for {key} is already part of the set of voters "
                                     f"{voters.describe()}.")
        return
    endpoints = tuple((listener.name, listener.host, listener.port) for listener in message.listeners)
    timeout = message.timeout_ms if message.timeout_ms > 0 else host.config.request_timeout_ms
    state.change = VoterChange(ChangeKind.ADD, source, correlation_id, now + timeout, key, endpoints)
    host_port = next((h, p) for n, h, p in endpoints if n == host.config.listener_name)
    host.send_api_versions(key.id, host_port, now)


def on_api_versions(host: MembershipHost, source: int, response: ApiVersionsResponse, now: int) -> None:
    """The new voter's ApiVersions answer: the change goes on to its record, or fails."""
    state = host.state
    if not isinstance(state, Leader) or state.change is None or state.change.last_offset is not None:
        return
    change = state.change
    if change.key.id != source:
        return
    if response.error_code != Error.NONE:
        finish(host, state, Error.REQUEST_TIMED_OUT, f"Aborted add voter operation since API_VERSIONS returned "
                                                     f"an error {response.error_code}")
        return
    level = host.history.kraft_version
    supported = next((f for f in response.supported_features if f.name == KRAFT_VERSION_FEATURE), None)
    if supported is None or not supported.min_version <= level <= supported.max_version:
        shown = f"(min: {supported.min_version}, max: {supported.max_version})" if supported else "(min: 0, max: 0)"
        finish(host, state, Error.INVALID_REQUEST, f"Aborted add voter operation for {change.key} since the "
                                                   f"{KRAFT_VERSION_FEATURE} range {shown} doesn't support the "
                                                   f"finalized version {level}")
        return
    progress = state.replicas.get(change.key.id)
    caught_up = progress is not None and progress.directory_id == change.key.directory_id \
        and progress.last_caught_up_ms > 0 and progress.last_fetch_ms > now - CAUGHT_UP_WINDOW_MS
    if not caught_up:
        finish(host, state, Error.REQUEST_TIMED_OUT, f"Aborted add voter operation for {change.key} since it is "
                                                     f"lagging behind")
        return
    added = host.voter_set.add(VoterNode(change.key, change.endpoints, (supported.min_version,
                                                                        supported.max_version)))
    assert added is not None  # checked when the request came, and no other change since
    write(host, state, change, added, now)


def poll(host: MembershipHost, state: Leader) -> None:
    """A new voter whose ApiVersions failed or went unanswered: Kafka gives up at once too."""
    change = state.change
    if change is not None and change.voters is None and change.kind is ChangeKind.ADD \
            and not host.outbox.busy(change.key.id):
        finish(host, state, Error.REQUEST_TIMED_OUT, f"New voter {change.key} is not ready to receive requests")
