"""Dynamic configuration of topics and brokers: DescribeConfigs, IncrementalAlterConfigs and
AlterConfigs, answered from replayed ConfigRecords.

State maps (resource type, resource name) to the configs explicitly set on that resource.
BROKER "" holds the cluster-wide defaults, BROKER "<id>" one broker's own settings. The
controller's own decisions read topic -> cluster default -> its server.properties -> Kafka's
default; a broker's own settings matter only to that broker.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from protocol.constants import AlterConfigOpType, ConfigResourceType, ConfigSource, ConfigType
from protocol.error_codes import Error
from protocol.generated.messages import alter_configs_response as legacy
from protocol.generated.messages import incremental_alter_configs_response as incremental
from protocol.generated.messages.alter_configs_request import AlterConfigsRequest
from protocol.generated.messages.describe_configs_request import (
    DescribeConfigsRequest, DescribeConfigsResource)
from protocol.generated.messages.describe_configs_response import (
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult, DescribeConfigsSynonym)
from protocol.generated.messages.incremental_alter_configs_request import (
    AlterableConfig, IncrementalAlterConfigsRequest)
from protocol.generated.metadata.config_record import ConfigRecord
from server.controller.config_defs import (
    BROKER_CONFIGS, DEFINITIONS, TOPIC_CONFIGS, ConfigDef, Synonym, check, parse, sensitive, split_list,
    to_topic_units)
from server.controller.offsets import OffsetControl
from server.controller.result import ControllerResult, VersionedRecord
from server.controller.topic_names import topic_name_problem

CLUSTER_DEFAULT = ""  # the BROKER resource name that holds cluster-wide defaults
_BROKER_ID = re.compile(r"0|[1-9][0-9]{0,9}")
_DEFAULTS = {d.name: d.default for d in DEFINITIONS.values() if d.broker and d.default is not None}

TopicExists = Callable[[str], bool]
BrokerExists = Callable[[int], bool]
# The resource types Kafka's ConfigResource.Type knows (topic, broker, broker logger, client
# metrics, group); any other is UNSUPPORTED_VERSION, as in Kafka.
_KAFKA_RESOURCE_TYPES = frozenset(ConfigResourceType) - {ConfigResourceType.UNKNOWN}


class _Rejected(Exception):
    """One resource of a request fails; the others are still answered."""

    def __init__(self, code: Error, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Found(NamedTuple):
    """A place a config's value is set: a synonym in DescribeConfigs terms."""

    name: str
    value: str
    source: ConfigSource
    synonym: Synonym  # how to read `value` in the unit of the config being resolved


class _Described(NamedTuple):
    name: str
    defn: ConfigDef | None  # None: a custom broker config kraftwire does not know
    value: str | None
    source: ConfigSource
    synonyms: list[_Found]


