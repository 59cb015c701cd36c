"""The quorum settings the Raft core runs by, under Kafka's QuorumConfig names."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.primitives import ZERO_UUID

# Kafka's defaults for the controller.quorum.* settings.
DEFAULT_ELECTION_TIMEOUT_MS = 1000
DEFAULT_ELECTION_BACKOFF_MAX_MS = 1000
DEFAULT_FETCH_TIMEOUT_MS = 2000
DEFAULT_REQUEST_TIMEOUT_MS = 2000
DEFAULT_RETRY_BACKOFF_MS = 20
DEFAULT_APPEND_LINGER_MS = 25
FETCH_MAX_WAIT_MS = 500  # KafkaRaftClient's long-poll for followers
FETCH_MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class QuorumConfig:
    # controller.quorum.voters' ids (kraft.version 0); empty when the voters come from the log
    # (a dynamic quorum: formatted with --standalone or --initial-controllers, or joining one).
    voters: tuple[int, ...]
    cluster_id: str = ""
    # meta.properties directory.id of the metadata log directory: with the node id, this
    # replica's key.
    directory_id: bytes = ZERO_UUID
    # The controller listener: its name, and this node's (name, host, port) endpoints, which
    # it gives when it asks to join or update its voter entry.
    listener_name: str = "CONTROLLER"
    endpoints: tuple[tuple[str, str, int], ...] = ()
    # controller.quorum.voters' addresses, by id.
    voter_addresses: dict[int, tuple[str, int]] = field(default_factory=dict)
    # controller.quorum.bootstrap.servers: where a replica that knows no voter asks for the leader.
    bootstrap_servers: tuple[tuple[str, int], ...] = ()
    # controller.quorum.election.timeout.ms: an election starts after a random wait in
    # [timeout, 2 * timeout), so voters seldom start at the same moment.
    election_timeout_ms: int = DEFAULT_ELECTION_TIMEOUT_MS
    # controller.quorum.election.backoff.max.ms: the longest a voter named late in a resigning
    # leader's successor list waits before it starts an election.
    election_backoff_max_ms: int = DEFAULT_ELECTION_BACKOFF_MAX_MS
    # controller.quorum.fetch.timeout.ms: a follower that has not fetched from its leader for
    # this long starts an election; a leader not fetched from by a majority for 1.5 times
    # this long resigns.
    fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    # controller.quorum.append.linger.ms: how long a leader lets appends gather before it
    # flushes them.
    append_linger_ms: int = DEFAULT_APPEND_LINGER_MS
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS
    fetch_max_bytes: int = FETCH_MAX_BYTES
