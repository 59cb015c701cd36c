"""Cross-check the generated codecs against kafka-python 3's JSON-schema-driven engine.

For every project message that kafka-python can describe, and every version both sides
support: the same values encode to the same bytes on both sides, and each side decodes the
other's bytes to the same values.

kafka-python ships classes for many APIs (``kafka.protocol.*``); those are used as shipped,
with their own JSON resources and patches. Every other project schema (controller APIs,
KRaft APIs, metadata records, ...) is loaded into kafka-python's engine from Apache Kafka's
JSON files through a temporary package, exactly the way kafka-python declares its own classes
(``class X(ApiMessage, load_json=<package>)``).

kafka-python quirks, each handled explicitly below:

- Fields are paired by their JSON name (kafka-python snake-cases it slightly differently for
  acronyms, but not for any field of the project's schemas).
- UUIDs are ``uuid.UUID``; the all-zero UUID decodes to ``None`` and ``None`` encodes as zero.
- ``json_patch`` hooks rewrite some shipped schemas: MetadataResponse and
  DescribeClusterResponse rename ``*AuthorizedOperations`` to ``authorized_operations`` and
  turn the int32 into a "bitfield" (a set of bit numbers; INT32_MIN, i.e. {31}, is ``None``).
- ApiVersionsResponse.decode reads the body as version 0 whenever error_code != 0 (what a
  broker does when it does not support the requested version).
- A tagged struct field defaults to ``None`` (Kafka defaults it to a struct of defaults), so a
  default-valued tagged struct is left unset on the kafka-python side.
- Unknown tagged fields are decoded into ``unknown_tags`` ({"_<tag>": bytes}) but never written
  back, and a struct inside a tagged field cannot carry tagged fields of its own.
- The tagged-field section is written in declaration order, not tag order: for
  PartitionChangeRecord (Directories, tag 8, is declared before tags 6 and 7) it writes a
  non-canonical order. The schemas loaded here declare tagged fields in tag order.
- A tag written as a JSON string (``"tag": "0"``, as in BrokerHeartbeatRequest) stays a string
  and breaks kafka-python's varint writer; the schemas loaded here carry integer tags.
- A field named Version (KRaftVersionRecord, LeaderChangeMessage, VotersRecord, ...) clashes
  with the containers' own ``version=`` keyword: it is set after construction, and decoding
  uses the engine's compiled decoder, since ApiData.decode passes fields as keywords.
- A schema without fields (NoOpRecord, EndTransactionRecord, ListClientMetricsResourcesRequest)
  cannot be loaded at all (StructField iterates ``None``); those three are skipped, and what
  they encode to is pinned by test_kafka_python_cannot_load_empty_schemas.
- Headers encode by "flexible or not" only: RequestHeader v1/v2, ResponseHeader v0/v1.
- Request/response classes accept every version from 0 up, whatever the schema says; the
  versions checked here are the ones the kafka-python JSON declares.
"""

from __future__ import annotations

import copy
import importlib
import io
import pkgutil
import re
import shutil
import sys
import types
import uuid
import warnings
from pathlib import Path

import pytest
from hypothesis import given

with warnings.catch_warnings():
    # kafka-python's load_json uses importlib.resources.read_text, deprecated in Python 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    from kafka.protocol.api_data import ApiData
    from kafka.protocol.api_header import ApiHeader
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.schemas.fields.codecs import BitField
    from kafka.protocol.schemas.fields.simple import SimpleField

from protocol.primitives import ZERO_UUID
from tests.support.message_strategies import MessageValues, strip_unknown_tags
from tests.support.schema_corpus import (
    hypothesis_settings, project_cases, upstream_cases, upstream_counterpart, upstream_schemas)
from tools.codegen.emit import attr_name
from tools.codegen.schema import snake_case

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CASES = project_cases()
INT32_MIN = -(2 ** 31)

