"""The generator reads every one of Apache Kafka's schemas, and what it emits round-trips."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given

from tests.support.message_strategies import MessageValues
from tests.support.schema_corpus import (
    ROOT, case_id, check_roundtrip, hypothesis_settings, upstream_cases, upstream_schemas, version_params)

CASES = upstream_cases()


def test_upstream_corpus_size():
    assert len([c for c in CASES if c.rel.parts[0] == "message"]) == 186
    assert len([c for c in CASES if c.rel.parts[0] == "metadata"]) == 25


def test_cli_generates_the_upstream_corpus(tmp_path):
    out = tmp_path / "gen"
    cmd = [sys.executable, "-m", "tools.codegen", "--schemas", str(upstream_schemas()), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # modules + __init__ + the folder's key enum (api_key.py, metadata_record_type.py)
    assert len(list((out / "message").glob("*.py"))) == 186 + 2
    assert len(list((out / "metadata").glob("*.py"))) == 25 + 2
    # A second run in --check mode finds the output up to date.
    check = subprocess.run(cmd + ["--check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr


def test_every_upstream_module_imports(upstream_tree):
    assert len(upstream_tree.modules) == 211
    for folder, count in (("message", 186), ("metadata", 25)):
        index = __import__(f"{upstream_tree.package}.{folder}", fromlist=["BY_NAME"])
        assert len(index.BY_NAME) == count
        for (kind, api_key), cls in index.BY_API_KEY.items():
            assert cls.API_KEY == api_key
    for case in upstream_tree.cases:
        cls = case.cls()
        assert cls.NAME == case.schema.name
        assert cls.VALID_VERSIONS == (case.schema.valid.lo, case.schema.valid.hi)
        assert len(cls._DECODERS) == case.schema.valid.hi + 1


@pytest.mark.parametrize(("case", "version"), version_params(CASES), ids=case_id)
def test_upstream_roundtrip(upstream_tree, case, version):
    case = upstream_tree.case(case.rel)
    cls = case.cls()
    values = MessageValues(case.schema, case.module())

    @hypothesis_settings(6)
    @given(values.strategy(version))
    def run(obj):
        check_roundtrip(cls, obj, version)

    run()
    check_roundtrip(cls, cls(), version)
