"""server.controller.configs: dynamic topic and broker configs, driven the way the controller
drives them: a handler returns records, the test replays them, and only then does state change."""

from __future__ import annotations

import pytest

from protocol.constants import AlterConfigOpType, ConfigResourceType, ConfigSource, ConfigType
from protocol.error_codes import Error
from protocol.generated.messages import alter_configs_request as legacy_req
from protocol.generated.messages import incremental_alter_configs_request as inc_req
from protocol.generated.messages.alter_configs_response import AlterConfigsResponse
from protocol.generated.messages.describe_configs_request import (
    DescribeConfigsRequest, DescribeConfigsResource)
from protocol.generated.messages.describe_configs_response import DescribeConfigsResponse
from protocol.generated.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from protocol.generated.metadata.config_record import ConfigRecord
from server.controller.config_defs import BROKER_CONFIGS, DEFINITIONS, TOPIC_CONFIGS, check, parse
from server.controller.configs import ConfigControl
from server.controller.result import ControllerResult

TOPIC, BROKER = ConfigResourceType.TOPIC, ConfigResourceType.BROKER
SET, DELETE, APPEND, SUBTRACT = (
    AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT)
DYN_TOPIC, DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = (
    ConfigSource.TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG,
    ConfigSource.DEFAULT_CONFIG)

STATIC_PROPS = {
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "eligible.leader.replicas.enabled": "false",
    "max.request.partition.size.limit": "2000",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "node.id": "1",  # not a dynamic config: ignored
}
TOPICS = {"orders", "payments"}
BROKERS = {1, 2}


def topic_exists(name: str) -> bool:
    return name in TOPICS


def broker_exists(broker_id: int) -> bool:
    return broker_id in BROKERS


@pytest.fixture
def control() -> ConfigControl:
    return ConfigControl(STATIC_PROPS)


# --- helpers ---------------------------------------------------------------------------------
def replay(control: ConfigControl, result: ControllerResult) -> None:
    """Commit a handler's records: through the wire format, as a standby would see them."""
    for record, version in result.records:
        assert version == 0
        decoded, _ = ConfigRecord.decode(record.encode(version), version)
        control.replay_config(decoded)


def inc(*resources: inc_req.AlterConfigsResource,
        validate_only: bool = False) -> inc_req.IncrementalAlterConfigsRequest:
    return inc_req.IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only)


def res(rtype: int, name: str, *ops: tuple[str, int, str | None]) -> inc_req.AlterConfigsResource:
    return inc_req.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[inc_req.AlterableConfig(name=key, config_operation=op, value=value)
                 for key, op, value in ops])


def alter(control: ConfigControl, *resources: inc_req.AlterConfigsResource,
          validate_only: bool = False, version: int = 1) -> ControllerResult:
    result = control.incremental_alter_configs(inc(*resources, validate_only=validate_only), version,
                                               topic_exists, broker_exists)
    assert_encodes(result.response, IncrementalAlterConfigsResponse)
    return result


def commit(control: ConfigControl, *resources: inc_req.AlterConfigsResource) -> ControllerResult:
    result = alter(control, *resources)
    assert all(r.error_code == Error.NONE for r in result.response.responses), result.response
    replay(control, result)
    return result


def legacy(control: ConfigControl, rtype: int, name: str, configs: dict[str, str | None],
           validate_only: bool = False) -> ControllerResult:
    request = legacy_req.AlterConfigsRequest(validate_only=validate_only, resources=[
        legacy_req.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
            legacy_req.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    result = control.alter_configs(request, 0, topic_exists, broker_exists)
    assert_encodes(result.response, AlterConfigsResponse)
    return result


def describe(control: ConfigControl, rtype: int, name: str, keys: list[str] | None = None,
             synonyms: bool = True, docs: bool = False, version: int = 4):
    """Send a DescribeConfigs through the wire at `version`, answer it, and check the answer
    encodes at that version too."""
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                           configuration_keys=keys)],
        include_synonyms=synonyms and version >= 1, include_documentation=docs and version >= 3)
    request, _ = DescribeConfigsRequest.decode(request.encode(version), version)
    response = control.describe_configs(request, version, topic_exists, broker_exists)
    assert_encodes(response, DescribeConfigsResponse, versions=[version])
    return response.results[0]


def entries(result) -> dict:
    assert result.error_code == Error.NONE, result.error_message
    return {entry.name: entry for entry in result.configs}


