"""Where the schemas and their generated classes are, shared by the protocol tests."""

from __future__ import annotations

import importlib
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, Phase, settings

from protocol.message import Message
from tests.support.shared_data import shared_dir
from tools.codegen.generate import render_tree
from tools.codegen.schema import Schema, load_schema, snake_case
from tools.controller_process import ROOT

PROJECT_SCHEMAS = ROOT / "schemas"
PROJECT_PACKAGE = "protocol.generated"


def hypothesis_settings(max_examples: int) -> settings:
    # No deadline: the first call of a decoder is slower.
    # No shrinking unless KW_HYPOTHESIS_SHRINK=1: values are small already, and with hundreds
    # of (schema, version) cases one codec bug would otherwise spend minutes shrinking each.
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("KW_HYPOTHESIS_SHRINK") == "1":
        phases.append(Phase.shrink)
    return settings(max_examples=max_examples, deadline=None, phases=phases,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example,
                                           HealthCheck.function_scoped_fixture])


def check_roundtrip(cls: type, obj: object, version: int) -> bytes:
    data = obj.encode(version)
    assert isinstance(data, bytes)
    decoded, end = cls.decode(data, version)
    assert end == len(data), f"decode consumed {end} of {len(data)} bytes"
    assert decoded == obj
    assert decoded.encode(version) == data
    # The same bytes inside a larger buffer: decoding starts at pos and stops at the end of
    # the message, whatever surrounds it; encode_into appends after existing content.
    framed = b"\x07\x07\x07" + data + b"\xff\x00"
    again, end = cls.decode(memoryview(framed), version, 3)
    assert end == 3 + len(data)
    assert again == obj
    out = bytearray(b"head")
    obj.encode_into(out, version)
    assert bytes(out) == b"head" + data
    return data


@dataclass
class Case:
    """One schema file and the module generated from it."""

    rel: Path  # e.g. messages/FetchRequest.json
    schema: Schema
    package: str  # dotted package of the generated folder

    @property
    def module_name(self) -> str:
        return f"{self.package}.{self.rel.parent.as_posix().replace('/', '.')}.{snake_case(self.rel.stem)}"

    def module(self) -> ModuleType:
        return importlib.import_module(self.module_name)

    def cls(self) -> type[Message]:
        return getattr(self.module(), self.schema.name)

    def versions(self) -> range:
        return range(self.schema.valid.lo, self.schema.valid.hi + 1)


def load_cases(schema_root: Path, package: str) -> list[Case]:
    return [Case(p.relative_to(schema_root), load_schema(p), package)
            for p in sorted(schema_root.rglob("*.json"))]


def project_cases() -> list[Case]:
    return load_cases(PROJECT_SCHEMAS, PROJECT_PACKAGE)


def version_params(cases: list[Case]) -> list[tuple[Case, int]]:
    return [(c, v) for c in cases for v in c.versions()]


def case_id(value: object) -> str:
    if isinstance(value, Case):
        return value.rel.with_suffix("").as_posix()
    return f"v{value}"


@dataclass
class GeneratedTree:
    """A schema tree rendered into an importable package in a temporary directory."""

    package: str
    directory: Path
    cases: list[Case] = field(default_factory=list)
    modules: dict[str, ModuleType] = field(default_factory=dict)  # rel path -> module

    def case(self, rel: str | Path) -> Case:
        rel = Path(rel)
        for c in self.cases:
            if c.rel == rel:
                return c
        raise KeyError(rel)


def generate_package(schema_root: Path, parent: Path, package: str) -> GeneratedTree:
    """Render ``schema_root`` as package ``package`` under ``parent`` and import every module."""
    target = parent / package
    for rel, text in render_tree(schema_root).items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (target / "__init__.py").touch()
    if str(parent) not in sys.path:
        sys.path.insert(0, str(parent))
    importlib.invalidate_caches()
    tree = GeneratedTree(package, target, load_cases(schema_root, package))
    for c in tree.cases:
        tree.modules[c.rel.as_posix()] = c.module()
    return tree


# The upstream corpus is rendered once per test session under a package name that cannot clash
# with anything installed or with a concurrent run.
UPSTREAM_PACKAGE = f"kw_upstream_{uuid.uuid4().hex[:12]}"


def upstream_schemas() -> Path:
    """Apache Kafka's own schemas; the caller (a test, or a whole module) skips without them."""
    return shared_dir("kafka-schemas")


def upstream_cases() -> list[Case]:
    return load_cases(upstream_schemas(), UPSTREAM_PACKAGE)


def upstream_counterpart(case: Case, upstream: list[Case]) -> Case | None:
    """The upstream case with the same file name, in message/ or metadata/."""
    for c in upstream:
        if c.rel.name == case.rel.name:
            return c
    return None
