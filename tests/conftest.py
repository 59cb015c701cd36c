"""Fixtures shared by the server-level tests: a real controller process on a loopback port, and
test-broker processes next to it. Helpers live in tests/support; this file holds fixtures and
pytest hooks only.

``controller`` starts ``python -m server`` in a subprocess (tools.controller_process) and waits
for its "is active" line. Without extra properties it runs the embedded default
(``--data-dir``/``--port``); a test marked
``@pytest.mark.controller_properties({"broker.session.timeout.ms": "1000", ...})`` gets a
formatted server.properties file instead, passed with ``--config``. ``controller_factory``
starts more than one. ``broker_factory(*args)`` starts a broker (or a fleet) pointed at the
``controller`` fixture's address, serving clients on free ports unless ``--port`` is given; each
logs to files in the test's temporary directory.

Every process started here is stopped by its PID at teardown. A process also stops by itself if
the test process dies (parent-death signal) and after ``MAX_LIFETIME_S`` in any case (an alarm
that survives exec), so a crashed or hung test run never leaves a server behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import settings

from tests.support.processes import BrokerProcess
from tools.controller_process import ROOT, ControllerProcess

# Hypothesis keeps an example database and a cache of source constants under ./.hypothesis by
# default, and a test run must not leave that directory in the checkout: examples are not kept,
# and the cache goes to the temporary directory unless HYPOTHESIS_STORAGE_DIRECTORY names one.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      str(Path(tempfile.gettempdir()) / f"kraftwire-hypothesis-{os.getuid()}"))
settings.register_profile("kraftwire", database=None)
settings.load_profile("kraftwire")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "controller_properties(props, release_version=None): extra server.properties "
                   "for the ``controller`` fixture (written to a file and passed with --config)")
    config.addinivalue_line("markers", "spark: starts Spark (a JVM); `make test-fast` leaves these out")
    config.addinivalue_line("markers", "clients: the client matrix (tests/clients: librdkafka, aiokafka, "
                                       "kafka-python, kafkajs, kcat); `make test-fast` leaves these out")
    config.addinivalue_line("markers", "kafka: runs Apache Kafka's own brokers, tools or controllers "
                                       "(tests/kafka, jars from tools.kafka_dist); `make test-fast` leaves these out")


CLIENTS_DIR = ROOT / "tests" / "clients"
KAFKA_DIR = ROOT / "tests" / "kafka"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Marked here rather than test by test, so that a new test using the ``spark`` fixture or
    # added to the client matrix cannot be left out of the selection by mistake.
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if CLIENTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.clients)
        if KAFKA_DIR in item.path.parents:
            item.add_marker(pytest.mark.kafka)


@pytest.fixture
def controller_factory(tmp_path: Path) -> Iterator[Callable[..., ControllerProcess]]:
    """Start controllers: ``controller_factory(properties=None, release_version=None)``."""
    started: list[ControllerProcess] = []

    def start(properties: dict[str, str] | None = None,
              release_version: str | None = None) -> ControllerProcess:
        proc = ControllerProcess(tmp_path / f"controller-{len(started)}", properties, release_version)
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def module_controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    """One embedded-default controller shared by the tests of a module (and by @given examples)."""
    proc = ControllerProcess(tmp_path_factory.mktemp("controller"))
    try:
        yield proc.start()
    finally:
        proc.stop()


@pytest.fixture
def controller(request: pytest.FixtureRequest,
               controller_factory: Callable[..., ControllerProcess]) -> ControllerProcess:
    """A running controller; see the module docstring for ``controller_properties``."""
    marker = request.node.get_closest_marker("controller_properties")
    if marker is None:
        return controller_factory()
    props = marker.args[0] if marker.args else {}
    return controller_factory(props, marker.kwargs.get("release_version"))


@pytest.fixture
def broker_factory(controller, tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_factory(*args, controllers=None)``: start ``python -m tools.broker --controller
    ADDR *args``, ADDR being the ``controller`` fixture's address unless ``controllers`` is given."""
    started: list[BrokerProcess] = []

    def start(*args: str, controllers: str | None = None) -> BrokerProcess:
        # Client listeners on free ports unless a test names one: the default ports (20000 + id)
        # may be taken on a shared machine.
        ports = [] if "--port" in args or "--no-clients" in args else ["--port", "0"]
        proc = BrokerProcess(tmp_path / f"broker-proc-{len(started)}",
                             ["--controller", controllers or f"{controller.host}:{controller.port}", *ports, *args])
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.kill9()
