"""RemoveRaftVoter at the leader: the voter set without the voter is appended at once, and the
answer waits for it to commit. A leader that removes itself leads until then, and resigns
(``membership.Membership.committed``)."""

from __future__ import annotations

from protocol.error_codes import Error
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from server.raft.reconfig.pending import MembershipHost, admitted, replier, write
from server.raft.state import ChangeKind, VoterChange


def receive(host: MembershipHost, source: int, correlation_id: int, message: RemoveRaftVoterRequest,
            now: int) -> None:
    reply = replier(host, source, correlation_id, ChangeKind.REMOVE)
    found = admitted(host, source, message, reply, "removing", now)
    if found is None:
        return
    state, key = found
    voters = host.voter_set
    removed = voters.remove(key)
    if removed is None:
        reply(Error.VOTER_NOT_FOUND, f"Cannot remove voter {key} from the set of voters {voters.describe()}")
        return
    change = VoterChange(ChangeKind.REMOVE, source, correlation_id, now + host.config.request_timeout_ms, key)
    state.change = change
    write(host, state, change, removed, now)