def synonyms_of(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def assert_encodes(response, cls, versions: list[int] | None = None) -> None:
    """The response is valid at every version of its API: it encodes, decodes and re-encodes
    to the same bytes."""
    low, high = cls.VALID_VERSIONS
    for version in versions if versions is not None else range(low, high + 1):
        data = response.encode(version)
        decoded, end = cls.decode(data, version)
        assert end == len(data)
        assert decoded.encode(version) == data


def errors(result: ControllerResult) -> list[tuple[int, str | None]]:
    return [(r.error_code, r.error_message) for r in result.response.responses]


# --- definitions -----------------------------------------------------------------------------
def test_definitions_carry_kafkas_defaults_and_types():
    expected = {
        "retention.ms": (ConfigType.LONG, "604800000"),
        "segment.bytes": (ConfigType.INT, "1073741824"),
        "max.message.bytes": (ConfigType.INT, "1048588"),
        "min.insync.replicas": (ConfigType.INT, "1"),
        "cleanup.policy": (ConfigType.LIST, "delete"),
        "compression.type": (ConfigType.STRING, "producer"),
        "unclean.leader.election.enable": (ConfigType.BOOLEAN, "false"),
        "min.cleanable.dirty.ratio": (ConfigType.DOUBLE, "0.5"),
        "eligible.leader.replicas.enabled": (ConfigType.BOOLEAN, "false"),
        "max.request.partition.size.limit": (ConfigType.INT, "2000"),
        "log.retention.hours": (ConfigType.INT, "168"),
        "log.retention.ms": (ConfigType.LONG, None),
    }
    for name, (kind, default) in expected.items():
        assert (DEFINITIONS[name].type, DEFINITIONS[name].default) == (kind, default), name
    assert "eligible.leader.replicas.enabled" in set(TOPIC_CONFIGS) & set(BROKER_CONFIGS)
    assert "num.partitions" in BROKER_CONFIGS and "num.partitions" not in TOPIC_CONFIGS
    assert "retention.ms" not in BROKER_CONFIGS


def test_every_synonym_is_a_broker_config_and_every_default_is_valid():
    for defn in DEFINITIONS.values():
        assert defn.topic or defn.broker
        assert defn.doc
        for synonym in defn.synonyms:
            assert DEFINITIONS[synonym.name].broker, (defn.name, synonym.name)
        if defn.default is not None:
            assert check(defn, defn.default) is None, defn.name
        if defn.topic:
            assert defn.default is not None, defn.name


def test_parse_reads_values_as_kafka_does():
    assert parse(DEFINITIONS["unclean.leader.election.enable"], " TRUE ") is True
    assert parse(DEFINITIONS["cleanup.policy"], "compact , delete") == ["compact", "delete"]
    assert parse(DEFINITIONS["leader.replication.throttled.replicas"], "") == []
    assert parse(DEFINITIONS["min.cleanable.dirty.ratio"], "1e-1") == 0.1
    for name, bad in [("segment.bytes", "1_000_000"), ("segment.bytes", "2147483648"),
                      ("min.cleanable.dirty.ratio", "nan"), ("preallocate", "yes")]:
        with pytest.raises(ValueError):
            parse(DEFINITIONS[name], bad)


# --- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize("rtype, name, value, fragment", [
    (TOPIC, "min.insync.replicas", "-1",
     "Invalid value -1 for configuration min.insync.replicas: Value must be at least 1"),
    (TOPIC, "unclean.leader.election.enable", "maybe",
     "configuration unclean.leader.election.enable: Expected value"),
    (TOPIC, "retention.days", "7", "Unknown topic config name: retention.days"),
    (TOPIC, "cleanup.policy", "delete,archive", "configuration cleanup.policy: List items must be among"),
    (TOPIC, "cleanup.policy", "delete,delete", "cleanup.policy: Values must not be duplicated"),
    (TOPIC, "compression.type", "brotli", "configuration compression.type: String must be one of"),
    (TOPIC, "segment.bytes", "1000", "configuration segment.bytes: Value must be at least 1048576"),
    (TOPIC, "min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio: Value must be no more"),
    (TOPIC, "leader.replication.throttled.replicas", "0:1,x", "leader.replication.throttled.replicas"),
    (TOPIC, "log.retention.ms", "1", "Unknown topic config name: log.retention.ms"),
    (BROKER, "retention.ms", "1",
     "retention.ms is a topic config; its broker-level form is log.retention.ms"),
    (BROKER, "remote.storage.enable", "true", "remote.storage.enable is a topic config"),
    (BROKER, "max.request.partition.size.limit", "0", "configuration max.request.partition.size.limit"),
    (BROKER, "num.partitions", "many", "configuration num.partitions: Not a number of type INT"),
    (8, "log.level", "DEBUG", "Resource type 8"),
])
def test_validate_names_the_key_and_the_reason(control, rtype, name, value, fragment):
    message = control.validate(rtype, name, value)
    assert message is not None and fragment in message


