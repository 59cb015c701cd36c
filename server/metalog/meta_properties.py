"""meta.properties version 1 (KIP-631): the marker that a log directory belongs to a cluster.

Every log directory of a KRaft node holds one, written by ``python -m tools.storage format``.
The node refuses to start unless all of them agree on the cluster and name this node.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from protocol.primitives import uuid_from_str
from server.config import ConfigError, ControllerConfig, parse_properties
from server.metalog.durable import write_atomically

META_PROPERTIES = "meta.properties"
FORMAT_HINT = "python -m tools.storage format --config FILE --cluster-id ID"
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


class StorageError(Exception):
    """A log directory that is missing, unformatted, inconsistent or corrupt."""


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    version: int = 1
    directory_id: str | None = None


def is_kafka_uuid(text: str) -> bool:
    """True for Kafka's textual UUID: 22 URL-safe base64 characters encoding 16 bytes."""
    if not _UUID_TEXT.fullmatch(text):
        return False
    try:
        uuid_from_str(text)
    except ValueError:
        return False
    return True


def cluster_id_problem(text: str | None, *, new: bool = True) -> str | None:
    """Why ``text`` cannot be a cluster id, or None. Kafka takes any string it was formatted
    with (a UUID from random-uuid, or a name such as ``universe-labs-cluster``); only one that
    would not survive a properties file line is refused, and an empty one only when a
    directory is being formatted (Kafka's MetaProperties reads and writes an empty one)."""
    if text is None:
        return "it is missing"
    if new and not text.strip():
        return "it is empty"
    if any(ch in text for ch in "\r\n\0"):
        return "it holds a line break or NUL"
    if text != text.strip():
        return "it starts or ends with white space"
    return None


def read_meta_properties(directory: Path) -> MetaProperties:
    """Read ``directory/meta.properties``; raises StorageError naming the file and the key."""
    path = Path(directory) / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StorageError(f"{directory} is not formatted (no {META_PROPERTIES}); format it with: "
                           f"{FORMAT_HINT}") from None
    except OSError as exc:
        raise StorageError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        props = {key: value.strip() for key, value in parse_properties(text).items()}
    except ConfigError as exc:
        raise StorageError(f"{path}: {exc}") from None

    version = props.get("version")
    if version != "1":
        raise StorageError(f"{path}: version: expected 1 (KRaft), got {version!r}")
    cluster_id = props.get("cluster.id")
    problem = cluster_id_problem(cluster_id, new=False)
    if cluster_id is None or problem is not None:
        raise StorageError(f"{path}: cluster.id: {cluster_id!r} is not usable: {problem}")
    node_text = props.get("node.id")
    if node_text is None or not node_text.isdigit():
        raise StorageError(f"{path}: node.id: expected a non-negative integer, got {node_text!r}")
    directory_id = props.get("directory.id")
    if directory_id is not None and not is_kafka_uuid(directory_id):
        raise StorageError(f"{path}: directory.id: expected a 22-character base64 Kafka UUID, "
                           f"got {directory_id!r}")
    return MetaProperties(cluster_id, int(node_text), 1, directory_id)


def write_meta_properties(directory: Path, meta: MetaProperties) -> None:
    """Write ``directory/meta.properties`` so that a crash leaves the old file or the new one."""
    if (problem := cluster_id_problem(meta.cluster_id, new=False)) is not None:
        raise StorageError(f"cluster.id {meta.cluster_id!r} is not usable: {problem}")
    lines = ["#", "#" + time.strftime("%a %b %d %H:%M:%S %Z %Y"),
             f"cluster.id={_escape_value(meta.cluster_id)}", f"node.id={meta.node_id}",
             f"version={meta.version}"]
    if meta.directory_id is not None:
        lines.append(f"directory.id={meta.directory_id}")
    write_atomically(Path(directory) / META_PROPERTIES, ("\n".join(lines) + "\n").encode())


def _escape_value(text: str) -> str:
    """A properties value as Java's Properties.store writes it, so that a cluster id such as
    ``a=b:c`` reads back unchanged (here and in Kafka)."""
    return "".join("\\" + ch if ch in "\\=:#!" else ch for ch in text)


def check_log_dirs(config: ControllerConfig) -> str:
    """Check every log directory is formatted for this node and one cluster; returns its id."""
    first: tuple[Path, MetaProperties] | None = None
    directory_ids: dict[str, Path] = {}
    for directory in config.log_dirs:
        meta = read_meta_properties(directory)
        path = directory / META_PROPERTIES
        if meta.node_id != config.node_id:
            raise StorageError(f"{path}: node.id is {meta.node_id} but the config has node.id "
                               f"{config.node_id}")
        if first is None:
            first = (directory, meta)
        elif meta.cluster_id != first[1].cluster_id:
            raise StorageError(f"{path}: cluster.id {meta.cluster_id} differs from cluster.id "
                               f"{first[1].cluster_id} in {first[0]}")
        if meta.directory_id is not None:
            if meta.directory_id in directory_ids:
                raise StorageError(f"{path}: directory.id {meta.directory_id} is also used by "
                                   f"{directory_ids[meta.directory_id]}")
            directory_ids[meta.directory_id] = directory
    assert first is not None, "a validated config always has a metadata log dir"
    return first[1].cluster_id