# (project struct, project field) -> the name kafka-python's json_patch gave the field.
KP_RENAMED = {
    ("MetadataResponse", "ClusterAuthorizedOperations"): "authorized_operations",
    ("MetadataResponseTopic", "TopicAuthorizedOperations"): "authorized_operations",
    ("DescribeClusterResponse", "ClusterAuthorizedOperations"): "authorized_operations",
}


# --- kafka-python classes -------------------------------------------------------------------

def _shipped_classes() -> dict[str, type]:
    """Every schema-driven class kafka-python ships, by schema name (legacy ``old`` excluded)."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or info.name.endswith("generate_stubs"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # load_json's read_text
            module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, (ApiMessage, ApiData, ApiHeader))
                    and value.__dict__.get("_json") is not None
                    and getattr(value, "_class_version", None) is None):
                found[value._json["name"]] = value
    return found


SHIPPED = _shipped_classes()


def _walk_fields(fields: list) -> None:
    """Integer tags, and tagged-only fields in tag order (see the module docstring)."""
    for f in fields:
        if "tag" in f:
            f["tag"] = int(f["tag"])
        if "fields" in f:
            _walk_fields(f["fields"])
    slots = [i for i, f in enumerate(fields)
             if "tag" in f and f.get("taggedVersions") == f.get("versions")]
    ordered = sorted((fields[i] for i in slots), key=lambda f: f["tag"])
    for i, f in zip(slots, ordered):
        fields[i] = f


def _patch_upstream_json(metacls, data: dict) -> dict:
    data = copy.deepcopy(data)
    _walk_fields(data["fields"])
    for common in data.get("commonStructs", []):
        _walk_fields(common["fields"])
    if data["type"] == "metadata":
        # kafka-python's ApiData describes "data" schemas; a metadata record is one too.
        data["type"] = "data"
    return data


@pytest.fixture(scope="module")
def kp_upstream(tmp_path_factory):
    """kafka-python classes for the project schemas kafka-python does not ship."""
    schemas, upstream = upstream_schemas(), upstream_cases()
    package = f"kw_kpjson_{uuid.uuid4().hex[:12]}"
    parent = tmp_path_factory.mktemp("kpjson")
    target = parent / package
    target.mkdir()
    (target / "__init__.py").touch()
    wanted = [c for c in CASES if c.schema.name not in SHIPPED]
    for case in wanted:
        up = upstream_counterpart(case, upstream)
        # load_json looks the file up by class name, which is the schema name.
        shutil.copy(schemas / up.rel, target / f"{case.schema.name}.json")
    sys.path.insert(0, str(parent))
    try:
        resources = importlib.import_module(package)
        classes = {}
        for case in wanted:
            base = ApiMessage if case.schema.kind in ("request", "response") else ApiData
            try:
                classes[case.schema.name] = types.new_class(
                    case.schema.name, (base,), {"load_json": resources},
                    lambda ns: ns.update(json_patch=classmethod(_patch_upstream_json)))
            except TypeError as exc:
                # kafka-python cannot describe a struct without fields (its StructField
                # iterates ``None``); test_kafka_python_cannot_load_empty_schemas pins this.
                classes[case.schema.name] = exc
        yield classes
    finally:
        sys.path.remove(str(parent))
        sys.modules.pop(package, None)


def _kp_valid_versions(kp_cls) -> tuple[int, int]:
    text = kp_cls._json["validVersions"]
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def _header_versions(kp_cls) -> set[int]:
    """The only versions kafka-python can put a header in: flexible or not."""
    return {kp_cls._valid_versions[0], kp_cls._flexible_versions[0]}


def _common_versions(case, kp_cls) -> list[int]:
    if issubclass(kp_cls, ApiHeader):
        kp_versions = _header_versions(kp_cls)
    else:
        lo, hi = _kp_valid_versions(kp_cls)
        kp_versions = set(range(lo, hi + 1))
    return sorted(set(case.versions()) & kp_versions)


def _is_flexible(kp_cls, version: int) -> bool:
    lo, hi = kp_cls._flexible_versions or (-1, -1)
    return lo >= 0 and lo <= version <= hi


def kp_encode(kp_obj, kp_cls, version: int) -> bytes:
    if issubclass(kp_cls, ApiHeader):
        return bytes(kp_obj.encode(flexible=_is_flexible(kp_cls, version)))
    if issubclass(kp_cls, ApiData):
        return bytes(kp_obj.encode(version=version, header=False))
    return bytes(kp_obj.encode(version=version))


def kp_decode(kp_cls, data: bytes, version: int):
    """Decode with kafka-python; returns (object, bytes consumed)."""
    if issubclass(kp_cls, ApiHeader):
        stream = io.BytesIO(data)
        obj = kp_cls.decode(stream, flexible=_is_flexible(kp_cls, version))
        return obj, stream.tell()
    # ApiMessage.decode runs exactly this compiled decoder but drops the end offset, and for
    # ApiVersionsResponse it first switches to version 0 when error_code != 0 (checked by
    # test_kafka_python_api_versions_error_quirk); call the decoder itself to see both.
    # ApiData.decode takes a slower path that builds the object with keyword arguments and so
    # breaks on a field named Version (test_kafka_python_version_field_quirk); the compiled
    # decoder is the same engine's other path and handles it.
    decoder = kp_cls._struct.compiled_decode_from(
        version, compact=_is_flexible(kp_cls, version), tagged=_is_flexible(kp_cls, version),
        data_class=kp_cls[None] if issubclass(kp_cls, ApiMessage) else kp_cls)
    return decoder(memoryview(data), 0)


# --- value mapping --------------------------------------------------------------------------

class Bridge:
    """Maps a project message tree to kafka-python data containers and back."""

    def __init__(self, case, kp_cls) -> None:
        self.case = case
        self.module = case.module()
        self.kp_cls = kp_cls

    def pairs(self, struct, kp_struct, version: int) -> list[tuple]:
        """(project field, kafka-python field) for the fields present in ``version``."""
        kp_fields = {f._name: f for f in kp_struct._fields}
        used = set()
        out = []
        for fld in struct.fields:
            if version not in fld.versions:
                continue
            name = KP_RENAMED.get((struct.name, fld.name), fld.name)
            kf = kp_fields.get(name)
            assert kf is not None, f"kafka-python has no {struct.name}.{fld.name}"
            if name == fld.name:
                # Both sides derive attribute names from the JSON name by snake-casing it.
                assert kf.name == snake_case(fld.name), (kf.name, fld.name)
            assert kf.for_version_q(version), f"{struct.name}.{fld.name} not in kafka-python v{version}"
            assert kf.tagged_field_q(version) == (version in fld.tagged), (struct.name, fld.name)
            used.add(name)
            out.append((fld, kf))
        for name, kf in kp_fields.items():
            if name not in used and kf.for_version_q(version):
                # A field only kafka-python knows is fine only if it is tagged (then it is
                # simply never written while it holds its default).
                assert kf.tagged_field_q(version), f"kafka-python-only field {struct.name}.{name}"
        return out

    # project -> kafka-python

    def to_kp(self, obj, version: int):
        return self._struct_to_kp(obj, self.case.schema.root, self.kp_cls._struct, self.kp_cls, version)

    def _struct_to_kp(self, obj, struct, kp_struct, data_class, version):
        kwargs = {}
        default = type(obj)()
        for fld, kf in self.pairs(struct, kp_struct, version):
            value = getattr(obj, attr_name(fld))
            if version in fld.tagged and value == getattr(default, attr_name(fld)):
                continue  # let kafka-python use (and skip writing) its own default
            kwargs[kf.name] = self._value_to_kp(value, fld, kf, version)
        # A field named Version (KRaftVersionRecord, LeaderChangeMessage, ...) cannot be a
        # keyword argument: ``version=`` is the container's own version. Set it afterwards;
        # the field's slot shadows the container's ``version`` property.
        field_version = kwargs.pop("version", None)
        container = data_class(version=version, **kwargs)
        if field_version is not None:
            container.version = field_version
        return container

    def _value_to_kp(self, value, fld, kf, version):
        if value is None:
            return None
        if fld.is_array:
            if fld.is_struct:
                return [self._struct_to_kp(v, fld.struct, kf.array_of, kf.data_class, version)
                        for v in value]
            return [self._scalar_to_kp(v, fld.element_type, kf.array_of) for v in value]
        if fld.is_struct:
            return self._struct_to_kp(value, fld.struct, kf, kf.data_class, version)
        return self._scalar_to_kp(value, fld.type, kf)

    @staticmethod
    def _scalar_to_kp(value, kafka_type, kf):
        if kafka_type == "uuid":
            return uuid.UUID(bytes=value)
        if isinstance(kf, SimpleField) and kf._type is BitField:
            if value == INT32_MIN:
                return None
            return {bit for bit in range(32) if (value & 0xFFFFFFFF) >> bit & 1}
        return value

    # kafka-python -> project

    def from_kp(self, kp_obj, version: int):
        return self._struct_from_kp(kp_obj, self.case.schema.root, self.kp_cls._struct, version)

    def _struct_from_kp(self, kp_obj, struct, kp_struct, version):
        cls = getattr(self.module, struct.name)
        kwargs = {}
        for fld, kf in self.pairs(struct, kp_struct, version):
            value = getattr(kp_obj, kf.name)
            if version in fld.tagged and value == kf.default:
                continue  # not on the wire: the project default applies
            kwargs[attr_name(fld)] = self._value_from_kp(value, fld, kf, version)
        unknown = getattr(kp_obj, "unknown_tags", None)
        if unknown:
            kwargs["unknown_tagged_fields"] = {int(k[1:]): bytes(v) for k, v in unknown.items()}
        return cls(**kwargs)

    def _value_from_kp(self, value, fld, kf, version):
        if fld.type == "uuid":
            return ZERO_UUID if value is None else value.bytes
        if isinstance(kf, SimpleField) and kf._type is BitField:
            if value is None:
                return INT32_MIN
            raw = sum(1 << bit for bit in value)
            return raw - (1 << 32) if raw & 0x80000000 else raw
        if value is None:
            return None
        if fld.is_array:
            if fld.is_struct:
                return [self._struct_from_kp(v, fld.struct, kf.array_of, version) for v in value]
            if fld.element_type == "uuid":
                return [ZERO_UUID if v is None else v.bytes for v in value]
            return list(value)
        if fld.is_struct:
            return self._struct_from_kp(value, fld.struct, kf, version)
        if fld.type in ("bytes", "records"):
            return bytes(value)
        return value


# --- which messages ---------------------------------------------------------------------------

# Project schemas with no fields at all, which kafka-python's engine cannot load.
EMPTY_SCHEMAS = {"EndTransactionRecord", "ListClientMetricsResourcesRequest", "NoOpRecord"}


def _kp_class(case, request: pytest.FixtureRequest):
    # Only the classes kafka-python does not ship need Kafka's schemas from the shared data.
    kp_cls = SHIPPED.get(case.schema.name) or request.getfixturevalue("kp_upstream")[case.schema.name]
    if isinstance(kp_cls, Exception):
        pytest.skip(f"kafka-python cannot load {case.schema.name}: {kp_cls!r}")
    return kp_cls


def _params():
    return [pytest.param(c, id=c.rel.with_suffix("").as_posix()) for c in CASES]


def test_every_project_schema_is_cross_checked(request, kp_upstream):
    """No project schema is left out: each has a kafka-python class and shared versions."""
    unloadable = {name for name, cls in kp_upstream.items() if isinstance(cls, Exception)}
    assert unloadable == EMPTY_SCHEMAS
    for case in CASES:
        if case.schema.name not in unloadable:
            assert _common_versions(case, _kp_class(case, request)), case.schema.name


def test_kafka_python_cannot_load_empty_schemas(kp_upstream):
    """The three skipped schemas really have no fields, and that is what kafka-python trips on."""
    for case in CASES:
        if case.schema.name in EMPTY_SCHEMAS:
            assert case.schema.root.fields == []
            assert "NoneType" in str(kp_upstream[case.schema.name])
            # What kafka-python would have to match: an empty body, i.e. only the (empty)
            # tagged-field section in flexible versions.
            for version in case.versions():
                assert case.cls()().encode(version) == (b"\x00" if version in case.schema.flexible else b"")
    shipped = [c.schema.name for c in CASES if c.schema.name in SHIPPED]
    assert "MetadataResponse" in shipped and "BrokerHeartbeatRequest" not in shipped


@pytest.mark.parametrize("case", _params())
def test_same_bytes_as_kafka_python(case, request):
    kp_cls = _kp_class(case, request)
    versions = _common_versions(case, kp_cls)
    ours_cls = case.cls()
    bridge = Bridge(case, kp_cls)
    # kafka-python reads but cannot write unknown tagged fields, and reads none at all inside a
    # struct that is the value of a tagged field.
    values = MessageValues(case.schema, case.module(), unknown_tags_in_tagged_fields=False)

    for version in versions:
        @hypothesis_settings(12)
        @given(values.strategy(version))
        def run(obj):
            # Our bytes, with unknown tags, read by kafka-python.
            full = obj.encode(version)
            kp_obj, end = kp_decode(kp_cls, full, version)
            assert end == len(full)
            assert bridge.from_kp(kp_obj, version) == obj
            # The same values, without unknown tags, written by both sides.
            plain = strip_unknown_tags(obj)
            ours = plain.encode(version)
            theirs = kp_encode(bridge.to_kp(plain, version), kp_cls, version)
            assert theirs.hex(" ") == ours.hex(" ")
            # kafka-python's bytes read by us.
            decoded, end = ours_cls.decode(theirs, version)
            assert end == len(theirs)
            assert decoded == plain

        run()


# --- the quirks, pinned down ----------------------------------------------------------------

def test_kafka_python_tag_order_quirk():
    """With PartitionChangeRecord as published, kafka-python writes tag 8 before tags 6 and 7.
    Our decoder accepts any order; our encoder writes the canonical ascending order."""
    from protocol.generated.metadata.partition_change_record import PartitionChangeRecord

    def as_published(metacls, data):
        data = copy.deepcopy(data)
        for f in data["fields"]:
            if "tag" in f:
                f["tag"] = int(f["tag"])
        data["type"] = "data"
        return data

    with _json_package("PartitionChangeRecord", "metadata") as resources:
        kp_cls = types.new_class("PartitionChangeRecord", (ApiData,), {"load_json": resources},
                                 lambda ns: ns.update(json_patch=classmethod(as_published)))
    directory = bytes(range(16))
    theirs = bytes(kp_cls(version=2, partition_id=1, topic_id=uuid.UUID(int=7),
                          directories=[uuid.UUID(bytes=directory)],
                          eligible_leader_replicas=[4]).encode(version=2, header=False))
    ours = PartitionChangeRecord(partition_id=1, topic_id=uuid.UUID(int=7).bytes,
                                 directories=[directory], eligible_leader_replicas=[4])
    assert theirs != ours.encode(2)
    assert theirs.index(b"\x08\x11\x02") < theirs.index(b"\x06\x05\x02")  # tag 8 first
    decoded, end = PartitionChangeRecord.decode(theirs, 2)
    assert end == len(theirs)
    assert decoded == ours
    assert ours.encode(2).index(b"\x06\x05\x02") < ours.encode(2).index(b"\x08\x11\x02")


def test_kafka_python_api_versions_error_quirk():
    """kafka-python's ApiVersionsResponse.decode falls back to v0 when error_code != 0, which is
    why the cross-check calls the compiled decoder directly."""
    from protocol.generated.messages.api_versions_response import ApiVersionsResponse
    kp_cls = SHIPPED["ApiVersionsResponse"]
    v0_body = ApiVersionsResponse(error_code=35).encode(0)
    assert kp_cls.decode(v0_body, version=3).error_code == 35
    assert kp_cls.decode(v0_body, version=3).version == 0
    v3_body = ApiVersionsResponse(error_code=35, throttle_time_ms=9).encode(3)
    obj, end = kp_decode(kp_cls, v3_body, 3)
    assert (obj.error_code, obj.throttle_time_ms, end) == (35, 9, len(v3_body))


def test_kafka_python_string_tag_quirk():
    """Upstream BrokerHeartbeatRequest writes its tag as "0"; kafka-python cannot encode it."""
    raw = (upstream_schemas() / "message" / "BrokerHeartbeatRequest.json").read_text()
    assert re.search(r'"tag":\s*"0"', raw)
    with _json_package("BrokerHeartbeatRequest", "message") as resources:
        kp_cls = types.new_class("BrokerHeartbeatRequest", (ApiMessage,), {"load_json": resources})
    obj = kp_cls(version=1, broker_id=1, broker_epoch=2, current_metadata_offset=3,
                 want_fence=False, want_shut_down=False, offline_log_dirs=[uuid.UUID(int=1)])
    with pytest.raises(TypeError):
        obj.encode(version=1)


def test_kafka_python_version_field_quirk(kp_upstream):
    """ApiData.decode passes decoded fields as keywords next to its own ``version=``, so a
    schema with a field named Version cannot be decoded that way."""
    from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
    kp_cls = kp_upstream["KRaftVersionRecord"]
    data = KRaftVersionRecord(version=1, k_raft_version=1).encode(0)
    with pytest.raises(TypeError, match="multiple values for keyword argument 'version'"):
        kp_cls.decode(data, version=0, header=False)
    obj, end = kp_decode(kp_cls, data, 0)
    assert (obj.version, obj.k_raft_version, end) == (1, 1, len(data))


class _json_package:
    """A throwaway importable package holding one upstream JSON file."""

    def __init__(self, name: str, folder: str) -> None:
        self.name, self.folder = name, folder

    def __enter__(self):
        import tempfile
        self.tmp = tempfile.TemporaryDirectory()
        package = f"kw_kpone_{uuid.uuid4().hex[:12]}"
        target = Path(self.tmp.name) / package
        target.mkdir()
        (target / "__init__.py").touch()
        shutil.copy(upstream_schemas() / self.folder / f"{self.name}.json", target / f"{self.name}.json")
        sys.path.insert(0, self.tmp.name)
        self.package = package
        return importlib.import_module(package)

    def __exit__(self, *exc):
        # load_json reads the file while the class is being created, inside the with block.
        sys.path.remove(self.tmp.name)
        sys.modules.pop(self.package, None)
        self.tmp.cleanup()


def test_bridge_is_not_vacuous():
    """The field pairing really maps values: a changed value shows up on the other side."""
    case = next(c for c in CASES if c.schema.name == "MetadataResponse")
    kp_cls = SHIPPED["MetadataResponse"]
    bridge = Bridge(case, kp_cls)
    cls = case.cls()
    obj = cls(cluster_authorized_operations=0b1011, throttle_time_ms=5)
    kp_obj = bridge.to_kp(obj, 10)  # ClusterAuthorizedOperations exists in v8-10
    assert kp_obj.authorized_operations == {0, 1, 3}
    assert kp_obj.throttle_time_ms == 5
    assert bridge.from_kp(kp_obj, 10) == obj
    kp_obj.throttle_time_ms = 6
    assert bridge.from_kp(kp_obj, 10) != obj