@pytest.mark.parametrize("rtype, name, value", [
    (TOPIC, "retention.ms", "-1"),
    (TOPIC, "cleanup.policy", "compact,delete"),
    (TOPIC, "cleanup.policy", ""),
    (TOPIC, "leader.replication.throttled.replicas", "*"),
    (TOPIC, "eligible.leader.replicas.enabled", "true"),
    (BROKER, "log.retention.hours", "24"),
    (BROKER, "min.insync.replicas", "3"),
    (BROKER, "some.plugin.setting", "anything"),  # custom broker configs are allowed, as in Kafka
    (TOPIC, "retention.days", None),  # deleting is always allowed
])
def test_validate_accepts(control, rtype, name, value):
    assert control.validate(rtype, name, value) is None


def test_static_settings_are_checked_at_startup():
    with pytest.raises(ValueError, match="min.insync.replicas"):
        ConfigControl({"min.insync.replicas": "0"})


# --- incremental alter -----------------------------------------------------------------------
def test_set_then_delete(control):
    result = commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1000"),
                                 ("cleanup.policy", SET, "compact")))
    assert [(r.name, r.value) for r, _ in result.records] == [
        ("retention.ms", "1000"), ("cleanup.policy", "compact")]
    assert control.topic_configs("orders") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert control.topic_value("orders", "retention.ms") == "1000"

    result = commit(control, res(TOPIC, "orders", ("retention.ms", DELETE, None)))
    assert [(r.name, r.value) for r, _ in result.records] == [("retention.ms", None)]
    assert control.topic_configs("orders") == {"cleanup.policy": "compact"}
    assert control.topic_value("orders", "retention.ms") == "604800000"


def test_unchanged_values_write_no_records(control):
    commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1000")))
    result = commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1000"),
                                 ("segment.ms", DELETE, None)))
    assert result.records == []


def test_append_and_subtract_on_lists(control):
    key = "leader.replication.throttled.replicas"
    commit(control, res(TOPIC, "orders", (key, APPEND, "0:1")))
    assert control.topic_configs("orders")[key] == "0:1"
    commit(control, res(TOPIC, "orders", (key, APPEND, "1:2,0:1,2:3")))
    assert control.topic_configs("orders")[key] == "0:1,1:2,2:3"
    commit(control, res(TOPIC, "orders", (key, SUBTRACT, "0:1,9:9")))
    assert control.topic_configs("orders")[key] == "1:2,2:3"
    commit(control, res(TOPIC, "orders", (key, SUBTRACT, "1:2,2:3")))
    assert control.topic_configs("orders")[key] == ""


def test_append_starts_from_the_inherited_value(control):
    # Unset, cleanup.policy inherits Kafka's default "delete": appending keeps it.
    commit(control, res(TOPIC, "orders", ("cleanup.policy", APPEND, "compact")))
    assert control.topic_configs("orders")["cleanup.policy"] == "delete,compact"
    # With a cluster default, the topic extends what it inherits from there.
    commit(control, res(BROKER, "", ("log.cleanup.policy", SET, "compact")))
    commit(control, res(TOPIC, "payments", ("cleanup.policy", APPEND, "delete")))
    assert control.topic_configs("payments")["cleanup.policy"] == "compact,delete"
    commit(control, res(BROKER, "1", ("log.cleanup.policy", SUBTRACT, "compact")))
    assert control.topic_value("payments", "cleanup.policy") == "compact,delete"


