"""kafkajs (npm, from tests/clients/js's lockfile) against the controller and the test brokers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import BROKER_IDS, FAIL_FAST_S, Cluster, Truth

CALL_TIMEOUT_S = 60.0


class Kafkajs:
    def __init__(self, js_dir: Path, bootstrap: str) -> None:
        self.js_dir = js_dir
        self.bootstrap = bootstrap

    def __call__(self, op: str, *args: object, fails: bool = False, timeout: float = CALL_TIMEOUT_S) -> Any:
        done = subprocess.run(["node", "matrix.js", self.bootstrap, op, *map(str, args)], cwd=self.js_dir,
                              capture_output=True, text=True, timeout=timeout)
        lines = done.stdout.strip().splitlines()
        assert lines, f"kafkajs {op} printed nothing; stderr: {done.stderr[-2000:]}"
        result = json.loads(lines[-1])
        assert (done.returncode != 0) == fails, f"kafkajs {op}: {result}"
        return result


@pytest.fixture
def js(kafkajs: Path, bootstrap: str) -> Kafkajs:
    return Kafkajs(kafkajs, bootstrap)


def _configs(described: dict, name: str) -> dict[str, str]:
    (resource,) = [r for r in described["resources"] if r["resourceName"] == name]
    assert resource["errorCode"] == 0, resource
    return {e["configName"]: e["configValue"] for e in resource["configEntries"]}


def test_metadata_and_cluster(js: Kafkajs, cluster: Cluster) -> None:
    described = js("cluster")
    assert described["clusterId"] == cluster.controller.cluster_id
    assert {b["nodeId"]: (b["host"], b["port"]) for b in described["brokers"]} == cluster.brokers
    assert described["controller"] in BROKER_IDS


def test_topics(js: Kafkajs, topic: str, truth: Truth) -> None:
    assert js("create", topic, 6, 3) is True
    replicas = truth.partitions(topic)
    assert replicas is not None and sorted(replicas) == list(range(6))
    assert all(sorted(r) == list(BROKER_IDS) for r in replicas.values())
    assert topic in js("list")
    (described,) = js("describe", topic)["topics"]
    assert {p["partitionId"]: p["replicas"] for p in described["partitions"]} == replicas
    assert all(p["leader"] in p["isr"] for p in described["partitions"])

    js("partitions", topic, 8)
    assert sorted(truth.partitions(topic) or {}) == list(range(8))
    js("delete", topic)
    assert truth.partitions(topic) is None
    assert topic not in js("list")


def test_configs_of_topic_and_every_broker(js: Kafkajs, topic: str, truth: Truth) -> None:
    js("create", topic, 1, 3)
    # kafkajs sends AlterConfigs, which sets the whole set of a resource's dynamic configs.
    js("alter-configs", "topic", topic, "retention.ms", "1800000")
    assert truth.topic_config(topic, "retention.ms") == "1800000"
    assert _configs(js("describe-configs", "topic", topic), topic)["retention.ms"] == "1800000"
    for broker_id in BROKER_IDS:
        value = str(broker_id * 400_000)
        js("alter-configs", "broker", broker_id, "log.retention.ms", value)
        assert truth.broker_config(broker_id, "log.retention.ms") == value
        assert _configs(js("describe-configs", "broker", broker_id), str(broker_id))["log.retention.ms"] == value


def test_reassign_and_list(js: Kafkajs, topic: str, truth: Truth) -> None:
    js("create", topic, 1, 2)
    replicas = truth.partitions(topic)
    assert replicas is not None
    # A third replica that the brokers never let catch up: the reassignment stays in progress.
    target = [*replicas[0], next(b for b in BROKER_IDS if b not in replicas[0])]
    js("reassign", topic, 0, json.dumps(target))
    assert truth.reassigning()[(topic, 0)] == sorted(target)
    (listed,) = js("list-reassignments", topic, "[0]")["topics"]
    assert listed["name"] == topic
    (partition,) = listed["partitions"]
    assert sorted(partition["replicas"]) == sorted(target) and partition["addingReplicas"] == target[-1:]


def test_data_plane_fails_fast(js: Kafkajs, topic: str, cluster: Cluster) -> None:
    js("create", topic, 1, 3)
    # kafkajs takes the API versions of the node it bootstrapped at for every broker's:
    # bootstrapped at the controller, it finds no Produce served and says so.
    at_controller = js.bootstrap == cluster.controller_address
    produced = js("produce", topic, fails=True, timeout=FAIL_FAST_S)
    assert produced["type"] == ("KafkaJSServerDoesNotSupportApiKey" if at_controller
                                else "TOPIC_AUTHORIZATION_FAILED"), produced
    consumed = js("consume", topic, fails=True, timeout=FAIL_FAST_S)
    assert consumed["type"] == "KafkaJSGroupCoordinatorNotFound", consumed
