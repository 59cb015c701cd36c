"""The generator refuses every schema Kafka's own generator refuses, naming file, field and
reason, and accepts the project's schemas and Kafka's reference corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.schema_corpus import PROJECT_SCHEMAS, upstream_schemas
from tools.codegen.generate import render_tree
from tools.codegen.schema import SchemaError, load_schema
from tools.controller_process import ROOT


def message(fields: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    """A minimal valid data schema around ``fields``; ``top`` overrides top-level keys."""
    data: dict[str, Any] = {"type": "data", "name": "ThingData", "validVersions": "0-2",
                            "flexibleVersions": "1+", "fields": fields}
    data.update(top)
    return {k: v for k, v in data.items() if v is not None}


def field(name: str = "Value", type: str = "int32", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type, "versions": "0+", **extra}


def tagged(name: str, tag: int, **extra: Any) -> dict[str, Any]:
    return field(name, **{"versions": "1+", "taggedVersions": "1+", "tag": tag, **extra})


def nested(name: str, type: str, fields: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return field(name, type, fields=fields, **extra)


CASES: list[tuple[str, dict[str, Any], str | None, str]] = [
    # (case id, schema, field path named in the error or None, words of the reason)
    ("duplicate tag", message([tagged("A", 0), tagged("B", 0)]), "B", "tag 0 is already used by field A"),
    ("duplicate tag in nested struct",
     message([nested("Items", "[]Item", [tagged("A", 0), tagged("B", 0)])]), "Items.B", "already used"),
    ("tags with a gap", message([tagged("A", 0), tagged("B", 2)]), None, "tag 1 is missing"),
    ("negative tag", message([tagged("A", -1)]), "A", "negative"),
    ("tag without taggedVersions", message([field("A", tag=0)]), "A", "without taggedVersions"),
    ("taggedVersions without tag", message([field("A", taggedVersions="1+")]), "A", "without a tag"),
    ("tagged in a non-flexible version", message([tagged("A", 0, versions="0+", taggedVersions="0+")]), "A",
     "not within the flexible versions"),
    ("tagged in a message with no flexible versions",
     message([tagged("A", 0)], flexibleVersions="none"), "A", "not within the flexible versions"),
    ("closed taggedVersions", message([tagged("A", 0, taggedVersions="1-2")]), "A", "open range"),
    ("taggedVersions outside versions", message([tagged("A", 0, versions="2+")]), "A",
     "not within versions"),
    ("tagged and partly nullable",
     message([tagged("A", 0, type="string", nullableVersions="2+")]), "A", "either all tagged versions"),
    ("tagged mapKey", message([nested("Items", "[]Item", [tagged("A", 0, mapKey=True)])]), "Items.A",
     "cannot be a mapKey"),
    ("tagged records", message([tagged("A", 0, type="records")]), "A", "records field cannot be tagged"),
    ("nullable int32", message([field("A", nullableVersions="0+")]), "A", "int32 cannot be nullable"),
    ("nullable uuid", message([field("A", "uuid", nullableVersions="0+")]), "A", "uuid cannot be nullable"),
    ("int8 default 300", message([field("A", "int8", default="300")]), "A", "300 does not fit int8"),
    ("int16 hex default too big", message([field("A", "int16", default="0x8000")]), "A", "does not fit int16"),
    ("uint16 negative default", message([field("A", "uint16", default="-1")]), "A", "does not fit uint16"),
    ("int32 default not a number", message([field("A", default="ten")]), "A", "not an integer"),
    ("bool default", message([field("A", "bool", default="yes")]), "A", "not true or false"),
    ("float default", message([field("A", "float64", default="fast")]), "A", "not a number"),
    ("uuid default", message([field("A", "uuid", default="abc")]), "A", "not a base64 UUID"),
    ("bytes default", message([field("A", "bytes", default="00")]), "A", "empty or null"),
    ("array default", message([field("A", "[]int32", default="[1]")]), "A", "empty or null"),
    ("struct default", message([nested("S", "Sub", [field()], default="x")]), "S", "empty or null"),
    ("null default not nullable everywhere",
     message([field("A", "string", default="null", nullableVersions="1+")]), "A", "default null"),
    ("field versions past the message", message([field("A", versions="5+")]), "A",
     "outside the enclosing versions 0-2"),
    ("closed field versions past the message", message([field("A", versions="1-4")]), "A",
     "outside the enclosing versions"),
    ("nested field versions past its struct",
     message([nested("S", "Sub", [field("B", versions="2+")], versions="0-1")]), "S.B",
     "outside the enclosing versions 0-1"),
    ("field without versions", message([{"name": "A", "type": "int32"}]), "A", "versions is required"),
    ("bad version range", message([field("A", versions="1-x")]), "A", "not a version range"),
    ("empty version range", message([field("A", versions="3-1")]), "A", "empty range"),
    ("version too high", message([field("A", versions="40000+")]), "A", "versions stop at 32767"),
    ("duplicate field name", message([field("A"), field("A")]), "A", "name is used twice"),
    ("field names clash as attributes", message([field("ISR"), field("Isr")]), "Isr", "clashes with field ISR"),
    ("bad field name", message([field("My-Field")]), None, "field name 'My-Field'"),
    ("unknown type", message([field("A", "int128")]), "A", "unknown type int128"),
    ("array of arrays", message([field("A", "[][]int32")]), "A", "arrays of arrays"),
    ("array without element", message([field("A", "[]")]), "A", "names no element type"),
    ("primitive with fields", message([nested("A", "int32", [field()])]), "A", "cannot have fields"),
    ("struct without fields", message([field("A", "Missing")]), "A", "unknown type Missing"),
    ("struct defined twice",
     message([nested("A", "Sub", [field()]), nested("B", "Sub", [field()])]), "B", "struct Sub is defined twice"),
    ("struct named like the message", message([nested("A", "ThingData", [field()])]), "A",
     "message's own name"),
    ("common struct given fields inline",
     message([nested("A", "Common", [field()])],
             commonStructs=[{"name": "Common", "versions": "0+", "fields": [field()]}]), "A",
     "common struct and cannot be given fields"),
    ("common struct defined twice",
     message([], commonStructs=[{"name": "C", "versions": "0+", "fields": []},
                                {"name": "C", "versions": "0+", "fields": []}]), None, "defined twice"),
    ("common struct without versions",
     message([], commonStructs=[{"name": "C", "fields": []}]), None, "common struct C needs versions"),
    ("common struct field", message([], commonStructs=[
        {"name": "C", "versions": "0+", "fields": [field("A", nullableVersions="0+")]}]), "C.A",
     "cannot be nullable"),
    ("mapKey on a top-level field", message([field("A", mapKey=True)]), "A", "mapKey is only allowed inside a struct"),
    ("flexibleVersions override on int32", message([field("A", flexibleVersions="1+")]), "A",
     "only a string or bytes field"),
    ("flexibleVersions override outside the message's",
     message([field("A", "string", flexibleVersions="0+")]), "A", "not within the message's flexibleVersions"),
    ("zeroCopy on a string", message([field("A", "string", zeroCopy=True)]), "A", "zeroCopy"),
    ("ignorable not a boolean", message([field("A", ignorable="yes")]), "A", "ignorable must be true or false"),
    ("unknown entityType", message([field("A", entityType="planet")]), "A", "entityType 'planet'"),
    ("entityType on the wrong type", message([field("A", "string", entityType="brokerId")]), "A",
     "needs type int32"),
    ("unknown field key", message([field("A", nulableVersions="0+")]), "A", "unknown keys ['nulableVersions']"),
    ("unknown message key", message([], validVersion="0"), None, "unknown keys ['validVersion']"),
    ("missing flexibleVersions", message([], flexibleVersions=None), None, "flexibleVersions is required"),
    ("closed flexibleVersions", message([], flexibleVersions="1-2"), None, "open range"),
    ("open validVersions", message([], validVersions="0+"), None, "must name a highest version"),
    ("unknown message type", message([], type="event"), None, "message type 'event'"),
    ("request without apiKey", message([], type="request", name="ThingRequest"), None, "needs an apiKey"),
    ("request name", message([], type="request", name="Thing", apiKey=70), None, "must end with Request"),
    ("listeners on a response",
     message([], type="response", name="ThingResponse", apiKey=70, listeners=["broker"]), None,
     "only allowed on a request"),
    ("unknown listener",
     message([], type="request", name="ThingRequest", apiKey=70, listeners=["client"]), None, "listeners"),
    ("latestVersionUnstable on data", message([], latestVersionUnstable=True), None, "only allowed on a request"),
]


@pytest.mark.parametrize("schema, path, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rejected(tmp_path: Path, schema: dict[str, Any], path: str | None, reason: str) -> None:
    file = tmp_path / "ThingData.json"
    file.write_text(json.dumps(schema, indent=2))
    with pytest.raises(SchemaError) as info:
        load_schema(file)
    text = str(info.value)
    assert text.startswith(f"{file}: "), text
    if path is not None:
        assert f"field {path}: " in text, text
    assert reason in text, text


def test_a_valid_schema_passes(tmp_path: Path) -> None:
    file = tmp_path / "ThingData.json"
    file.write_text(json.dumps(message([
        field("A", "int8", default="0x7f"), tagged("B", 0, type="string", nullableVersions="1+", default="null"),
        nested("Items", "[]Item", [field("Key", "string", mapKey=True), tagged("C", 0)]),
    ])))
    schema = load_schema(file)
    assert [f.name for f in schema.root.fields] == ["A", "B", "Items"]


def write_folder(folder: Path, *schemas: dict[str, Any]) -> None:
    folder.mkdir()
    for schema in schemas:
        (folder / f"{schema['name']}.json").write_text(json.dumps(schema))


def test_two_requests_with_one_api_key(tmp_path: Path) -> None:
    write_folder(tmp_path / "messages",
                 message([], type="request", name="ARequest", apiKey=80),
                 message([], type="request", name="BRequest", apiKey=80),
                 message([], type="response", name="AResponse", apiKey=80))
    with pytest.raises(SchemaError, match="ARequest and BRequest are both the request for API key 80|"
                                          "BRequest and ARequest are both the request for API key 80"):
        render_tree(tmp_path)


def test_a_request_without_response(tmp_path: Path) -> None:
    write_folder(tmp_path / "messages", message([], type="request", name="ARequest", apiKey=80))
    with pytest.raises(SchemaError, match="ARequest has API key 80 but no response"):
        render_tree(tmp_path)


def test_the_command_prints_one_line_and_fails(tmp_path: Path) -> None:
    write_folder(tmp_path / "schemas", message([field("A", nullableVersions="0+")]))
    result = subprocess.run(
        [sys.executable, "-m", "tools.codegen", "--schemas", str(tmp_path / "schemas"),
         "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"codegen: {tmp_path / 'schemas' / 'ThingData.json'}: field A: type int32 cannot be nullable"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("which", ["project", "upstream"])
def test_every_reference_schema_passes(which: str) -> None:
    root = PROJECT_SCHEMAS if which == "project" else upstream_schemas()  # skips without the data
    files = render_tree(root)
    assert len(files) > len(list(root.rglob("*.json")))