def test_invalid_ops_fail_the_whole_resource_and_name_the_key(control):
    result = alter(control,
                   res(TOPIC, "orders", ("retention.ms", SET, "1000"), ("min.insync.replicas", SET, "-1")),
                   res(TOPIC, "payments", ("retention.ms", SET, "2000")),
                   res(TOPIC, "orders-typo", ("retention.ms", SET, "1")),
                   res(TOPIC, "payments", ("unclean.leader.election.enable", SET, "yes")))
    codes = errors(result)
    assert codes[0][0] == Error.INVALID_CONFIG and "min.insync.replicas" in codes[0][1]
    # The same resource twice is refused once, as Kafka's ControllerApis does.
    assert codes[1] == (Error.INVALID_REQUEST, "Duplicate resource.")
    assert codes[2][0] == Error.UNKNOWN_TOPIC_OR_PARTITION
    assert len(codes) == 3
    assert result.records == []


@pytest.mark.parametrize("op, fragment", [
    (("unclean.leader.election.enable", SET, "maybe"), "unclean.leader.election.enable"),
    (("retention.days", SET, "7"), "Unknown topic config name: retention.days"),
    (("retention.ms", APPEND, "5"), "Can't APPEND to key retention.ms because its type is not LIST."),
    (("compression.type", SUBTRACT, "gzip"),
     "Can't SUBTRACT to key compression.type because its type is not LIST."),
    (("retention.ms", SET, None), "retention.ms"),
])
def test_incremental_errors(control, op, fragment):
    result = alter(control, res(TOPIC, "orders", ("segment.ms", SET, "1000"), op))
    [(code, message)] = errors(result)
    assert code == Error.INVALID_CONFIG and fragment in message
    assert result.records == []


def test_unknown_operation_is_an_invalid_request_and_the_last_op_on_a_key_wins(control):
    replay(control, alter(control, res(TOPIC, "payments", ("retention.ms", SET, "5"))))
    result = alter(control, res(TOPIC, "orders", ("retention.ms", 7, "1")),
                   res(TOPIC, "payments", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None)))
    assert [code for code, _ in errors(result)] == [Error.INVALID_REQUEST, Error.NONE]
    # As in Kafka's ControllerApis, a key given twice keeps its last operation.
    assert [(r.name, r.value) for r, _ in result.records] == [("retention.ms", None)]


def test_validate_only_checks_but_writes_nothing(control):
    result = alter(control, res(TOPIC, "orders", ("retention.ms", SET, "1000")),
                   res(TOPIC, "payments", ("min.insync.replicas", SET, "0")), validate_only=True)
    assert errors(result)[0] == (Error.NONE, None)
    assert errors(result)[1][0] == Error.INVALID_CONFIG
    assert result.records == []


def test_handlers_never_change_state(control):
    commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1000")))
    before = list(control.snapshot_records())
    request = inc(res(TOPIC, "orders", ("retention.ms", DELETE, None), ("cleanup.policy", APPEND, "compact")))
    control.incremental_alter_configs(request, 1, topic_exists, broker_exists)
    legacy(control, TOPIC, "orders", {"segment.ms": "5"})
    describe(control, TOPIC, "orders")
    assert list(control.snapshot_records()) == before


def test_broker_resources(control):
    result = alter(control, res(BROKER, "x1", ("num.partitions", SET, "3")),
                   res(BROKER, "01", ("num.partitions", SET, "3")),
                   res(BROKER, "7", ("num.partitions", SET, "3")),
                   res(BROKER, "", ("retention.ms", SET, "3")),
                   res(8, "1", ("log4j.logger.kafka", SET, "DEBUG")),
                   res(BROKER, "2", ("some.plugin.setting", SET, "x"), ("log.retention.hours", SET, "24")))
    assert [code for code, _ in errors(result)] == [
        Error.INVALID_REQUEST, Error.INVALID_REQUEST, Error.BROKER_ID_NOT_REGISTERED, Error.INVALID_CONFIG,
        Error.INVALID_REQUEST, Error.NONE]
    replay(control, result)
    assert [(r.resource_name, r.name, r.value) for r, _ in control.snapshot_records()] == [
        ("2", "log.retention.hours", "24"), ("2", "some.plugin.setting", "x")]


# --- precedence of the controller's own lookups ----------------------------------------------
def test_topic_then_cluster_default_then_static_then_kafka_default(control):
    assert control.min_insync_replicas("orders") == 2  # static
    commit(control, res(BROKER, "", ("min.insync.replicas", SET, "3")))
    assert control.min_insync_replicas("orders") == 3  # dynamic cluster default beats static
    commit(control, res(BROKER, "1", ("min.insync.replicas", SET, "4")))
    assert control.min_insync_replicas("orders") == 3  # one broker's setting is that broker's business
    commit(control, res(TOPIC, "orders", ("min.insync.replicas", SET, "1")))
    assert (control.min_insync_replicas("orders"), control.min_insync_replicas("payments")) == (1, 3)
    commit(control, res(BROKER, "", ("min.insync.replicas", DELETE, None)))
    assert control.min_insync_replicas("payments") == 2
    assert ConfigControl({}).min_insync_replicas("payments") == 1  # Kafka's default


