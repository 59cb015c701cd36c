"""A capture path as the executors open it."""
from __future__ import annotations


def local_path(path: str) -> str:
    """A capture path as the executor opens it: `file:` URIs name a (shared) local file."""
    return path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:")
