"""Where the shared reference data lives: real Kafka metadata directories and Kafka's schemas.

One setting, the environment variable ``KRAFTWIRE_SHARED``, names the folder that holds
``kafka-metadata-dirs/``, ``kafka-schemas/`` and ``kafka-golden/``; without it, ``<repo root>/../shared`` is used
when it exists. Tests that need the data skip, saying why, when it is not there. The files are
read in place and never copied into the project.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.controller_process import ROOT

ENV = "KRAFTWIRE_SHARED"


def shared_root() -> Path | None:
    """The shared folder, or None when neither the setting nor the default exists."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    default = ROOT.parent / "shared"
    return default if default.is_dir() else None


def shared_dir(name: str) -> Path:
    """``<shared>/<name>``; skips the calling test when it is not there."""
    root = shared_root()
    if root is None:
        pytest.skip(f"no shared reference data: set {ENV} to the folder holding {name}/",
                    allow_module_level=True)
    path = root / name
    if not path.exists():
        pytest.skip(f"{path} does not exist ({ENV}={os.environ.get(ENV, '<unset>')})",
                    allow_module_level=True)
    return path


def kafka_metadata_dirs() -> list[Path]:
    """Every real Kafka metadata directory, sorted by name; empty when the data is absent
    (then the parametrized tests show one skipped case instead of none)."""
    root = shared_root()
    folder = root / "kafka-metadata-dirs" if root is not None else None
    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir())


def metadata_dir_params() -> list:
    """pytest parameters over the real directories, named after them."""
    dirs = kafka_metadata_dirs()
    if not dirs:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason=f"no shared kafka-metadata-dirs: set {ENV}"), id="no-shared-data")]
    return [pytest.param(d, id=d.name) for d in dirs]