def test_typed_lookups(control):
    assert control.unclean_leader_election("orders") is False
    assert control.elr_enabled("orders") is False
    assert (control.max_request_partition_size_limit(), control.default_partitions(),
            control.default_replication_factor()) == (2000, 1, 1)
    commit(control,
           res(BROKER, "", ("eligible.leader.replicas.enabled", SET, "true"), ("num.partitions", SET, "6"),
               ("default.replication.factor", SET, "3"), ("max.request.partition.size.limit", SET, "50")),
           res(BROKER, "1", ("num.partitions", SET, "9")),
           res(TOPIC, "orders", ("unclean.leader.election.enable", SET, "TRUE"),
               ("eligible.leader.replicas.enabled", SET, "false")))
    assert control.unclean_leader_election("orders") is True
    assert control.unclean_leader_election("payments") is False
    assert (control.elr_enabled("orders"), control.elr_enabled("payments")) == (False, True)
    assert (control.max_request_partition_size_limit(), control.default_partitions(),
            control.default_replication_factor()) == (50, 6, 3)
    assert ConfigControl({}).max_request_partition_size_limit() == 2000


def test_topic_values_come_from_broker_synonyms_in_their_units():
    control = ConfigControl({"log.retention.hours": "24", "log.roll.ms": "5000"})
    assert control.topic_value("orders", "retention.ms") == str(24 * 3_600_000)
    assert control.topic_value("orders", "segment.ms") == "5000"
    assert control.topic_value("orders", "max.message.bytes") == "1048588"
    commit(control, res(BROKER, "", ("log.retention.minutes", SET, "10")))
    assert control.topic_value("orders", "retention.ms") == "600000"
    commit(control, res(BROKER, "", ("log.retention.ms", SET, "42")))
    assert control.topic_value("orders", "retention.ms") == "42"
    assert ConfigControl({"log.retention.hours": "-1"}).topic_value("orders", "retention.ms") == "-1"
    with pytest.raises(KeyError):
        control.topic_value("orders", "num.partitions")


def test_forget_topic(control):
    commit(control, res(TOPIC, "orders", ("min.insync.replicas", SET, "1"), ("retention.ms", SET, "5")))
    control.forget_topic("orders")
    assert control.topic_configs("orders") == {}
    assert control.min_insync_replicas("orders") == 2
    assert list(control.snapshot_records()) == []
    control.forget_topic("never-existed")


def test_create_topic_records(control):
    records = control.create_topic_records("orders", {"retention.ms": "5", "cleanup.policy": "compact"})
    assert [(r.resource_type, r.resource_name, r.name, r.value, v) for r, v in records] == [
        (TOPIC, "orders", "retention.ms", "5", 0), (TOPIC, "orders", "cleanup.policy", "compact", 0)]
    replay(control, ControllerResult(records))
    assert control.topic_configs("orders") == {"retention.ms": "5", "cleanup.policy": "compact"}


# --- legacy AlterConfigs ---------------------------------------------------------------------
def test_alter_configs_replaces_the_whole_set(control):
    commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1000"), ("cleanup.policy", SET, "compact"),
                        ("segment.ms", SET, "99")))
    result = legacy(control, TOPIC, "orders",
                    {"retention.ms": "2000", "segment.ms": "99", "flush.ms": "10"})
    assert errors(result) == [(Error.NONE, None)]
    assert sorted((r.name, r.value) for r, _ in result.records) == [
        ("cleanup.policy", None), ("flush.ms", "10"), ("retention.ms", "2000")]
    replay(control, result)
    assert control.topic_configs("orders") == {"retention.ms": "2000", "segment.ms": "99", "flush.ms": "10"}

    replay(control, legacy(control, TOPIC, "orders", {}))
    assert control.topic_configs("orders") == {}


