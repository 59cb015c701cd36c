"""The quorum settings the Raft core runs by, under Kafka's QuorumConfig names, with the
defaults of the settings table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.primitives import ZERO_UUID
from server.settings import default

if TYPE_CHECKING:
    # Only its type: the Raft core does not load the configuration's security machinery.
    from server.config import ControllerConfig

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
    election_timeout_ms: int = default("controller.quorum.election.timeout.ms")
    # controller.quorum.election.backoff.max.ms: the longest a voter named late in a resigning
    # leader's successor list waits before it starts an election.
    election_backoff_max_ms: int = default("controller.quorum.election.backoff.max.ms")
    # controller.quorum.fetch.timeout.ms: a follower that has not fetched from its leader for
    # this long starts an election; a leader not fetched from by a majority for 1.5 times
    # this long resigns.
    fetch_timeout_ms: int = default("controller.quorum.fetch.timeout.ms")
    request_timeout_ms: int = default("controller.quorum.request.timeout.ms")
    retry_backoff_ms: int = default("controller.quorum.retry.backoff.ms")
    # controller.quorum.append.linger.ms: how long a leader lets appends gather before it
    # flushes them.
    append_linger_ms: int = default("controller.quorum.append.linger.ms")
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS
    fetch_max_bytes: int = FETCH_MAX_BYTES

    @classmethod
    def from_controller(cls, config: ControllerConfig, voters: tuple[int, ...], cluster_id: str,
                        directory_id: bytes) -> QuorumConfig:
        """The quorum settings of a controller's configuration. ``voters`` are the ids it starts
        with (empty for a dynamic quorum, whose voters are in the log); ``directory_id`` is its
        metadata directory's, read from meta.properties."""
        advertised = config.advertised_controller_listener
        return cls(
            voters=voters, cluster_id=cluster_id, directory_id=directory_id, listener_name=advertised.name,
            endpoints=((advertised.name, advertised.host, advertised.port),), voter_addresses=dict(config.voters),
            bootstrap_servers=tuple(config.bootstrap_servers),
            election_timeout_ms=config.quorum_election_timeout_ms,
            election_backoff_max_ms=config.quorum_election_backoff_max_ms,
            fetch_timeout_ms=config.quorum_fetch_timeout_ms, request_timeout_ms=config.quorum_request_timeout_ms,
            retry_backoff_ms=config.quorum_retry_backoff_ms, append_linger_ms=config.quorum_append_linger_ms)
