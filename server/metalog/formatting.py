"""Formatting log directories: meta.properties everywhere, bootstrap.checkpoint for metadata."""

from __future__ import annotations

from pathlib import Path

from protocol.primitives import random_uuid, uuid_to_str
from server.config import ControllerConfig
from server.metalog.bootstrap import DEFAULT_RELEASE, bootstrap_records, write_bootstrap
from server.metalog.meta_properties import (
    META_PROPERTIES, MetaProperties, StorageError, cluster_id_problem, write_meta_properties)


def format_dirs(config: ControllerConfig, cluster_id: str, release: str = DEFAULT_RELEASE,
                ignore_formatted: bool = False) -> list[Path]:
    """Format every log directory of ``config``; returns the directories it formatted.

    Directories that already hold meta.properties are an error, unless ``ignore_formatted``,
    in which case they are left exactly as they are.
    """
    if (problem := cluster_id_problem(cluster_id)) is not None:
        raise StorageError(f"invalid cluster id {cluster_id!r}: {problem} (python -m tools.storage "
                           f"random-uuid prints a new one)")
    try:
        records = bootstrap_records(release)
    except ValueError as exc:
        raise StorageError(str(exc)) from None

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
            if directory == config.metadata_log_dir:
                write_bootstrap(directory, records)
            # meta.properties goes last: it is what marks the directory as formatted.
            write_meta_properties(directory, MetaProperties(
                cluster_id=cluster_id, node_id=config.node_id,
                directory_id=uuid_to_str(random_uuid())))
        except OSError as exc:
            raise StorageError(f"{directory}: cannot format: {exc.strerror or exc}") from None
        done.append(directory)
    return done