def test_alter_configs_errors_write_nothing(control):
    commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1000")))
    for configs, code, fragment in [
        ({"retention.ms": "1", "min.insync.replicas": "0"}, Error.INVALID_CONFIG, "min.insync.replicas"),
        ({"retention.ms": None}, Error.INVALID_CONFIG, "retention.ms"),
        ({"bogus": "1"}, Error.INVALID_CONFIG, "Unknown topic config name: bogus"),
    ]:
        result = legacy(control, TOPIC, "orders", configs)
        [(got, message)] = errors(result)
        assert got == code and fragment in message
        assert result.records == []
    assert legacy(control, TOPIC, "orders", {"retention.ms": "5"}, validate_only=True).records == []
    assert errors(legacy(control, TOPIC, "nope", {}))[0][0] == Error.UNKNOWN_TOPIC_OR_PARTITION


# --- DescribeConfigs -------------------------------------------------------------------------
def test_describe_topic_defaults(control):
    configs = entries(describe(control, TOPIC, "orders"))
    assert sorted(configs) == sorted(TOPIC_CONFIGS)
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only, retention.is_sensitive) == (
        "604800000", DEFAULT, False, False)
    assert synonyms_of(retention) == [("log.retention.hours", "168", DEFAULT)]
    isr = configs["min.insync.replicas"]
    assert (isr.value, isr.config_source) == ("2", STATIC)
    assert synonyms_of(isr) == [("min.insync.replicas", "2", STATIC), ("min.insync.replicas", "1", DEFAULT)]
    throttled = configs["leader.replication.throttled.replicas"]
    assert (throttled.value, throttled.config_source, synonyms_of(throttled)) == ("", DEFAULT, [])


def test_describe_after_alter_lists_sources_most_specific_first(control):
    commit(control, res(BROKER, "", ("log.retention.ms", SET, "5000"), ("min.insync.replicas", SET, "3")),
           res(TOPIC, "orders", ("retention.ms", SET, "1000")))
    configs = entries(describe(control, TOPIC, "orders"))
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", DYN_TOPIC)
    assert synonyms_of(configs["retention.ms"]) == [
        ("retention.ms", "1000", DYN_TOPIC), ("log.retention.ms", "5000", DYN_DEFAULT),
        ("log.retention.hours", "168", DEFAULT)]
    isr = configs["min.insync.replicas"]
    assert (isr.value, isr.config_source) == ("3", DYN_DEFAULT)
    assert synonyms_of(isr) == [
        ("min.insync.replicas", "3", DYN_DEFAULT), ("min.insync.replicas", "2", STATIC),
        ("min.insync.replicas", "1", DEFAULT)]
    other = entries(describe(control, TOPIC, "payments"))["retention.ms"]
    assert (other.value, other.config_source) == ("5000", DYN_DEFAULT)


def test_describe_filters_keys(control):
    filtered = describe(control, TOPIC, "orders", keys=["retention.ms", "no.such.key"])
    assert list(entries(filtered)) == ["retention.ms"]
    assert len(entries(describe(control, TOPIC, "orders", keys=[]))) == len(TOPIC_CONFIGS)


@pytest.mark.parametrize("version", range(0, 5))
def test_describe_fields_follow_the_version(control, version):
    commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1000")))
    configs = entries(describe(control, TOPIC, "orders", synonyms=True, docs=True, version=version))
    retention, segment = configs["retention.ms"], configs["segment.ms"]
    if version == 0:
        assert (retention.is_default, segment.is_default) == (False, True)
    else:
        assert (retention.config_source, segment.config_source) == (DYN_TOPIC, DEFAULT)
        assert not retention.is_default
        assert synonyms_of(retention)[0] == ("retention.ms", "1000", DYN_TOPIC)
    assert retention.config_type == ConfigType.LONG
    assert (retention.documentation is not None) == (version >= 3)

    plain = entries(describe(control, TOPIC, "orders", synonyms=False, docs=False, version=version))
    assert plain["retention.ms"].synonyms == [] and plain["retention.ms"].documentation is None


