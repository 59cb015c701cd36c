"""What `info` reports: each log directory's format state, and any disagreement between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from server.config import ControllerConfig
from server.metalog.bootstrap import (
    BOOTSTRAP_CHECKPOINT, bootstrap_metadata_version, read_bootstrap, release_name)
from server.metalog.meta_properties import (
    FORMAT_HINT, META_PROPERTIES, MetaProperties, StorageError, read_meta_properties)


@dataclass
class InfoReport:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unformatted: int = 0


def describe_dirs(config: ControllerConfig) -> InfoReport:
    """Read every log directory of ``config`` without changing any of them."""
    report = InfoReport()
    metas: list[tuple[str, MetaProperties]] = []
    for directory in config.log_dirs:
        role = " (metadata log)" if directory == config.metadata_log_dir else ""
        if not (directory / META_PROPERTIES).exists():
            why = "no meta.properties" if directory.is_dir() else "directory does not exist"
            report.lines.append(f"{directory}{role}: not formatted ({why})")
            report.unformatted += 1
            continue
        try:
            meta = read_meta_properties(directory)
        except StorageError as exc:
            report.lines.append(f"{directory}{role}: unreadable meta.properties")
            report.problems.append(str(exc))
            continue
        metas.append((str(directory), meta))
        report.lines.append(f"{directory}{role}: formatted")
        report.lines.append(f"    cluster.id={meta.cluster_id}")
        report.lines.append(f"    node.id={meta.node_id}")
        report.lines.append(f"    version={meta.version}")
        if meta.directory_id is not None:
            report.lines.append(f"    directory.id={meta.directory_id}")
        if (directory / BOOTSTRAP_CHECKPOINT).exists() or role:
            summary = _bootstrap_summary(directory, report)
            report.lines.append(f"    {BOOTSTRAP_CHECKPOINT}: {summary}")
        if meta.node_id != config.node_id:
            report.problems.append(f"{directory / META_PROPERTIES}: node.id is {meta.node_id} but "
                                   f"the config has node.id {config.node_id}")
    if len({meta.cluster_id for _, meta in metas}) > 1:
        found = ", ".join(f"{meta.cluster_id} in {d}" for d, meta in metas)
        report.problems.append(f"the directories disagree on cluster.id: {found}")
    if report.unformatted:
        report.lines.append(f"{report.unformatted} of {len(config.log_dirs)} directories are not "
                            f"formatted; format them with: {FORMAT_HINT}")
    return report


def _bootstrap_summary(directory: Path, report: InfoReport) -> str:
    if not (directory / BOOTSTRAP_CHECKPOINT).exists():
        return "missing"
    try:
        level = bootstrap_metadata_version(read_bootstrap(directory))
    except StorageError as exc:
        report.problems.append(str(exc))
        return "unreadable"
    if level is None:
        return "no metadata.version record"
    name = release_name(level)
    return f"metadata.version={level}" + (f" ({name})" if name else "")
