"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, and replica placement.

Placement spreads replicas over the unfenced brokers with their racks interleaved, so that
consecutive replicas of a partition land on different racks whenever racks allow it, and
each partition starts at the next broker so leaderships spread evenly.
"""

from __future__ import annotations

from collections import Counter

from protocol.constants import NO_LEADER, ConfigResourceType
from protocol.error_codes import Error
from protocol.generated.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.generated.messages.create_partitions_response import (
    CreatePartitionsResponse, CreatePartitionsTopicResult)
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.create_topics_response import (
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse)
from protocol.generated.messages.delete_topics_request import DeleteTopicsRequest
from protocol.generated.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from protocol.generated.metadata.remove_topic_record import RemoveTopicRecord
from protocol.generated.metadata.topic_record import TopicRecord
from protocol.primitives import ZERO_UUID, random_uuid
from server.controller.partitions import PartitionState
from server.controller.replication import ReplicationControl
from server.controller.result import MAX_RECORDS_PER_BATCH, ControllerResult, VersionedRecord
from server.controller.topic_names import topic_name_problem

METADATA_TOPIC = "__cluster_metadata"
DUPLICATE_NAME = "Duplicate topic name."
# Kafka bounds the records one request may produce, so that one client cannot make the
# controller build (and every broker replay) an unbounded batch while others wait.
MAX_RECORDS_PER_USER_OP = MAX_RECORDS_PER_BATCH
TOO_LARGE = "Unable to perform excessively large batch operation."
# CreateTopics' NumPartitions and ReplicationFactor: the broker defaults apply (in a request),
# or not known (in a failed result).
UNSET_COUNT = -1


class TopicError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _refuse(result: CreatableTopicResult, code: int, message: str, version: int) -> None:
    result.error_code = code
    result.error_message = message
    if version >= 5:
        result.num_partitions = result.replication_factor = UNSET_COUNT


def check_topic_name(name: str) -> None:
    problem = topic_name_problem(name)
    if problem is not None:
        raise TopicError(Error.INVALID_TOPIC_EXCEPTION, problem)


class TopicAdmin:
    def __init__(self, replication: ReplicationControl) -> None:
        self.r = replication

    # --- placement -------------------------------------------------------------------------------
    def _rack_interleaved(self, fenced: bool) -> list[int]:
        """Brokers that may take new replicas (registered, not shutting down), either the
        unfenced or the fenced ones, with their racks interleaved."""
        by_rack: dict[str, list[int]] = {}
        for b in sorted(self.r.cluster.brokers.values(), key=lambda b: b.broker_id):
            if b.fenced == fenced and not b.in_controlled_shutdown:
                by_rack.setdefault(b.rack or "", []).append(b.broker_id)
        racks = [by_rack[k] for k in sorted(by_rack)]
        order = []
        for i in range(max((len(r) for r in racks), default=0)):
            order += [r[i] for r in racks if i < len(r)]
        return order

    def place(self, partitions: int, replication_factor: int, first_partition: int = 0,
              placed_before: int = 0) -> list[list[int]]:
        """``placed_before``: partitions placed earlier in the same request, which the
        partition count does not include yet because their records are not replayed.

        As Kafka's striped placer does, fenced brokers take replicas when there are not
        enough unfenced ones, but never the first (the leader): a broker that restarts is
        fenced for a moment, and creating a topic should not fail for it."""
        unfenced = self._rack_interleaved(fenced=False)
        fenced = self._rack_interleaved(fenced=True)
        if not unfenced:
            raise TopicError(Error.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced.")
        if replication_factor > len(unfenced) + len(fenced):
            raise TopicError(Error.INVALID_REPLICATION_FACTOR,
                             f"The target replication factor of {replication_factor} cannot be reached "
                             f"because only {len(unfenced) + len(fenced)} broker(s) are registered.")
        n = len(unfenced)
        start = self.r.partition_count + placed_before  # rotate across topics too, not only within one
        placements = []
        for p in range(first_partition, first_partition + partitions):
            replicas = [unfenced[(start + p + j) % n] for j in range(min(replication_factor, n))]
            extra = replication_factor - len(replicas)
            replicas += [fenced[(start + p + j) % len(fenced)] for j in range(extra)]
            placements.append(replicas)
        return placements

    def _check_assignment(self, replicas: list[int], index: int, replication_factor: int) -> None:
        """Kafka's checks of a manual assignment, in its order and words."""
        problem = self.r.assignment_problem(replicas)
        if problem is None and len(replicas) != replication_factor:
            problem = (f"The manual partition assignment includes a partition with {len(replicas)} "
                       f"replica(s), but this is not consistent with previous partitions, which have "
                       f"{replication_factor} replica(s).")
        if problem is None and not any(self.r.cluster.is_usable(b) for b in replicas):
            problem = (f"All brokers specified in the manual partition assignment for partition {index} "
                       "are fenced or in controlled shutdown.")
        if problem is not None:
            raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT, problem)

    def _partition_records(self, topic_id: bytes, assignments: list[list[int]], first: int) -> list[VersionedRecord]:
        version = self.r.features.partition_record_version()
        records: list[VersionedRecord] = []
        for i, replicas in enumerate(assignments):
            isr = [b for b in replicas if self.r.cluster.is_usable(b)]
            p = PartitionState(topic_id, first + i, list(replicas), isr, isr[0] if isr else NO_LEADER,
                               directories=[self.r.cluster.default_dir(b) for b in replicas])
            records.append((p.to_record(version), version))
        return records

    # --- CreateTopics -----------------------------------------------------------------------------
    def create_topics(self, req: CreateTopicsRequest, version: int) -> ControllerResult:
        """As Kafka's ControllerApis: a name given more than once is not created and gets one
        INVALID_REQUEST result, after the results of the other topics."""
        records: list[VersionedRecord] = []
        response = CreateTopicsResponse()
        if self._records_needed(req) > MAX_RECORDS_PER_USER_OP:
            # Judged before any record is built: building them is the cost being refused.
            for name in dict.fromkeys(t.name for t in req.topics):
                result = CreatableTopicResult(name=name)
                _refuse(result, Error.POLICY_VIOLATION, TOO_LARGE, version)
                response.topics.append(result)
            return ControllerResult([], response)
        counts = Counter(t.name for t in req.topics)
        placed = 0
        refused: list[tuple[str, str]] = []
        duplicates_answered: set[str] = set()
        for topic in req.topics:
            if counts[topic.name] > 1:
                if topic.name not in duplicates_answered:
                    duplicates_answered.add(topic.name)
                    refused.append((topic.name, DUPLICATE_NAME))
                continue
            if topic.name == METADATA_TOPIC:
                refused.append((topic.name, f"Creation of internal topic {METADATA_TOPIC} is prohibited."))
                continue
            result = CreatableTopicResult(name=topic.name)
            response.topics.append(result)
            try:
                topic_records, topic_id, assignments = self._create_one(topic, version, placed)
            except TopicError as exc:
                _refuse(result, exc.code, exc.message, version)
                continue
            result.topic_id = topic_id if version >= 7 else ZERO_UUID
            if version >= 5:
                result.num_partitions = len(assignments)
                result.replication_factor = len(assignments[0])
                result.configs = [CreatableTopicConfigs(name=name, value=value, config_source=source)
                                  for name, value, source in self.r.configs.effective_topic_configs(
                                      {c.name: c.value for c in topic.configs if c.value is not None})]
            if not req.validate_only:
                records += topic_records
                placed += len(assignments)
        for name, message in refused:
            result = CreatableTopicResult(name=name)
            _refuse(result, Error.INVALID_REQUEST, message, version)
            response.topics.append(result)
        return ControllerResult(records, response)

    @staticmethod
    def _records_needed(req: CreateTopicsRequest) -> int:
        """At least the records the request would produce: a TopicRecord, its configs and a
        PartitionRecord per partition (a topic taking the default count counts one)."""
        return sum(1 + len(t.configs) + (len(t.assignments) or max(t.num_partitions, 1)) for t in req.topics)

    def _create_one(self, topic: CreatableTopic, version: int,
                    placed_before: int) -> tuple[list[VersionedRecord], bytes, list[list[int]]]:
        check_topic_name(topic.name)
        if topic.name in self.r.names:
            raise TopicError(Error.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
        colliding = self.r.colliding_topic(topic.name)
        if colliding is not None:
            raise TopicError(Error.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{topic.name}' collides with existing topic: {colliding}")
        nulls = [c.name for c in topic.configs if c.value is None]
        if nulls:
            raise TopicError(Error.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls))
        configs: dict[str, str] = {}
        for name, value in [(c.name, c.value) for c in topic.configs if c.value is not None]:
            problem = self.r.configs.validate(ConfigResourceType.TOPIC, name, value)
            if problem is not None:
                raise TopicError(Error.INVALID_CONFIG, problem)
            configs[name] = value
        if topic.assignments:
            if topic.replication_factor != UNSET_COUNT:
                raise TopicError(Error.INVALID_REQUEST, "A manual partition assignment was specified, "
                                                        "but replication factor was not set to -1.")
            if topic.num_partitions != UNSET_COUNT:
                raise TopicError(Error.INVALID_REQUEST, "A manual partition assignment was specified, "
                                                        "but numPartitions was not set to -1.")
            ordered = sorted(topic.assignments, key=lambda a: a.partition_index)
            if [a.partition_index for a in ordered] != list(range(len(ordered))):
                raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT,
                                 "partitions should be a consecutive 0-based integer sequence")
            assignments = [list(a.broker_ids) for a in ordered]
            for i, replicas in enumerate(assignments):
                self._check_assignment(replicas, i, len(assignments[0]))
        else:
            partitions = topic.num_partitions if topic.num_partitions != UNSET_COUNT else self.r.configs.default_partitions()
            rf = (topic.replication_factor if topic.replication_factor != UNSET_COUNT
                  else self.r.configs.default_replication_factor())
            if rf < 1:
                raise TopicError(Error.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0, or -1 to use the default value.")
            if partitions < 1:
                raise TopicError(Error.INVALID_PARTITIONS,
                                 "Number of partitions was set to an invalid non-positive value.")
            try:
                assignments = self.place(partitions, rf, placed_before=placed_before)
            except TopicError as exc:
                raise TopicError(exc.code, f"Unable to replicate the partition {rf} time(s): {exc.message}") from None
        topic_id = random_uuid()
        records: list[VersionedRecord] = [(TopicRecord(name=topic.name, topic_id=topic_id), 0)]
        records += self.r.configs.create_topic_records(topic.name, configs)
        records += self._partition_records(topic_id, assignments, 0)
        return records, topic_id, assignments

    # --- DeleteTopics ----------------------------------------------------------------------------
    def delete_topics(self, req: DeleteTopicsRequest, version: int) -> ControllerResult:
        """As Kafka's ControllerApis: a topic named twice, or given by name and by id, is not
        deleted and gets one INVALID_REQUEST; a topic entry must give a name or an id, not both."""
        response = DeleteTopicsResponse()

        def answer(name: str | None, topic_id: bytes, code: int, message: str | None = None) -> None:
            response.responses.append(DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=code, error_message=message))

        names: list[str] = []
        ids: list[bytes] = []
        if version < 6:
            names = list(req.topic_names)
        for t in req.topics if version >= 6 else ():
            if t.name is None and t.topic_id == ZERO_UUID:
                answer(None, ZERO_UUID, Error.INVALID_REQUEST, "Neither topic name nor id were specified.")
            elif t.name is None:
                ids.append(t.topic_id)
            elif t.topic_id == ZERO_UUID:
                names.append(t.name)
            else:
                answer(t.name, t.topic_id, Error.INVALID_REQUEST, "You may not specify both topic name and topic id.")
        name_counts, id_counts = Counter(names), Counter(ids)
        for name in dict.fromkeys(n for n in names if name_counts[n] > 1):
            answer(name, ZERO_UUID, Error.INVALID_REQUEST, DUPLICATE_NAME)
        repeated_ids = set(i for i in ids if id_counts[i] > 1)
        for topic_id in dict.fromkeys(i for i in ids if i in repeated_ids):
            answer(None, topic_id, Error.INVALID_REQUEST, "Duplicate topic id.")
        chosen: dict[bytes, str] = {}
        for topic_id in dict.fromkeys(i for i in ids if i not in repeated_ids):
            topic = self.r.topics.get(topic_id)
            if topic is None:
                answer(None, topic_id, Error.UNKNOWN_TOPIC_ID, f"Topic id {topic_id.hex()} not found.")
            else:
                chosen[topic_id] = topic.name
        for name in dict.fromkeys(n for n in names if name_counts[n] == 1):
            named = self.r.names.get(name)
            if named is None:
                answer(name, ZERO_UUID, Error.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} not found.")
            elif named in repeated_ids or named in chosen:
                repeated_ids.add(named)
                chosen.pop(named, None)
                answer(name, named, Error.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                chosen[named] = name
        # Removing a topic also ends any reassignment of its partitions (seed 000).
        records: list[VersionedRecord] = [(RemoveTopicRecord(topic_id=i), 0) for i in chosen]
        for topic_id, name in chosen.items():
            answer(name, topic_id, Error.NONE)
        # Kafka shuffles its answers; the request's own order reads better and is as valid.
        position: dict[object, int] = {}
        for key in names + ids if version < 6 else [t.topic_id if t.name is None else t.name for t in req.topics]:
            position.setdefault(key, len(position))
        response.responses.sort(key=lambda r: position.get(
            r.topic_id if r.topic_id in position else r.name, len(position)))
        if version < 6:
            for result in response.responses:
                result.topic_id = ZERO_UUID
        return ControllerResult(records, response)

    # --- CreatePartitions ------------------------------------------------------------------------
    def create_partitions(self, req: CreatePartitionsRequest, version: int) -> ControllerResult:
        """As Kafka's ControllerApis: a topic named more than once is not grown and gets one
        INVALID_REQUEST result, before the results of the other topics."""
        records: list[VersionedRecord] = []
        response = CreatePartitionsResponse()
        if self._partitions_added(req) > MAX_RECORDS_PER_USER_OP:
            response.results = [CreatePartitionsTopicResult(name=n, error_code=Error.POLICY_VIOLATION,
                                                            error_message=TOO_LARGE)
                                for n in dict.fromkeys(t.name for t in req.topics)]
            return ControllerResult([], response)
        counts = Counter(t.name for t in req.topics)
        for name in dict.fromkeys(t.name for t in req.topics if counts[t.name] > 1):
            response.results.append(CreatePartitionsTopicResult(
                name=name, error_code=Error.INVALID_REQUEST, error_message=DUPLICATE_NAME))
        for t in req.topics:
            if counts[t.name] > 1:
                continue
            result = CreatePartitionsTopicResult(name=t.name)
            response.results.append(result)
            try:
                recs = self._add_partitions(t)
            except TopicError as exc:
                result.error_code = exc.code
                result.error_message = exc.message
                continue
            if not req.validate_only:
                records += recs
        return ControllerResult(records, response)

    def _partitions_added(self, req: CreatePartitionsRequest) -> int:
        added = 0
        for t in req.topics:
            topic_id = self.r.names.get(t.name)
            topic = self.r.topics.get(topic_id) if topic_id is not None else None
            added += max(t.count - (len(topic.partitions) if topic is not None else 0), 0)
        return added

    def _add_partitions(self, t: CreatePartitionsTopic) -> list[VersionedRecord]:
        topic_id = self.r.names.get(t.name)
        if topic_id is None:
            raise TopicError(Error.UNKNOWN_TOPIC_OR_PARTITION, f"topic {t.name!r} does not exist")
        topic = self.r.topics[topic_id]
        current = len(topic.partitions)
        if t.count == current:
            raise TopicError(Error.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if t.count < current:
            raise TopicError(Error.INVALID_PARTITIONS, f"The topic {t.name} currently has {current} "
                                                       f"partition(s); {t.count} would not be an increase.")
        extra = t.count - current
        # The replication factor of a partition being reassigned is where it is heading: its
        # replica list holds the replicas being added and those being removed together.
        settled = next((p for p in topic.partitions if not p.reassigning), None)
        rf = len(settled.replicas) if settled is not None else len(topic.partitions[0].target_replicas())
        if t.assignments is not None:
            if len(t.assignments) != extra:
                raise TopicError(Error.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {extra} additional partition(s), but only "
                                 f"{len(t.assignments)} assignment(s) were specified.")
            assignments = [list(a.broker_ids) for a in t.assignments]
            for i, replicas in enumerate(assignments):
                self._check_assignment(replicas, current + i, rf)
        else:
            assignments = self.place(extra, rf, current)
        return self._partition_records(topic_id, assignments, current)
