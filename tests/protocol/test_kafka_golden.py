"""Bytes written by Apache Kafka's own serializers (``<shared>/kafka-golden``, see its README).

Each sample was read from JSON by Kafka's generated converter and written by
``MessageUtil.toByteBuffer``. For every sample the project's class must consume all of Kafka's
bytes, give the values Kafka's JSON holds, and encode that message back to Kafka's bytes. One
test per (message, version); the id says how many samples it checks.
"""

from __future__ import annotations

import base64
import importlib
import json
from collections import defaultdict
from typing import Any

import pytest

from protocol.message import Message
from tests.support.schema_corpus import PROJECT_SCHEMAS
from tests.support.shared_data import ENV, shared_root
from tools.codegen.schema import snake_case

GOLDEN = "kafka-golden"


def _samples() -> dict[tuple[str, int], list[dict[str, Any]]]:
    root = shared_root()
    path = root / GOLDEN / "messages.jsonl" if root is not None else None
    by_version: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    if path is None or not path.is_file():
        return by_version
    with path.open() as lines:
        for line in lines:
            sample = json.loads(line)
            by_version[(sample["name"], sample["version"])].append(sample)
    return by_version


SAMPLES = _samples()


def _params() -> list:
    if not SAMPLES:
        return [pytest.param(None, None, marks=pytest.mark.skip(
            reason=f"no shared {GOLDEN}/messages.jsonl: set {ENV}"), id="no-shared-data")]
    return [pytest.param(name, version, id=f"{name}-v{version}-x{len(SAMPLES[(name, version)])}")
            for name, version in sorted(SAMPLES)]


def _message_class(name: str) -> type[Message]:
    matches = list(PROJECT_SCHEMAS.rglob(f"{name}.json"))
    assert len(matches) == 1, f"{name}: no project schema (or more than one)"
    rel = matches[0].relative_to(PROJECT_SCHEMAS)
    module = importlib.import_module(f"protocol.generated.{rel.parent.as_posix()}.{snake_case(name)}")
    return getattr(module, name)


def _kafka_uuid(text: str) -> bytes:
    # Kafka writes a UUID as URL-safe base64 without padding.
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _expected(kafka_type: str, value: Any, where: str) -> Any:
    """Kafka's JSON value in the form the generated classes hold it."""
    if value is None:
        return None
    if kafka_type.startswith("[]"):
        assert isinstance(value, list), where
        return [_expected(kafka_type[2:], item, f"{where}[{i}]") for i, item in enumerate(value)]
    if kafka_type == "uuid":
        return _kafka_uuid(value)
    if kafka_type in ("bytes", "records"):
        return base64.b64decode(value)
    return value


def _assert_matches(obj: Message, kafka_json: dict[str, Any], where: str) -> None:
    types = dict(obj.FIELDS)
    for key, value in kafka_json.items():
        attr = snake_case(key)
        assert attr in types, f"{where}: Kafka's JSON has {key!r}, the class has no {attr!r}"
        kafka_type = types[attr]
        actual = getattr(obj, attr)
        path = f"{where}.{attr}"
        if isinstance(actual, Message) or (isinstance(actual, list) and actual
                                           and isinstance(actual[0], Message)):
            # Nested structs: compare field by field, so a failure names the field.
            if value is None:
                assert actual is None, path
            elif isinstance(actual, list):
                assert len(actual) == len(value), path
                for i, (item, item_json) in enumerate(zip(actual, value)):
                    _assert_matches(item, item_json, f"{path}[{i}]")
            else:
                _assert_matches(actual, value, path)
            continue
        if isinstance(actual, (bytearray, memoryview)):
            actual = bytes(actual)
        expected = _expected(kafka_type, value, path)
        assert actual == expected, f"{path} ({kafka_type}): {actual!r} != Kafka's {value!r}"


@pytest.mark.parametrize(("name", "version"), _params())
def test_kafka_bytes(name: str, version: int) -> None:
    cls = _message_class(name)
    for i, sample in enumerate(SAMPLES[(name, version)]):
        where = f"{name} v{version} sample {i}"
        data = bytes.fromhex(sample["hex"])
        decoded, end = cls.decode(data, version)
        assert end == len(data), f"{where}: decode consumed {end} of {len(data)} bytes"
        _assert_matches(decoded, sample["kafka_json"], where)
        assert not decoded.unknown_tagged_fields, f"{where}: known tags read as unknown"
        assert decoded.encode(version).hex() == sample["hex"], f"{where}: re-encoded bytes differ"


def test_corpus_counts() -> None:
    """The corpus is read whole: every sample belongs to a (message, version) tested above."""
    if not SAMPLES:
        pytest.skip(f"no shared {GOLDEN}/messages.jsonl: set {ENV}")
    names = {name for name, _ in SAMPLES}
    total = sum(len(samples) for samples in SAMPLES.values())
    root = shared_root()
    assert root is not None
    assert total == (root / GOLDEN / "messages.jsonl").read_text().count("\n")
    print(f"kafka-golden: {total} samples, {len(names)} messages, {len(SAMPLES)} versions")
