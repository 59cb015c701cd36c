"""kafka-python 3's KafkaAdminClient against a real controller process.

Brokers are simulated over raw sockets: each registers, is unfenced by its first heartbeat
and kept alive by a background thread for the length of the test. The admin client is pointed
at the controller and does what an operator would: create, describe (DescribeTopicPartitions,
paging with its cursor), grow and delete topics, elect leaders, reassign partitions and change
configs. Where a broker's part is needed (AlterPartition from a leader), the test sends it
over its own connection, as the broker would.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
import kafka.errors as Errors

from protocol.error_codes import Error
from protocol.generated.messages.alter_partition_request import (
    AlterPartitionRequest, BrokerState, PartitionData, TopicData)
from protocol.generated.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest, TopicRequest)
from tests.support.wire import WireBroker, connect


# Brokers here are simulated over raw sockets and serve no clients: the controller names itself
# as the only node (kraftwire.metadata.nodes=controller), so the admin client's requests all
# come back to it.
pytestmark = pytest.mark.controller_properties({"kraftwire.metadata.nodes": "controller"})


BROKERS = (1, 2, 3, 4, 5)
HEARTBEAT_S = 0.25
ALTER_PARTITION_V = 3
RECOVERED, RECOVERING = 0, 1


class Fleet:
    """Registered, unfenced brokers, kept alive from a background thread."""

    def __init__(self, controller, ids=BROKERS) -> None:
        self.controller = controller
        self.brokers = {i: WireBroker(controller, i) for i in ids}
        self.lock = threading.Lock()  # one request at a time on each broker's connection
        self.paused: set[int] = set()
        self.errors: list[BaseException] = []
        for b in self.brokers.values():
            assert b.register().error_code == Error.NONE
            assert b.heartbeat().is_fenced is False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeats", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            for broker_id, broker in self.brokers.items():
                with self.lock:
                    if broker_id in self.paused:
                        continue
                    try:
                        response = broker.heartbeat()
                        assert response.error_code == Error.NONE, response
                    except BaseException as exc:  # reported by close()
                        self.errors.append(exc)
                        return

    def epoch(self, broker_id: int) -> int:
        return self.brokers[broker_id].epoch

    def fence(self, broker_id: int) -> None:
        """The broker asks to be fenced (as one that lost its log dir would) and stays quiet."""
        with self.lock:
            self.paused.add(broker_id)
            assert self.brokers[broker_id].heartbeat(want_fence=True).is_fenced is True

    def resume(self, broker_id: int) -> None:
        with self.lock:
            self.paused.discard(broker_id)
            assert self.brokers[broker_id].heartbeat().is_fenced is False

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for b in self.brokers.values():
            b.close()
        assert not self.errors, self.errors


@pytest.fixture
def fleet(controller):
    f = Fleet(controller)
    yield f
    f.close()


@pytest.fixture
def admin(controller, fleet):
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{controller.port}", client_id="kraftwire-admin",
                              bootstrap_timeout_ms=10000, request_timeout_ms=30000)
    yield client
    client.close()


@pytest.fixture
def raw(controller):
    with connect(controller, timeout=30.0) as client:
        yield client


# --- helpers ------------------------------------------------------------------------------

def describe(admin, topic: str) -> list[dict]:
    result = admin.describe_topic_partitions([topic])
    assert result["next_cursor"] is None
    (entry,) = result["topics"]
    assert entry["error_code"] == 0, entry
    return entry["partitions"]


def leader_isr(admin, topic: str, index: int = 0) -> tuple[int, list[int]]:
    p = describe(admin, topic)[index]
    return p["leader_id"], p["isr_nodes"]


def raw_partition(raw, topic: str, index: int):
    response = raw.request(DescribeTopicPartitionsRequest(topics=[TopicRequest(name=topic)]), 0)
    t = response.topics[0]
    return t.topic_id, t.partitions[index]


def alter_partition(raw, fleet: Fleet, leader: int, topic: str, index: int, isr: list[int],
                    recovery: int = RECOVERED):
    """AlterPartition from ``leader``. The partition epoch is not in any admin view, so it is
    found by asking with the current ISR (a no-op) until the epoch is accepted."""
    topic_id, p = raw_partition(raw, topic, index)

    def send(new_isr: list[int], partition_epoch: int, recovery_state: int):
        request = AlterPartitionRequest(broker_id=leader, broker_epoch=fleet.epoch(leader), topics=[
            TopicData(topic_id=topic_id, partitions=[PartitionData(
                partition_index=index, leader_epoch=p.leader_epoch, partition_epoch=partition_epoch,
                leader_recovery_state=recovery_state,
                new_isr_with_epochs=[BrokerState(broker_id=b, broker_epoch=fleet.epoch(b)) for b in new_isr])])])
        response = raw.request(request, ALTER_PARTITION_V)
        assert response.error_code == Error.NONE
        return response.topics[0].partitions[0]

    for partition_epoch in range(64):
        probe = send(p.isr_nodes, partition_epoch, recovery)
        if probe.error_code != Error.INVALID_UPDATE_VERSION:
            break
    else:
        raise AssertionError("no partition epoch was accepted")
    if probe.error_code != Error.NONE:
        return probe
    return send(isr, probe.partition_epoch, recovery)


def create(admin, topics: dict) -> dict:
    result = admin.create_topics(topics)
    assert [t["error_code"] for t in result["topics"]] == [0] * len(topics), result
    return {t["name"]: t for t in result["topics"]}


# --- topics -------------------------------------------------------------------------------

def test_create_describe_and_delete_topics(admin):
    created = create(admin, {
        "alpha": {"num_partitions": 10, "replication_factor": 3, "configs": {"retention.ms": "60000"}},
        "beta": {"num_partitions": 2, "replication_factor": 1},
        "manual": {"assignments": {0: [5, 4], 1: [4, 3]}},
    })
    assert created["alpha"]["num_partitions"] == 10 and created["alpha"]["replication_factor"] == 3
    alpha_id = uuid.UUID(str(created["alpha"]["topic_id"]))
    assert alpha_id.int != 0
    assert sorted(admin.list_topics()) == ["alpha", "beta", "manual"]

    alpha = describe(admin, "alpha")
    assert [p["partition_index"] for p in alpha] == list(range(10))
    for p in alpha:
        assert len(set(p["replica_nodes"])) == 3 and set(p["replica_nodes"]) <= set(BROKERS)
        assert p["isr_nodes"] == p["replica_nodes"] and p["leader_id"] == p["replica_nodes"][0]
        assert p["offline_replicas"] == [] and p["eligible_leader_replicas"] is None
    assert {p["leader_id"] for p in alpha} == set(BROKERS)  # every broker leads some
    assert [p["replica_nodes"] for p in describe(admin, "manual")] == [[5, 4], [4, 3]]
    # Metadata (describe_topics) shows the same partitions.
    (meta,) = admin.describe_topics(["alpha"])
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"]) for p in meta["partitions"]] == [
        (p["partition_index"], p["leader_id"], p["replica_nodes"]) for p in alpha]

    with pytest.raises(Errors.TopicAlreadyExistsError):
        admin.create_topics({"alpha": {"num_partitions": 1, "replication_factor": 1}})
    result = admin.create_topics({"bad name": {"num_partitions": 1, "replication_factor": 1},
                                  "huge": {"num_partitions": 1, "replication_factor": 6}}, raise_errors=False)
    assert [t["error_code"] for t in result["topics"]] == [
        Error.INVALID_TOPIC_EXCEPTION, Error.INVALID_REPLICATION_FACTOR]
    result = admin.create_topics({"dry": {"num_partitions": 3, "replication_factor": 2}}, validate_only=True)
    assert result["topics"][0]["error_code"] == 0 and "dry" not in admin.list_topics()

    deleted = admin.delete_topics(["beta", alpha_id])
    assert [t["error_code"] for t in deleted["topics"]] == [0, 0]
    assert admin.list_topics() == ["manual"]
    assert admin.describe_topic_partitions(["alpha"])["topics"][0]["error_code"] == Error.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.delete_topics(["beta"])


def test_describe_topic_partitions_pages_over_5000_partitions(admin):
    names = [f"page-{i}" for i in range(5)]
    create(admin, {n: {"num_partitions": 1000, "replication_factor": 2} for n in names})

    def page_through(limit: int) -> tuple[list[tuple[str, int]], list]:
        seen, cursors, cursor = [], [], None
        while True:
            page = admin.describe_topic_partitions([], response_partition_limit=limit, cursor=cursor)
            batch = [(t["name"], p["partition_index"]) for t in page["topics"] for p in t["partitions"]]
            assert 0 < len(batch) <= min(limit, 2000)
            seen += batch
            cursor = page["next_cursor"]
            if cursor is None:
                return seen, cursors
            cursors.append((cursor["topic_name"], cursor["partition_index"]))
            assert cursors[-1] == batch[-1][:1] + (batch[-1][1] + 1,) or cursors[-1][1] == 0

    everything = [(n, i) for n in names for i in range(1000)]
    seen, cursors = page_through(2000)
    assert seen == everything
    assert cursors == [("page-2", 0), ("page-4", 0)]
    seen, cursors = page_through(1500)
    assert seen == everything
    assert cursors == [("page-1", 500), ("page-3", 0), ("page-4", 500)]
    # The server caps what the client asks for at max.request.partition.size.limit (2000).
    seen, cursors = page_through(5000)
    assert seen == everything and cursors == [("page-2", 0), ("page-4", 0)]
    # The pages carry real partitions: a sample matches Metadata.
    (meta,) = admin.describe_topics(["page-3"])
    by_index = {p["partition_index"]: p for p in describe(admin, "page-3")}
    for p in meta["partitions"][::97]:
        q = by_index[p["partition_index"]]
        assert (q["leader_id"], q["replica_nodes"], q["isr_nodes"]) == (
            p["leader_id"], p["replica_nodes"], p["isr_nodes"])


def test_create_partitions(admin):
    create(admin, {"grow": {"num_partitions": 2, "replication_factor": 2}})
    admin.create_partitions({"grow": 5})
    parts = describe(admin, "grow")
    assert [p["partition_index"] for p in parts] == [0, 1, 2, 3, 4]
    assert all(len(set(p["replica_nodes"])) == 2 for p in parts)
    admin.create_partitions({"grow": {"count": 6, "assignments": [[3, 1]]}})
    assert describe(admin, "grow")[5]["replica_nodes"] == [3, 1]
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({"grow": 3})
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.create_partitions({"nope": 3})
    assert len(describe(admin, "grow")) == 6


# --- leadership -----------------------------------------------------------------------------

def election_codes(response) -> dict:
    return {(r.topic, p.partition_id): p.error_code
            for r in response.replica_election_results for p in r.partition_result}


def test_preferred_leader_election(admin, fleet, raw):
    create(admin, {"pref": {"assignments": {0: [1, 2, 3]}}})
    assert leader_isr(admin, "pref") == (1, [1, 2, 3])
    response = admin.elect_leaders(0, {"pref": [0]})  # ELECTION_NOT_NEEDED is not raised
    assert election_codes(response) == {("pref", 0): Error.ELECTION_NOT_NEEDED}

    fleet.fence(1)
    assert leader_isr(admin, "pref") == (2, [2, 3])
    with pytest.raises(Errors.PreferredLeaderNotAvailableError):
        admin.elect_leaders(0, {"pref": [0]})
    fleet.resume(1)
    result = alter_partition(raw, fleet, 2, "pref", 0, [2, 3, 1])
    assert (result.error_code, result.isr) == (Error.NONE, [2, 3, 1])
    response = admin.elect_leaders(0, {"pref": [0]})
    assert election_codes(response) == {("pref", 0): Error.NONE}
    assert leader_isr(admin, "pref") == (1, [2, 3, 1])
    assert describe(admin, "pref")[0]["leader_epoch"] == 2


def test_unclean_leader_election_and_recovery(admin, fleet, raw):
    create(admin, {"unclean": {"assignments": {0: [1, 2, 3]}}})
    result = alter_partition(raw, fleet, 1, "unclean", 0, [1])
    assert (result.error_code, result.isr) == (Error.NONE, [1])
    fleet.fence(1)
    p = describe(admin, "unclean")[0]
    assert (p["leader_id"], p["isr_nodes"], p["offline_replicas"]) == (-1, [1], [1])

    response = admin.elect_leaders(1, {"unclean": [0]})
    assert election_codes(response) == {("unclean", 0): Error.NONE}
    assert leader_isr(admin, "unclean") == (2, [2])
    # KIP-704: the new leader must recover before the ISR grows.
    result = alter_partition(raw, fleet, 2, "unclean", 0, [2, 3], recovery=RECOVERING)
    assert result.error_code == Error.INVALID_REQUEST
    result = alter_partition(raw, fleet, 2, "unclean", 0, [2], recovery=RECOVERED)
    assert (result.error_code, result.leader_recovery_state) == (Error.NONE, RECOVERED)
    result = alter_partition(raw, fleet, 2, "unclean", 0, [2, 3])
    assert (result.error_code, result.isr) == (Error.NONE, [2, 3])
    assert leader_isr(admin, "unclean") == (2, [2, 3])
    # A partition with a live leader needs no unclean election.
    response = admin.elect_leaders(1, {"unclean": [0]})
    assert election_codes(response) == {("unclean", 0): Error.ELECTION_NOT_NEEDED}
    fleet.resume(1)


# --- reassignment ---------------------------------------------------------------------------

def test_alter_and_list_partition_reassignments(admin, fleet, raw):
    create(admin, {"move": {"assignments": {0: [1, 2, 3], 1: [1, 2, 3], 2: [2, 3, 4]}}})
    t0, t1, t2 = (TopicPartition("move", i) for i in range(3))
    result = admin.alter_partition_reassignments({t0: [3, 4, 5], t1: [3, 2]})
    assert result == {t0: None, t1: None}
    # Partition 1's target was already in sync: done at once. Partition 0 goes on.
    assert admin.list_partition_reassignments() == {
        t0: {"replicas": [3, 4, 5, 1, 2], "adding_replicas": [4, 5], "removing_replicas": [1, 2]}}
    assert describe(admin, "move")[1]["replica_nodes"] == [3, 2]
    assert admin.list_partition_reassignments([t1]) == {}

    # The leader brings 4 and 5 into the ISR: the reassignment completes with the ISR the
    # controller applied, and leader 1, no longer a replica, hands over; as in Kafka, it is
    # told only that a new leader was elected.
    result = alter_partition(raw, fleet, 1, "move", 0, [1, 2, 3, 4, 5])
    assert (result.error_code, result.isr) == (Error.NEW_LEADER_ELECTED, [])
    assert admin.list_partition_reassignments() == {}
    p = describe(admin, "move")[0]
    assert (p["replica_nodes"], p["isr_nodes"], p["leader_id"]) == ([3, 4, 5], [3, 4, 5], 3)

    # Cancelling restores the original replicas.
    assert admin.alter_partition_reassignments({t2: [5, 1]}) == {t2: None}
    assert admin.list_partition_reassignments({"move": [2]}) == {
        t2: {"replicas": [5, 1, 2, 3, 4], "adding_replicas": [1, 5], "removing_replicas": [2, 3, 4]}}
    assert admin.alter_partition_reassignments({t2: None}) == {t2: None}
    assert admin.list_partition_reassignments() == {}
    assert sorted(describe(admin, "move")[2]["replica_nodes"]) == [2, 3, 4]
    result = admin.alter_partition_reassignments({t2: None, TopicPartition("move", 9): [1]})
    assert result == {t2: Errors.NoReassignmentInProgressError,
                      TopicPartition("move", 9): Errors.UnknownTopicOrPartitionError}

    # Deleting the topic ends a reassignment in progress.
    admin.alter_partition_reassignments({t2: [1, 5]})
    assert set(admin.list_partition_reassignments()) == {t2}
    admin.delete_topics(["move"])
    assert admin.list_partition_reassignments() == {}


# --- configs --------------------------------------------------------------------------------

def topic_configs(admin, name: str, config_filter: str = "modified") -> dict[str, str]:
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)],
                                       config_filter=config_filter)
    return {k: v["value"] for k, v in described["topic"][name].items()}


def test_describe_and_alter_configs(admin):
    create(admin, {"cfg": {"num_partitions": 1, "replication_factor": 1,
                           "configs": {"retention.ms": "60000", "cleanup.policy": "compact"}}})
    assert topic_configs(admin, "cfg") == {"retention.ms": "60000", "cleanup.policy": "compact"}
    everything = topic_configs(admin, "cfg", "all")
    assert everything["min.insync.replicas"] == "1" and everything["retention.ms"] == "60000"

    # IncrementalAlterConfigs: SET, APPEND and DELETE; the rest stays.
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg", configs={
        "min.insync.replicas": "2", "cleanup.policy": ("APPEND", "delete"), "retention.ms": ("DELETE", None)})],
        incremental=True)
    assert result == {"topic": {"cfg": "OK"}}
    assert topic_configs(admin, "cfg") == {"min.insync.replicas": "2", "cleanup.policy": "compact,delete"}

    # AlterConfigs (legacy) replaces the whole set; kafka-python fills in the other modified keys.
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg", configs={
        "retention.ms": "1000"})], incremental=False)
    assert result == {"topic": {"cfg": "OK"}}
    assert topic_configs(admin, "cfg") == {
        "min.insync.replicas": "2", "cleanup.policy": "compact,delete", "retention.ms": "1000"}

    for incremental in (True, False):
        result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg", configs={
            "min.insync.replicas": "zero"})], incremental=incremental)
        assert "InvalidConfigurationError" in result["topic"]["cfg"], result
    assert topic_configs(admin, "cfg")["min.insync.replicas"] == "2"
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg", configs={
        "retention.ms": "5"})], validate_only=True)
    assert result == {"topic": {"cfg": "OK"}} and topic_configs(admin, "cfg")["retention.ms"] == "1000"
