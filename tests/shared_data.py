"""Reference data kept beside the project rather than in it (``kafka-schemas/``,
``kafka-metadata-dirs/``, ...), found through one setting so the tests run on any clone.

KRAFTWIRE_SHARED names the folder holding that data; without it, ``<repo root>/../shared`` is
used. A test that needs data which is not there is skipped, and the skip says what is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_dir(name: str) -> Path:
    """The folder ``name`` of the shared data, or a skip of the calling test (or module)."""
    setting = os.environ.get("KRAFTWIRE_SHARED")
    path = (Path(setting) if setting else ROOT.parent / "shared") / name
    if not path.is_dir():
        pytest.skip(f"shared data {path} is absent; set KRAFTWIRE_SHARED to the folder holding {name}/",
                    allow_module_level=True)
    return path
