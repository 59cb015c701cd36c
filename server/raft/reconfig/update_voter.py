"""UpdateRaftVoter at the leader: a voter records its own listeners and kraft.version range.
Answered at once, as Kafka does. Under kraft.version 0 the leader only keeps what each voter
said, which the upgrade to kraft.version 1 writes as the first voter set (``kraft_upgrade``)."""

from __future__ import annotations

from protocol.error_codes import Error
from protocol.generated.messages.update_raft_voter_request import UpdateRaftVoterRequest
from protocol.generated.messages.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse
from protocol.primitives import ZERO_UUID
from server.raft.reconfig.pending import MembershipHost, not_now
from server.raft.state import Leader
from server.raft.types import ReplicaKey
from server.raft.voters import KRAFT_VERSION_DYNAMIC, VoterNode


def receive(host: MembershipHost, source: int, correlation_id: int, message: UpdateRaftVoterRequest,
            now: int) -> None:
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
    node = VoterNode(key, endpoints, (versions.min_supported_version, versions.max_supported_version))
    level = host.history.kraft_version
    if level < KRAFT_VERSION_DYNAMIC:
        # A static quorum keeps what its voters say of themselves, for the upgrade to
        # kraft.version 1 (Kafka 4.1).
        if key.id not in host.voters:
            reply(Error.VOTER_NOT_FOUND)
            return
        state.learnt_voters[key.id] = node
        reply(Error.NONE)
        return
    problem = not_now(host, state, now, "updating")
    if problem is not None:
        reply(problem[0])
        return
    if not versions.min_supported_version <= level <= versions.max_supported_version:
        reply(Error.INVALID_REQUEST)
        return
    updated = host.voter_set.update(node)
    if updated is None:
        reply(Error.VOTER_NOT_FOUND)
        return
    host.append_control([updated.to_record()], now)
    reply(Error.NONE)
