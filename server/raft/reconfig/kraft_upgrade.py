"""Raising kraft.version from 0 to 1 (Kafka 4.1): the records that do it, the voter set they
start from being what each voter told the leader of itself (UpdateRaftVoter)."""

from __future__ import annotations

from protocol.error_codes import Error
from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.message import Message
from protocol.primitives import ZERO_UUID
from server.raft.reconfig.pending import KRAFT_VERSION_FEATURE, MembershipHost
from server.raft.state import Leader
from server.raft.voters import KRAFT_VERSION_DYNAMIC, SUPPORTED_KRAFT_VERSIONS, VoterNode, VoterSet


def kraft_upgrade(host: MembershipHost, level: int) -> tuple[int, str | None, list[Message]]:
    """The records that raise kraft.version to ``level``, or why it cannot be raised now."""
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
