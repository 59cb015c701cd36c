"""Finding the active controller, and catching up from a snapshot.

A "standby" here is a small server that answers ApiVersions like any controller and every other
request with NOT_CONTROLLER, as a controller that is not the active one does.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import socketserver
import struct
import threading

import pytest

from protocol.api_keys import APIS
from protocol.error_codes import Error
from protocol.framing import begin_frame, end_frame
from protocol.generated.messages import ApiKey
from protocol.generated.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.generated.messages.response_header import ResponseHeader
from protocol.headers import peek_request_prefix
from tests.support.observe import unfenced_brokers, wait_until
from tests.support.wire import connect
from tools.controller_process import EMBEDDED_NODE_ID

SNAPSHOTTING = {"metadata.log.segment.bytes": "4096", "broker.session.timeout.ms": "3000",
                "broker.heartbeat.interval.ms": "500"}


class _Standby(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            head = _read(sock, 4)
            if head is None:
                return
            frame = _read(sock, struct.unpack(">i", head)[0])
            if frame is None:
                return
            key, version, correlation_id = peek_request_prefix(frame)
            api = APIS[key]
            if key == ApiKey.API_VERSIONS:
                response = ApiVersionsResponse(api_keys=[ApiVersion(api_key=k, min_version=a.min_version,
                                                                    max_version=a.max_version)
                                                         for k, a in APIS.items()])
            else:
                response = api.response()
                response.error_code = Error.NOT_CONTROLLER
            self.server.answered += 1
            out = begin_frame()
            ResponseHeader(correlation_id).encode_into(out, api.response_header_version(version))
            response.encode_into(out, version)
            sock.sendall(end_frame(out))


def _read(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


@pytest.fixture
def standby():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Standby)
    server.daemon_threads = True
    server.answered = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_active_controller_is_found_from_the_bootstrap_list(controller, broker_factory, standby, tmp_path):
    fake = f"127.0.0.1:{standby.server_address[1]}"
    real = f"{controller.host}:{controller.port}"
    broker = broker_factory("--node-id", "3", "--heartbeat-interval-ms", "500", "--state-dir",
                            str(tmp_path / "state"), controllers=f"{fake},{real}")
    broker.wait_for_state(3, "ACTIVE")
    assert standby.answered > 0
    assert re.search(rf"lost the controller at {fake} \(NOT_CONTROLLER\); next try {real}", broker.stderr())
    with connect(controller) as admin:
        assert unfenced_brokers(admin) == [3]

    # The controller goes away and comes back on the same address: the broker finds it again,
    # keeps its registration and stays unfenced.
    controller.restart()
    wait_until(lambda: broker.stderr().count(f"lost the controller at {real}") >= 1, 20,
               "the broker to notice the controller restart")
    with connect(controller) as admin:
        wait_until(lambda: unfenced_brokers(admin) == [3], 20, "broker 3 unfenced after the restart")
    before = int(re.search(r"answered (\d+)", broker.summary())[1])
    wait_until(lambda: int(re.search(r"answered (\d+)", broker.summary())[1]) > before + 2, 10,
               "heartbeats answered by the restarted controller")
    assert [t[2] for t in broker.transitions(3)] == ["FENCED", "ACTIVE"]


@pytest.mark.controller_properties(SNAPSHOTTING)
def test_a_broker_behind_the_log_start_loads_the_snapshot(controller, broker_factory, tmp_path):
    fleet = broker_factory("--fleet", "60", "--state-dir", str(tmp_path / "fleet"), "--heartbeat-interval-ms", "500",
                           "--log-level", "WARNING")
    wait_until(lambda: "(ACTIVE 60;" in fleet.summary(), 30, "60 active brokers")
    os.kill(controller.pid, signal.SIGUSR1)  # take a snapshot now; older segments go
    match = controller.wait_for_stderr(r"wrote snapshot (\d+)-\d+\.checkpoint .* removed ([1-9]\d*) old segments",
                                       timeout=20)
    assert int(match[1]) > 0
    late = broker_factory("--node-id", "100", "--state-dir", str(tmp_path / "late"), "--heartbeat-interval-ms", "500")
    late.wait_for_state(100, "ACTIVE")
    assert re.search(rf"loaded metadata snapshot {int(match[1])}-\d+", late.stderr())
    with connect(controller) as admin:
        assert unfenced_brokers(admin) == [*range(1, 61), 100]


def test_a_broker_refused_at_registration_says_why_once_and_stops(controller, broker_factory, tmp_path):
    """A node id the controller's voter uses is refused INVALID_REGISTRATION, as Kafka's
    ClusterControlManager refuses it: no retry can change that, so the broker says why in one
    line, stops fetching and exits 1 instead of logging a failed Fetch every second."""
    broker = broker_factory("--node-id", str(EMBEDDED_NODE_ID), "--state-dir", str(tmp_path / "state"))
    assert broker.proc is not None
    assert broker.proc.wait(timeout=60) == 1, broker.stderr()
    err = broker.stderr()
    assert err.count("registration refused with INVALID_REGISTRATION (119)") == 1, err
    assert "Traceback" not in err, err
    # A Fetch sent with the registration may have failed too; none is sent after the refusal.
    assert "Fetch" not in err.split("registration refused")[1], err


def test_a_broker_that_never_reached_a_controller_has_lost_none(broker_factory, tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"
    broker = broker_factory("--node-id", "1", "--state-dir", str(tmp_path / "state"), controllers=dead)
    wait_until(lambda: f"no controller at {dead} (cannot connect" in broker.stderr(), 60,
               "the broker to say it finds no controller")
    assert "lost the controller" not in broker.stderr()
