"""What the Raft core calls of voter changes: each request to its handler, the new voter's
ApiVersions answer, and the leader's poll, commits and loss of leadership, which move the
pending change (``pending``)."""

from __future__ import annotations

from protocol.error_codes import Error
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.generated.messages.update_raft_voter_request import UpdateRaftVoterRequest
from protocol.message import Message
from server.raft.reconfig import add_voter, remove_voter, update_voter
from server.raft.reconfig.kraft_upgrade import kraft_upgrade
from server.raft.reconfig.pending import MembershipHost, expire, finish
from server.raft.state import Leader


class Membership:
    def __init__(self, host: MembershipHost) -> None:
        self.host = host

    def receive_request(self, source: int, correlation_id: int, message: Message, now: int) -> None:
        if isinstance(message, AddRaftVoterRequest):
            add_voter.receive(self.host, source, correlation_id, message, now)
        elif isinstance(message, RemoveRaftVoterRequest):
            remove_voter.receive(self.host, source, correlation_id, message, now)
        elif isinstance(message, UpdateRaftVoterRequest):
            update_voter.receive(self.host, source, correlation_id, message, now)
        else:
            raise ValueError(f"not a voter change: {message.NAME}")

    def on_api_versions(self, source: int, response: ApiVersionsResponse, now: int) -> None:
        add_voter.on_api_versions(self.host, source, response, now)

    def kraft_upgrade(self, level: int) -> tuple[int, str | None, list[Message]]:
        return kraft_upgrade(self.host, level)

    def committed(self, state: Leader, now: int) -> None:
        """The high watermark moved: a change whose record it passed is done."""
        change = state.change
        if change is None or change.last_offset is None or self.host.high_watermark <= change.last_offset:
            return
        finish(self.host, state, Error.NONE, None)
        if not self.host.is_voter:
            # Removed itself: it led until the change committed, and now hands over.
            state.resign_requested = True

    def poll(self, state: Leader, now: int) -> None:
        expire(self.host, state, now)
        add_voter.poll(self.host, state)

    def leadership_lost(self, state: Leader) -> None:
        if state.change is not None:
            finish(self.host, state, Error.NOT_LEADER_OR_FOLLOWER, None)
