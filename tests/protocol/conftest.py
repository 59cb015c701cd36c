"""Session fixtures for the protocol tests."""

from __future__ import annotations

import sys

import pytest

from tests.support.schema_corpus import UPSTREAM_PACKAGE, GeneratedTree, generate_package, upstream_schemas


@pytest.fixture(scope="session")
def upstream_tree(tmp_path_factory) -> GeneratedTree:
    """Apache Kafka's schemas rendered by tools.codegen into an importable temporary package."""
    schemas = upstream_schemas()
    parent = tmp_path_factory.mktemp("upstream")
    tree = generate_package(schemas, parent, UPSTREAM_PACKAGE)
    yield tree
    for name in [m for m in sys.modules if m == UPSTREAM_PACKAGE or m.startswith(UPSTREAM_PACKAGE + ".")]:
        del sys.modules[name]
    if str(parent) in sys.path:
        sys.path.remove(str(parent))