class ConfigControl:
    def __init__(self, static: dict[str, str], offsets: OffsetControl | None = None) -> None:
        self.offsets = offsets or OffsetControl()
        for name, value in static.items():
            defn = DEFINITIONS.get(name)
            reason = check(defn, value) if defn is not None and defn.broker else None
            if reason is not None:
                raise ValueError(reason)
        self._static = dict(static)
        self._configs: dict[tuple[int, str], dict[str, str]] = {}

    # --- replay ---------------------------------------------------------------------------
    def replay_config(self, rec: ConfigRecord) -> None:
        key = (rec.resource_type, rec.resource_name)
        if self.offsets.recording:
            self._save_resource(key)
        if rec.value is not None:
            self._configs.setdefault(key, {})[rec.name] = rec.value
            return
        configs = self._configs.get(key)
        if configs is not None:
            configs.pop(rec.name, None)
            if not configs:
                del self._configs[key]

    def forget_topic(self, name: str) -> None:
        key = (int(ConfigResourceType.TOPIC), name)
        if self.offsets.recording:
            self._save_resource(key)
        self._configs.pop(key, None)

    def _save_resource(self, key: tuple[int, str]) -> None:
        old = self._configs.get(key)
        if old is None:
            self.offsets.on_undo(lambda: self._configs.pop(key, None))
        else:
            saved = dict(old)
            self.offsets.on_undo(lambda: self._configs.__setitem__(key, saved))

    def snapshot_records(self) -> Iterable[VersionedRecord]:
        for (rtype, rname), configs in sorted(self._configs.items()):
            for name, value in sorted(configs.items()):
                yield _record(rtype, rname, name, value)

    # --- lookups --------------------------------------------------------------------------
    def topic_value(self, topic: str, name: str) -> str:
        defn = DEFINITIONS[name]
        if not defn.topic:
            raise KeyError(name)
        chain = self._topic_chain(topic, defn)
        return to_topic_units(chain[0].synonym, chain[0].value) if chain else defn.default or ""

    def topic_configs(self, topic: str) -> dict[str, str]:
        return dict(self._resource(ConfigResourceType.TOPIC, topic))

    def has_topic_configs(self, topic: str) -> bool:
        """Whether the topic sets any config of its own (else it has the cluster's)."""
        return bool(self._resource(ConfigResourceType.TOPIC, topic))

    def min_insync_replicas(self, topic: str) -> int:
        return self._typed_topic_value(topic, "min.insync.replicas")

    def unclean_leader_election(self, topic: str) -> bool:
        return self._typed_topic_value(topic, "unclean.leader.election.enable")

    def elr_enabled(self, topic: str) -> bool:
        return self._typed_topic_value(topic, "eligible.leader.replicas.enabled")

    def max_request_partition_size_limit(self) -> int:
        return self._typed_cluster_value("max.request.partition.size.limit")

    def default_partitions(self) -> int:
        return self._typed_cluster_value("num.partitions")

    def default_replication_factor(self) -> int:
        return self._typed_cluster_value("default.replication.factor")

    def _typed_topic_value(self, topic: str, name: str) -> Any:
        return parse(DEFINITIONS[name], self.topic_value(topic, name))

    def _typed_cluster_value(self, name: str) -> Any:
        chain = self._broker_chain((Synonym(name),), broker=None)
        return parse(DEFINITIONS[name], chain[0].value)

    def _resource(self, rtype: int, rname: str) -> Mapping[str, str]:
        return self._configs.get((rtype, rname), {})

    def _topic_chain(self, topic: str, defn: ConfigDef, own_configs: Mapping[str, str] | None = None) -> list[_Found]:
        own = (self._resource(ConfigResourceType.TOPIC, topic) if own_configs is None else own_configs).get(defn.name)
        found = [] if own is None else [
            _Found(defn.name, own, ConfigSource.TOPIC_CONFIG, Synonym(defn.name))]
        return found + self._broker_chain(defn.synonyms, broker=None)

    def _broker_chain(self, synonyms: Iterable[Synonym], broker: str | None) -> list[_Found]:
        """Where the broker-level names are set, most specific level first, as Kafka lists
        synonyms: by level, then by the synonyms' own order within a level."""
        levels: list[tuple[ConfigSource, Mapping[str, str]]] = []
        if broker is not None:
            levels.append((ConfigSource.DYNAMIC_BROKER_CONFIG, self._resource(ConfigResourceType.BROKER, broker)))
        cluster = self._resource(ConfigResourceType.BROKER, CLUSTER_DEFAULT)
        levels += [
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, cluster),
            (ConfigSource.STATIC_BROKER_CONFIG, self._static),
            (ConfigSource.DEFAULT_CONFIG, _DEFAULTS),
        ]
        return [_Found(s.name, values[s.name], source, s)
                for source, values in levels for s in synonyms if s.name in values]

    # --- validation -----------------------------------------------------------------------
    def validate(self, resource_type: int, name: str, value: str | None) -> str | None:
        """Why `name = value` cannot be set on a resource of this type, or None. A None value
        is a deletion: allowed for any key, so keys that are no longer valid can be cleaned up."""
        if resource_type not in (ConfigResourceType.TOPIC, ConfigResourceType.BROKER):
            return f"Resource type {resource_type} has no configs here"
        if value is None:
            return None
        problem = _name_problem(resource_type, name)
        defn = DEFINITIONS.get(name)
        # A custom broker config has no definition to check its value against.
        return problem if problem is not None or defn is None else check(defn, value)

    def create_topic_records(self, topic: str, configs: dict[str, str]) -> list[VersionedRecord]:
        return [_record(ConfigResourceType.TOPIC, topic, name, value) for name, value in configs.items()]

    # --- DescribeConfigs ------------------------------------------------------------------
    def describe_configs(self, req: DescribeConfigsRequest, version: int, topic_exists: TopicExists,
                         broker_exists: BrokerExists) -> DescribeConfigsResponse:
        results = []
        for res in req.resources:
            result = DescribeConfigsResult(error_code=Error.NONE, error_message=None,
                                           resource_type=res.resource_type, resource_name=res.resource_name)
            try:
                _check_name(res.resource_type, res.resource_name)
                if not _exists(res.resource_type, res.resource_name, topic_exists, broker_exists):
                    if res.resource_type == ConfigResourceType.TOPIC:
                        raise _Rejected(Error.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name!r} does not exist.")
                    # Kafka's controller describes no broker but itself; this one describes any
                    # node it knows, and refuses other ids as Kafka does.
                    raise _Rejected(Error.INVALID_REQUEST, f"Node {res.resource_name} is neither a "
                                                           "registered broker nor a controller.")
            except _Rejected as exc:
                result.error_code, result.error_message = exc.code, exc.message
            else:
                result.configs = [_describe_entry(d, req, version) for d in self._described(res)]
            results.append(result)
        return DescribeConfigsResponse(results=results)

    def _described(self, res: DescribeConfigsResource) -> list[_Described]:
        # Kafka treats an empty key list like a null one: describe everything.
        wanted = set(res.configuration_keys) if res.configuration_keys else None
        if res.resource_type == ConfigResourceType.TOPIC:
            entries = [self._describe_topic_config(res.resource_name, name) for name in TOPIC_CONFIGS]
        elif res.resource_name == CLUSTER_DEFAULT:
            entries = self._describe_cluster_defaults()
        else:
            entries = self._describe_broker(res.resource_name)
        return [e for e in entries if wanted is None or e.name in wanted]

    def effective_topic_configs(self, creation: Mapping[str, str]) -> list[tuple[str, str | None, ConfigSource]]:
        """Every topic config a new topic with ``creation`` set on it would have, with where its
        value comes from, sorted by name: what Kafka's CreateTopics answers
        (KafkaConfigSchema.resolveEffectiveTopicConfigs)."""
        return [(d.name, d.value, d.source)
                for d in (self._describe_topic_config("", name, creation) for name in sorted(TOPIC_CONFIGS))]

    def _describe_topic_config(self, topic: str, name: str,
                               own_configs: Mapping[str, str] | None = None) -> _Described:
        defn = DEFINITIONS[name]
        chain = self._topic_chain(topic, defn, own_configs)
        if not chain:
            return _Described(name, defn, defn.default, ConfigSource.DEFAULT_CONFIG, [])
        value = to_topic_units(chain[0].synonym, chain[0].value)
        return _Described(name, defn, value, chain[0].source, chain)

    def _describe_cluster_defaults(self) -> list[_Described]:
        # Like Kafka, the cluster-default resource lists only what is set at that level.
        source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        cluster = self._resource(ConfigResourceType.BROKER, CLUSTER_DEFAULT)
        return [_Described(name, _broker_def(name), value, source,
                           [_Found(name, value, source, Synonym(name))])
                for name, value in sorted(cluster.items())]

    def _describe_broker(self, broker: str) -> list[_Described]:
        # The static level is this controller's server.properties: the only file it reads, and
        # the one its cluster-wide decisions fall back to.
        custom = {name for rname in (broker, CLUSTER_DEFAULT)
                  for name in self._resource(ConfigResourceType.BROKER, rname) if name not in DEFINITIONS}
        described = []
        for name in sorted(set(BROKER_CONFIGS) | custom):
            defn = _broker_def(name)
            chain = self._broker_chain((Synonym(name),), broker)
            if chain:
                described.append(_Described(name, defn, chain[0].value, chain[0].source, chain))
            else:
                described.append(_Described(name, defn, None, ConfigSource.DEFAULT_CONFIG, []))
        return described

    # --- IncrementalAlterConfigs and AlterConfigs -----------------------------------------
    def incremental_alter_configs(self, req: IncrementalAlterConfigsRequest, version: int,
                                  topic_exists: TopicExists,
                                  broker_exists: BrokerExists) -> ControllerResult:
        records, responses = self._alter(req.resources, req.validate_only, topic_exists, broker_exists,
                                         self._incremental_changes,
                                         incremental.AlterConfigsResourceResponse)
        return ControllerResult(records, incremental.IncrementalAlterConfigsResponse(responses=responses))

    def alter_configs(self, req: AlterConfigsRequest, version: int, topic_exists: TopicExists,
                      broker_exists: BrokerExists) -> ControllerResult:
        records, responses = self._alter(req.resources, req.validate_only, topic_exists, broker_exists,
                                         self._replacement_changes, legacy.AlterConfigsResourceResponse)
        return ControllerResult(records, legacy.AlterConfigsResponse(responses=responses))

    def _alter(self, resources: list, validate_only: bool, topic_exists: TopicExists,
               broker_exists: BrokerExists, changes_of: Callable[[int, str, list], dict[str, str | None]],
               response_type: type) -> tuple[list[VersionedRecord], list]:
        """Each resource succeeds or fails as a whole; a failed one writes nothing. As in
        Kafka's ControllerApis, a resource named more than once is not altered and gets one
        INVALID_REQUEST answer, and a resource type Kafka does not know is UNSUPPORTED_VERSION."""
        counts = Counter((res.resource_type, res.resource_name) for res in resources)
        answered: set[tuple[int, str]] = set()
        records: list[VersionedRecord] = []
        responses = []
        for res in resources:
            rtype, rname = res.resource_type, res.resource_name
            try:
                if rtype not in _KAFKA_RESOURCE_TYPES:
                    raise _Rejected(Error.UNSUPPORTED_VERSION, f"Unknown resource type {rtype}.")
                if counts[rtype, rname] > 1:
                    if (rtype, rname) in answered:
                        continue
                    answered.add((rtype, rname))
                    raise _Rejected(Error.INVALID_REQUEST, "Duplicate resource.")
                _check_name(rtype, rname)
                changes = changes_of(rtype, rname, _last_per_key(res.configs))
                if not _exists(rtype, rname, topic_exists, broker_exists):
                    if rtype == ConfigResourceType.TOPIC:
                        raise _Rejected(Error.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {rname!r} does not exist.")
                    raise _Rejected(Error.BROKER_ID_NOT_REGISTERED, f"No node with id {rname} found.")
            except _Rejected as exc:
                responses.append(response_type(error_code=exc.code, error_message=exc.message,
                                               resource_type=rtype, resource_name=rname))
                continue
            responses.append(response_type(error_code=Error.NONE, error_message=None,
                                           resource_type=rtype, resource_name=rname))
            if not validate_only:
                records += [_record(rtype, rname, name, value) for name, value in changes.items()]
        return records, responses

    def _incremental_changes(self, rtype: int, rname: str,
                             ops: list[AlterableConfig]) -> dict[str, str | None]:
        current = self._resource(rtype, rname)
        changes: dict[str, str | None] = {}
        for op in ops:
            value = self._apply(rtype, rname, op)
            self._check_value(rtype, op.name, value)
            if value != current.get(op.name):
                changes[op.name] = value
        return changes

    def _apply(self, rtype: int, rname: str, op: AlterableConfig) -> str | None:
        """The value `op` leaves behind for its key; None means unset."""
        kind = op.config_operation
        if kind == AlterConfigOpType.DELETE:
            return None
        if kind not in (AlterConfigOpType.SET, AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT):
            raise _Rejected(Error.INVALID_REQUEST, f"Unknown operation {kind} for config {op.name}")
        if op.value is None:
            raise _Rejected(Error.INVALID_CONFIG, f"{AlterConfigOpType(kind).name} of config {op.name} needs a value")
        if kind == AlterConfigOpType.SET:
            return op.value
        problem = _name_problem(rtype, op.name)
        if problem is not None:
            raise _Rejected(Error.INVALID_CONFIG, problem)
        defn = DEFINITIONS.get(op.name)
        if defn is None or defn.type is not ConfigType.LIST:
            raise _Rejected(Error.INVALID_CONFIG,
                            f"Can't {AlterConfigOpType(kind).name} to key {op.name} because its type is not LIST.")
        items = split_list(self._list_base(rtype, rname, defn))
        given = split_list(op.value)
        if kind == AlterConfigOpType.APPEND:
            present = set(items)
            for item in given:
                if item not in present:
                    present.add(item)
                    items.append(item)
            return ",".join(items)
        # Each item given takes away one occurrence, the first, as Kafka's list difference does.
        to_remove = Counter(given)
        kept = []
        for item in items:
            if to_remove[item] > 0:
                to_remove[item] -= 1
            else:
                kept.append(item)
        return ",".join(kept)

    def _list_base(self, rtype: int, rname: str, defn: ConfigDef) -> str:
        """What APPEND and SUBTRACT start from: the resource's own value, or else the value it
        inherits (what DescribeConfigs shows), so appending to an unset list extends it."""
        own = self._resource(rtype, rname).get(defn.name)
        if own is not None:
            return own
        if rtype == ConfigResourceType.TOPIC:
            return self.topic_value(rname, defn.name)
        chain = self._broker_chain((Synonym(defn.name),), rname or None)
        return chain[0].value if chain else ""

    def _replacement_changes(self, rtype: int, rname: str, configs: list) -> dict[str, str | None]:
        """AlterConfigs replaces the resource's whole set: what is not listed is deleted."""
        wanted: dict[str, str] = {}
        for config in configs:
            if config.value is None:
                raise _Rejected(Error.INVALID_CONFIG, f"Null value not supported for config {config.name}")
            self._check_value(rtype, config.name, config.value)
            wanted[config.name] = config.value
        current = self._resource(rtype, rname)
        changes: dict[str, str | None] = {name: v for name, v in wanted.items() if current.get(name) != v}
        changes.update((name, None) for name in current if name not in wanted)
        return changes

    def _check_value(self, rtype: int, name: str, value: str | None) -> None:
        reason = self.validate(rtype, name, value)
        if reason is not None:
            raise _Rejected(Error.INVALID_CONFIG, reason)


def _check_name(rtype: int, rname: str) -> None:
    """The resource type and name are ones configs can be kept for; Kafka's words."""
    if rtype == ConfigResourceType.BROKER:
        if rname == CLUSTER_DEFAULT or (_BROKER_ID.fullmatch(rname) and int(rname) <= 2**31 - 1):
            return
        if re.fullmatch(r"-[0-9]{1,10}", rname):
            raise _Rejected(Error.INVALID_REQUEST, "Invalid negative broker ID.")
        raise _Rejected(Error.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.")
    if rtype != ConfigResourceType.TOPIC:
        raise _Rejected(Error.INVALID_REQUEST,
                        f"Resource type {rtype} is not supported; use TOPIC or BROKER.")
    if rname == "":
        raise _Rejected(Error.INVALID_REQUEST, "Default topic resources are not allowed.")
    problem = topic_name_problem(rname)
    if problem is not None:
        raise _Rejected(Error.INVALID_TOPIC_EXCEPTION, problem)


def _exists(rtype: int, rname: str, topic_exists: TopicExists, broker_exists: BrokerExists) -> bool:
    """Configs may be set on an existing topic, the cluster default, or a node the controller
    knows: a registered broker or a controller."""
    if rtype == ConfigResourceType.TOPIC:
        return topic_exists(rname)
    return rname == CLUSTER_DEFAULT or broker_exists(int(rname))


def _last_per_key(configs: list) -> list:
    """Kafka's ControllerApis keeps one entry per key, the last one given."""
    return list({c.name: c for c in configs}.values())


def _name_problem(rtype: int, name: str) -> str | None:
    """Why `name` cannot be set on a TOPIC or BROKER resource, or None."""
    defn = DEFINITIONS.get(name)
    if rtype == ConfigResourceType.TOPIC:
        return None if defn is not None and defn.topic else f"Unknown topic config name: {name}"
    # Unknown broker configs are kept as custom settings, as Kafka keeps them.
    return _topic_only(defn) if defn is not None and not defn.broker else None


def _broker_def(name: str) -> ConfigDef | None:
    defn = DEFINITIONS.get(name)
    return defn if defn is not None and defn.broker else None


def _topic_only(defn: ConfigDef) -> str:
    if defn.synonyms:
        return f"{defn.name} is a topic config; its broker-level form is {defn.synonyms[0].name}"
    return f"{defn.name} is a topic config with no broker-level form"


def _record(rtype: int, rname: str, name: str, value: str | None) -> VersionedRecord:
    return ConfigRecord(resource_type=rtype, resource_name=rname, name=name, value=value), 0


def _describe_entry(d: _Described, req: DescribeConfigsRequest,
                    version: int) -> DescribeConfigsResourceResult:
    hidden = sensitive(d.defn)
    entry = DescribeConfigsResourceResult(
        name=d.name, value=None if hidden else d.value, read_only=False,
        is_default=version == 0 and d.source == ConfigSource.DEFAULT_CONFIG,
        config_source=d.source, is_sensitive=hidden,
        config_type=d.defn.type if d.defn else ConfigType.UNKNOWN,
        documentation=d.defn.doc if req.include_documentation and d.defn else None)
    if req.include_synonyms:
        entry.synonyms = [
            DescribeConfigsSynonym(name=f.name, value=None if hidden else f.value, source=f.source)
            for f in d.synonyms]
    return entry
