"""Formatting log directories: meta.properties everywhere, bootstrap.checkpoint for metadata."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.primitives import random_uuid, uuid_from_str, uuid_to_str
from server.config import ControllerConfig
from server.metalog.bootstrap import DEFAULT_RELEASE, bootstrap_records, write_bootstrap
from server.metalog.meta_properties import (
    META_PROPERTIES, MetaProperties, StorageError, cluster_id_problem, write_meta_properties)
from server.metalog.segments import PARTITION_DIR
from server.metalog.snapshot_file import write_snapshot_file
from server.metalog.snapshots import SnapshotId
from server.raft.voters import KRAFT_VERSION_DYNAMIC, SUPPORTED_KRAFT_VERSIONS, VoterNode, VoterSet
from server.raft.types import ReplicaKey

KRAFT_VERSION = "kraft.version"


@dataclass(frozen=True)
class InitialController:
    """One entry of ``--initial-controllers``: id@host:port:directory-id."""

    node_id: int
    host: str
    port: int
    directory_id: bytes


def parse_initial_controllers(text: str) -> list[InitialController]:
    """Kafka's ``--initial-controllers`` syntax: comma-separated id@host:port:directory-id
    (an IPv6 host in brackets)."""
    found: list[InitialController] = []
    for item in (part.strip() for part in text.split(",")):
        match = _INITIAL.fullmatch(item)
        if match is None:
            raise StorageError(f"invalid --initial-controllers entry {item!r}: expected id@host:port:directory-id")
        try:
            directory_id = uuid_from_str(match["dir"])
        except ValueError:
            raise StorageError(f"invalid directory id {match['dir']!r} in --initial-controllers entry {item!r}: "
                               f"expected a base64 UUID as `python -m tools.storage random-uuid` prints") from None
        node_id = int(match["id"])
        if any(c.node_id == node_id for c in found):
            raise StorageError(f"node id {node_id} appears twice in --initial-controllers")
        found.append(InitialController(node_id, match["v6"] or match["host"], int(match["port"]), directory_id))
    return found


_INITIAL = re.compile(r"(?P<id>[0-9]+)@(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:@\[\]]+)):(?P<port>[0-9]+):(?P<dir>[A-Za-z0-9_-]{22})")


def standalone(config: ControllerConfig) -> list[InitialController]:
    """``--standalone``: this controller alone, at its advertised controller listener, under a
    new directory id."""
    advertised = config.advertised_controller_listener
    return [InitialController(config.node_id, advertised.host or "localhost", advertised.port, random_uuid())]


def bootstrap_voters(controllers: list[InitialController], listener: str) -> VoterSet:
    return VoterSet.of(VoterNode(ReplicaKey(c.node_id, c.directory_id), ((listener, c.host, c.port),),
                                 (SUPPORTED_KRAFT_VERSIONS[0], SUPPORTED_KRAFT_VERSIONS[-1])) for c in controllers)


def format_dirs(config: ControllerConfig, cluster_id: str, release: str = DEFAULT_RELEASE,
                ignore_formatted: bool = False, initial_controllers: list[InitialController] | None = None,
                features: dict[str, int] | None = None) -> list[Path]:
    """Format every log directory of ``config``; returns the directories it formatted.

    Directories that already hold meta.properties are an error, unless ``ignore_formatted``,
    in which case they are left exactly as they are. ``initial_controllers`` (a dynamic quorum,
    kraft.version 1) writes the voter set in the metadata directory's bootstrap snapshot
    (offset 0, epoch 0) as Kafka's format does, and gives that directory this node's
    directory id from the list; an empty list (``--no-initial-controllers``) writes no voters:
    the node joins an existing quorum as an observer.
    """
    dynamic = initial_controllers is not None
    if dynamic and config.voters:
        raise StorageError("--standalone, --initial-controllers and --no-initial-controllers are for a dynamic "
                           "quorum: remove controller.quorum.voters and set controller.quorum.bootstrap.servers")
    if not dynamic and not config.voters:
        raise StorageError("controller.quorum.voters is not set on this controller, so one of --standalone, "
                           "--initial-controllers or --no-initial-controllers is required")
    features = dict(features or {})
    kraft_version = features.pop(KRAFT_VERSION, KRAFT_VERSION_DYNAMIC if dynamic else 0)
    # As Kafka's format: kraft.version follows from the quorum's kind, and may only be named
    # to agree with it.
    if kraft_version not in SUPPORTED_KRAFT_VERSIONS:
        raise StorageError(f"unsupported {KRAFT_VERSION} level {kraft_version}: supported "
                           f"{SUPPORTED_KRAFT_VERSIONS[0]} to {SUPPORTED_KRAFT_VERSIONS[-1]}")
    if (kraft_version == 0) == dynamic:
        raise StorageError(f"cannot set {KRAFT_VERSION} to {kraft_version} "
                           f"{'if' if dynamic else 'unless'} KIP-853 configuration is present; try removing the "
                           f"--feature flag for {KRAFT_VERSION}")
    own = next((c for c in initial_controllers or [] if c.node_id == config.node_id), None)
    if initial_controllers and own is None:
        raise StorageError(f"node {config.node_id} is not in --initial-controllers; use --no-initial-controllers "
                           f"to format a controller that joins later")
    if (problem := cluster_id_problem(cluster_id)) is not None:
        raise StorageError(f"invalid cluster id {cluster_id!r}: {problem} (python -m tools.storage "
                           f"random-uuid prints a new one)")
    try:
        records = bootstrap_records(release)
    except ValueError as exc:
        raise StorageError(str(exc)) from None
    records.extend((FeatureLevelRecord(name=name, feature_level=level), 0) for name, level in sorted(features.items()))

    formatted = [d for d in config.log_dirs if (d / META_PROPERTIES).exists()]
    if formatted and not ignore_formatted:
        names = ", ".join(str(d) for d in formatted)
        raise StorageError(f"already formatted: {names} (--ignore-formatted leaves formatted "
                           f"directories as they are and formats the others)")

    done = []
    for directory in config.log_dirs:
        if directory in formatted:
            continue
        try:
            directory.mkdir(parents=True, exist_ok=True)
            directory_id = random_uuid()
            if directory == config.metadata_log_dir:
                write_bootstrap(directory, records)
                if own is not None and initial_controllers:
                    directory_id = own.directory_id
                    voters = bootstrap_voters(initial_controllers, config.advertised_controller_listener.name)
                    partition = directory / PARTITION_DIR
                    partition.mkdir(parents=True, exist_ok=True)
                    write_snapshot_file(partition / SnapshotId(0, 0).file_name, [
                        (KRaftVersionRecord(version=0, k_raft_version=KRAFT_VERSION_DYNAMIC), 0),
                        (voters.to_record(), 0)])
            # meta.properties goes last: it is what marks the directory as formatted.
            write_meta_properties(directory, MetaProperties(
                cluster_id=cluster_id, node_id=config.node_id, directory_id=uuid_to_str(directory_id)))
        except OSError as exc:
            raise StorageError(f"{directory}: cannot format: {exc.strerror or exc}") from None
        done.append(directory)
    return done
