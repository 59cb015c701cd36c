"""The client matrix's cluster: a controller and three test brokers, shared by every client.

The controller runs with its default configuration: a client bootstrapped at it learns the live
brokers from its Metadata answer and sends its later requests to them, as it would in a Kafka
cluster; the three brokers run as one fleet process with free client ports. Node ids 1-3 never collide with
the controller's (3000).

Each client test runs twice, bootstrapped at broker 1 and at the controller, and checks what it
did against the controller's own answers (``Truth``), not only against what the client says.
Every topic a test creates has a name of its own, so the tests share the cluster.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from protocol.client import KafkaClient
from protocol.constants import ConfigResourceType
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from protocol.generated.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.conftest import MAX_LIFETIME_S, PYTHON, ROOT, ControllerProcess, poll
from tools.processes import bounded_child, stop_child

BROKER_IDS = (1, 2, 3)
JS_DIR = Path(__file__).parent / "js"
# A client must give up on what a test broker cannot do within this, never wait out a timeout.
FAIL_FAST_S = 20.0


@dataclass
class Cluster:
    controller: ControllerProcess
    brokers: dict[int, tuple[str, int]]

    @property
    def controller_address(self) -> str:
        return f"{self.controller.host}:{self.controller.port}"

    def broker_address(self, broker_id: int) -> str:
        host, port = self.brokers[broker_id]
        return f"{host}:{port}"


class Truth:
    """The controller's own view, read over the wire, to check what a client did."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _client(self) -> KafkaClient:
        return KafkaClient(self.cluster.controller.host, self.cluster.controller.port, "matrix-truth")

    def partitions(self, topic: str) -> dict[int, list[int]] | None:
        """Partition -> replicas of ``topic``; None if it does not exist."""
        with self._client() as c:
            response = c.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
        t = response.topics[0]
        if t.error_code:
            return None
        return {p.partition_index: list(p.replica_nodes) for p in t.partitions}

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        """For clients that cannot create topics themselves."""
        with self._client() as c:
            response = c.request(CreateTopicsRequest(topics=[CreatableTopic(
                name=topic, num_partitions=partitions, replication_factor=replication_factor)]), 7)
        assert response.topics[0].error_code == 0, response.topics[0].error_message

    def leaders(self, topic: str) -> dict[int, int]:
        with self._client() as c:
            response = c.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
        return {p.partition_index: p.leader_id for p in response.topics[0].partitions}

    def config(self, resource_type: int, name: str, key: str) -> str | None:
        with self._client() as c:
            response = c.request(DescribeConfigsRequest(resources=[DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=[key])]), 4)
        result = response.results[0]
        assert result.error_code == 0, result.error_message
        return next((e.value for e in result.configs if e.name == key), None)

    def topic_config(self, topic: str, key: str) -> str | None:
        return self.config(ConfigResourceType.TOPIC, topic, key)

    def broker_config(self, broker_id: int, key: str) -> str | None:
        return self.config(ConfigResourceType.BROKER, str(broker_id), key)

    def reassigning(self) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> target replicas of every reassignment in progress."""
        with self._client() as c:
            response = c.request(ListPartitionReassignmentsRequest(topics=None), 0)
        return {(t.name, p.partition_index): sorted(set(p.replicas) - set(p.removing_replicas))
                for t in response.topics for p in t.partitions}


def _live_brokers(controller: ControllerProcess) -> dict[int, tuple[str, int]]:
    with KafkaClient(controller.host, controller.port, "matrix-setup") as c:
        response = c.request(DescribeClusterRequest(), 1)
    return {b.broker_id: (b.host, b.port) for b in response.brokers}


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("client-matrix")
    controller = ControllerProcess(workdir / "controller").start()
    log = (workdir / "brokers.log").open("wb")
    fleet = subprocess.Popen(
        [PYTHON, "-m", "tools.broker", "--controller", f"{controller.host}:{controller.port}",
         "--fleet", str(len(BROKER_IDS)), "--base-id", str(BROKER_IDS[0]), "--port", "0",
         "--state-dir", str(workdir / "brokers"),
         # New replicas never catch up, so a reassignment that adds one stays in progress.
         "--mean-catch-up-s", "3600"],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=bounded_child(MAX_LIFETIME_S * 4))
    try:
        brokers = poll(lambda: (b := _live_brokers(controller)) and set(b) == set(BROKER_IDS) and b, 30,
                       message="three live test brokers")
        yield Cluster(controller, brokers)
    finally:
        stop_child(fleet)
        log.close()
        controller.stop()


@pytest.fixture(scope="session")
def truth(cluster: Cluster) -> Truth:
    return Truth(cluster)


@pytest.fixture(params=["broker", "controller"])
def bootstrap(request: pytest.FixtureRequest, cluster: Cluster) -> str:
    """Where the client starts: test broker 1, or the controller."""
    return cluster.broker_address(1) if request.param == "broker" else cluster.controller_address


_names = itertools.count()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses."""
    client = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_matrix_").replace("_", "-")
    return f"{client}-{request.node.callspec.params.get('bootstrap', 'x')}-{next(_names)}"


@pytest.fixture(scope="session")
def kafkajs() -> Path:
    """tests/clients/js with kafkajs installed from the checked-in lockfile (npm ci)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("kafkajs needs node and npm, which are not installed (.ci/run installs them)")
    installed = JS_DIR / "node_modules" / ".package-lock.json"
    lock = JS_DIR / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            pytest.skip(f"npm ci of kafkajs failed: {done.stderr.strip().splitlines()[-1:]}")
    return JS_DIR
