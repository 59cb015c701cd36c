"""The outbound side of the quorum: one connection to each other voter (or bootstrap server),
over the controller listener's security protocol, with each API at a version both ends speak.

A peer that refuses this node's credentials is asked again only after a backoff and said once;
one whose authorizer refuses it (CLUSTER_AUTHORIZATION_FAILED) is said once too. A request the
peer cannot take at any version it serves fails as a lost connection does, except a pre-vote
to a voter too old for one (Vote before v2), which is answered UNSUPPORTED_VERSION here, as
Kafka's network client answers it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from protocol.api_keys import APIS
from protocol.error_codes import Error
from protocol.generated.messages.vote_request import VoteRequest
from protocol.generated.messages.vote_response import VoteResponse
from protocol.message import Message, api_key_of
from server.client_connection import AuthenticationError, ConnectionLost, KafkaConnection
from server.security.client import ClientSecurity

log = logging.getLogger("kraftwire.quorum")

# A voter that refused this one's credentials is asked again this often, not at every retry.
AUTHENTICATION_BACKOFF_S = 1.0
# The first VoteRequest version that can carry a pre-vote (KIP-996).
PRE_VOTE_VERSION = 2


def is_pre_vote(message: Message) -> bool:
    return isinstance(message, VoteRequest) and any(p.pre_vote for t in message.topics for p in t.partitions)


class VoterChannel:
    def __init__(self, node_id: int, security: ClientSecurity, request_timeout_s: float) -> None:
        self.node_id = node_id
        self.security = security
        self.request_timeout_s = request_timeout_s
        self._connections: dict[int, KafkaConnection] = {}
        self._addresses: dict[int, tuple[str, int]] = {}  # where each connection goes
        self._connecting: dict[int, asyncio.Lock] = {}
        # peer -> (the authentication failure last logged for it, monotonic s of that attempt)
        self._refused: dict[int, tuple[str, float]] = {}
        self._refused_by: set[int] = set()  # peers whose authorizer refused this one, said once

    async def exchange(self, destination: int, address: tuple[str, int] | None, message: Message) -> Message:
        """``message`` to ``destination`` at ``address``, and its answer; ConnectionLost (or
        OSError, asyncio.TimeoutError) when there is none."""
        key = api_key_of(message)
        if address is None:
            raise ConnectionLost(f"no address known for node {destination}")
        conn = await self._connection(destination, address)
        version = conn.version_for(key)
        if version is None:
            raise ConnectionLost(f"node {destination} serves no version of {APIS[key].name} that this one does")
        if version < PRE_VOTE_VERSION and is_pre_vote(message):
            return VoteResponse(error_code=Error.UNSUPPORTED_VERSION)
        response = await conn.request(message, version, self.request_timeout_s)
        if getattr(response, "error_code", Error.NONE) == Error.CLUSTER_AUTHORIZATION_FAILED:
            self._unauthorized(destination, APIS[key].name)
        return response

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close("shutting down")

    def _unauthorized(self, voter: int, api: str) -> None:
        """Said once per voter: the other voter's authorizer refuses this one (a voter needs
        CLUSTER_ACTION on the cluster), so it cannot take part until an ACL or super.users allows it."""
        if voter in self._refused_by:
            return
        self._refused_by.add(voter)
        who = f"User:{self.security.sasl_username}" if self.security.uses_sasl else "this voter's principal"
        log.error("voter %d refuses %s with CLUSTER_AUTHORIZATION_FAILED: %s needs CLUSTER_ACTION on the cluster "
                  "(super.users or an ACL)", voter, api, who)

    async def _connection(self, voter: int, address: tuple[str, int]) -> KafkaConnection:
        conn = self._connections.get(voter)
        if conn is not None and conn.is_open and self._addresses.get(voter) == address:
            return conn
        lock = self._connecting.setdefault(voter, asyncio.Lock())
        async with lock:
            conn = self._connections.get(voter)
            if conn is None or not conn.is_open or self._addresses.get(voter) != address:
                if conn is not None:
                    conn.close("the node moved")
                host, port = address
                refused = self._refused.get(voter)
                if refused is not None and time.monotonic() - refused[1] < AUTHENTICATION_BACKOFF_S:
                    raise AuthenticationError(refused[0])
                try:
                    conn = await KafkaConnection.open(host, port, f"kraftwire-voter-{self.node_id}",
                                                      self.request_timeout_s, self.security)
                    await conn.negotiate_versions(self.request_timeout_s)
                except AuthenticationError as exc:
                    # Retried, more slowly than a lost connection, and said once: until the
                    # settings change, this voter cannot take part through that peer.
                    if refused is None or refused[0] != str(exc):
                        log.error("cannot authenticate to voter %d at %s:%d over %s: %s",
                                  voter, host, port, self.security.protocol, exc)
                    self._refused[voter] = (str(exc), time.monotonic())
                    raise
                if self._refused.pop(voter, None) is not None:
                    log.info("authenticated to voter %d at %s:%d", voter, host, port)
                self._connections[voter] = conn
                self._addresses[voter] = address
            return conn
