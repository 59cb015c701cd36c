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
from pathlib import Path
from typing import Iterator

import pytest

from protocol.client import KafkaClient
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from tests.support.clients import BROKER_IDS, Cluster, Truth
from tests.support.processes import MAX_LIFETIME_S, PYTHON
from tools.controller_process import ROOT, ControllerProcess
from tools.processes import bounded_child, poll, stop_child

JS_DIR = Path(__file__).parent / "js"


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