def test_describe_brokers(control):
    commit(control, res(BROKER, "", ("log.retention.ms", SET, "5000"), ("num.partitions", SET, "4")),
           res(BROKER, "1", ("num.partitions", SET, "8"), ("secret.plugin.password", SET, "hunter2")))
    broker = entries(describe(control, BROKER, "1", docs=True))
    assert set(BROKER_CONFIGS) <= set(broker)
    partitions = broker["num.partitions"]
    assert (partitions.value, partitions.config_source, partitions.config_type) == (
        "8", DYN_BROKER, ConfigType.INT)
    assert synonyms_of(partitions) == [
        ("num.partitions", "8", DYN_BROKER), ("num.partitions", "4", DYN_DEFAULT),
        ("num.partitions", "1", STATIC), ("num.partitions", "1", DEFAULT)]
    unset = broker["log.roll.ms"]
    assert (unset.value, unset.config_source, unset.synonyms) == (None, DEFAULT, [])
    custom = broker["secret.plugin.password"]
    assert (custom.value, custom.is_sensitive, custom.config_type) == (None, True, ConfigType.UNKNOWN)
    assert synonyms_of(custom) == [("secret.plugin.password", None, DYN_BROKER)]
    assert broker["log.retention.ms"].value == "5000"
    assert entries(describe(control, BROKER, "2"))["num.partitions"].value == "4"

    cluster = entries(describe(control, BROKER, ""))
    assert sorted(cluster) == ["log.retention.ms", "num.partitions"]
    assert synonyms_of(cluster["num.partitions"]) == [("num.partitions", "4", DYN_DEFAULT)]


def test_describe_errors_are_per_resource(control):
    request = DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=TOPIC, resource_name="missing", configuration_keys=None),
        DescribeConfigsResource(resource_type=BROKER, resource_name="one", configuration_keys=None),
        DescribeConfigsResource(resource_type=BROKER, resource_name="9", configuration_keys=None),
        DescribeConfigsResource(resource_type=8, resource_name="1", configuration_keys=None),
        DescribeConfigsResource(resource_type=TOPIC, resource_name="orders",
                                configuration_keys=["retention.ms"]),
    ])
    for version in range(0, 5):
        response = control.describe_configs(request, version, topic_exists, broker_exists)
        assert_encodes(response, DescribeConfigsResponse, versions=[version])
        assert [r.error_code for r in response.results] == [
            Error.UNKNOWN_TOPIC_OR_PARTITION, Error.INVALID_REQUEST, Error.INVALID_REQUEST,
            Error.INVALID_REQUEST, Error.NONE]
        assert all(r.error_message for r in response.results[:4])
        assert [r.configs for r in response.results[:4]] == [[]] * 4
        assert [c.name for c in response.results[4].configs] == ["retention.ms"]


# --- snapshot --------------------------------------------------------------------------------
def test_snapshot_records_rebuild_identical_state(control):
    commit(control, res(TOPIC, "orders", ("retention.ms", SET, "1"), ("cleanup.policy", SET, "compact")),
           res(TOPIC, "payments", ("min.insync.replicas", SET, "1")),
           res(BROKER, "", ("num.partitions", SET, "3"), ("log.retention.hours", SET, "5")),
           res(BROKER, "2", ("custom.key", SET, "v")))
    commit(control, res(TOPIC, "orders", ("retention.ms", DELETE, None), ("segment.ms", SET, "7")),
           res(BROKER, "", ("log.retention.hours", DELETE, None)))
    records = list(control.snapshot_records())
    assert len(records) == 5 and all(v == 0 and r.value is not None for r, v in records)

    rebuilt = ConfigControl(STATIC_PROPS)
    replay(rebuilt, ControllerResult(records))
    assert list(rebuilt.snapshot_records()) == records
    for topic in TOPICS:
        assert rebuilt.topic_configs(topic) == control.topic_configs(topic)
        assert describe(rebuilt, TOPIC, topic) == describe(control, TOPIC, topic)
    for name in ["", "1", "2"]:
        assert describe(rebuilt, BROKER, name) == describe(control, BROKER, name)
    assert rebuilt.default_partitions() == control.default_partitions() == 3


# --- every response at every version ---------------------------------------------------------
def test_alter_responses_encode_at_every_version(control):
    for version in range(0, 2):
        result = control.incremental_alter_configs(
            inc(res(TOPIC, "orders", ("retention.ms", SET, "1")),
                res(TOPIC, "gone", ("retention.ms", SET, "1"))),
            version, topic_exists, broker_exists)
        assert_encodes(result.response, IncrementalAlterConfigsResponse)
    for version in range(0, 3):
        request = legacy_req.AlterConfigsRequest(resources=[
            legacy_req.AlterConfigsResource(resource_type=TOPIC, resource_name="orders", configs=[
                legacy_req.AlterableConfig(name="retention.ms", value="x")])])
        result = control.alter_configs(request, version, topic_exists, broker_exists)
        assert errors(result)[0][0] == Error.INVALID_CONFIG
        assert_encodes(result.response, AlterConfigsResponse)
