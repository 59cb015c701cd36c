"""Hostile and broken clients: each one loses its own connection, nobody else notices.

Every case checks three things: what happened to the offending connection, that the
controller's log names that connection (for malformed input), and that a fresh client is
served normally afterwards.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import resource
import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.api_keys import APIS
from protocol.error_codes import Error
from protocol.framing import begin_frame, end_frame
from protocol.generated.messages.api_versions_request import ApiVersionsRequest
from protocol.generated.messages.api_versions_response import ApiVersionsResponse
from protocol.generated.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_cluster_response import DescribeClusterResponse
from protocol.generated.messages.request_header import RequestHeader
from protocol.generated.messages.response_header import ResponseHeader
from tests.support.wire import (
    WireBroker, api_versions, closed_by_peer, connect, frame, listed_brokers, raw_socket)
from tools.processes import poll

MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes of the embedded default


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes,
                  header_version: int = 2, client_id: str | None = "bad-client") -> bytes:
    out = begin_frame()
    RequestHeader(api_key, version, correlation_id, client_id).encode_into(out, header_version)
    out += body
    return end_frame(out)


def api_versions_frame(version: int, correlation_id: int) -> bytes:
    body = ApiVersionsRequest(client_software_name="bad-client",
                              client_software_version="1").encode(min(version, 4))
    return request_frame(18, version, correlation_id, body, header_version=2 if version >= 3 else 1)


def heartbeat_body() -> bytes:
    return BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=5).encode(1)


def assert_served(controller) -> None:
    """A new client gets a normal ApiVersions answer, and the process is still the same one."""
    assert controller.running, f"the controller died:\n{controller.stderr_text()}"
    with connect(controller) as client:
        response = api_versions(client)
    assert response.error_code == Error.NONE
    assert {k.api_key for k in response.api_keys} >= {18, 62, 63, 64}


def assert_logged_close(controller, sock_name: tuple[str, int]) -> None:
    peer = re.escape(f"{sock_name[0]}:{sock_name[1]}")
    controller.wait_for_stderr(rf"WARNING kraftwire\.network: .*{peer}")


def assert_no_tracebacks(controller) -> None:
    text = controller.stderr_text()
    assert "Traceback" not in text and "Fatal error" not in text, text


MALFORMED = {
    # An HTTP request: its first four bytes read as a length of 1.2 GB.
    "http": b"GET / HTTP/1.1\r\nHost: kraftwire\r\n\r\n",
    "negative length": struct.pack(">i", -1) + b"\x00" * 8,
    "empty frame": frame(b""),
    "shorter than a header": frame(b"\x00\x12\x00"),
    "random bytes after a junk api key": frame(b"\x7f\x7f" + bytes(range(200))),
    "truncated body": request_frame(63, 1, 7, heartbeat_body()[:-5]),
    "header string longer than the frame": frame(struct.pack(">hhih", 18, 1, 9, 3000) + b"abc"),
    "hostile array length": request_frame(
        63, 1, 7, struct.pack(">iqq??", 1, 5, 5, False, False) + b"\xff\xff\xff\xff\x0f"),
    "invalid utf-8 client id": frame(struct.pack(">hhih", 18, 1, 9, 4) + b"\xff\xfe\xfd\xfc"),
}


_bystander_ids = itertools.count(100)


@pytest.mark.parametrize("payload", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_bytes_close_only_that_connection(module_controller, payload):
    controller = module_controller
    bystander = WireBroker(controller, next(_bystander_ids))
    assert bystander.register().error_code == Error.NONE
    with raw_socket(controller) as sock:
        sock.sendall(payload)
        assert closed_by_peer(sock), "the server kept a connection that sent garbage"
        assert_logged_close(controller, sock.getsockname())
    # A connection opened before the garbage is unaffected.
    assert bystander.heartbeat().is_fenced is False
    assert_served(controller)
    assert_no_tracebacks(controller)


def test_truncated_frame_then_close(controller):
    with raw_socket(controller) as sock:
        name = sock.getsockname()
        whole = api_versions_frame(3, 1)
        sock.sendall(whole[:len(whole) // 2])
    assert_logged_close(controller, name)
    assert_served(controller)
    assert_no_tracebacks(controller)


def test_oversized_length_prefix_is_refused_before_the_body(controller):
    with raw_socket(controller) as sock:
        sock.sendall(struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\x00" * 64)
        assert closed_by_peer(sock)
        name = sock.getsockname()
    match = controller.wait_for_stderr(re.escape(f"{name[0]}:{name[1]}") + r".*")
    assert str(MAX_REQUEST_BYTES + 1) in match.group(0)
    assert_served(controller)


@pytest.mark.controller_properties({"socket.request.max.bytes": "1024"})
def test_the_frame_limit_is_the_configured_one(controller):
    with raw_socket(controller) as sock:
        sock.sendall(frame(b"\x00" * 1025))
        assert closed_by_peer(sock)
    with connect(controller) as client:  # a frame under the limit is fine
        assert api_versions(client).error_code == Error.NONE


@pytest.mark.parametrize("api_key", [0, 1000, 9999, -1])
def test_unknown_or_unserved_api_key_closes_the_connection(module_controller, api_key):
    controller = module_controller
    with raw_socket(controller) as sock:
        sock.sendall(request_frame(api_key, 0, 5, b"\x00" * 16, header_version=1))
        assert closed_by_peer(sock)
        assert_logged_close(controller, sock.getsockname())
    assert_served(controller)


@pytest.mark.parametrize("api_key,version", [(63, 2), (63, -1), (62, 99), (64, 1)])
def test_unsupported_version_of_a_served_api_closes_the_connection(module_controller, api_key, version):
    controller = module_controller
    with connect(controller) as client:
        served_max = next(k.max_version for k in api_versions(client).api_keys if k.api_key == api_key)
    assert version > served_max or version < 0
    with raw_socket(controller) as sock:
        sock.sendall(request_frame(api_key, version, 5, heartbeat_body()))
        assert closed_by_peer(sock)
        assert_logged_close(controller, sock.getsockname())
    assert_served(controller)


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_api_versions_of_an_unknown_version_is_answered_in_v0(controller):
    with raw_socket(controller) as sock:
        sock.sendall(api_versions_frame(99, 4242))
        reply = read_frame(sock)
        header, pos = ResponseHeader.decode(reply, 0)
        assert header.correlation_id == 4242
        body, end = ApiVersionsResponse.decode(reply, 0, pos)
        assert end == len(reply)
        assert body.error_code == Error.UNSUPPORTED_VERSION
        listed = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert listed[18] == (0, 4)
        assert listed[62] == (0, 4) and listed[63] == (0, 1) and listed[64] == (0, 0)
        # The client retries at a version both sides know, on the same connection.
        sock.sendall(api_versions_frame(3, 4243))
        reply = read_frame(sock)
        header, pos = ResponseHeader.decode(reply, 0)
        assert header.correlation_id == 4243
        body, _ = ApiVersionsResponse.decode(reply, 3, pos)
        assert body.error_code == Error.NONE
        assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == listed
    assert controller.running


def test_a_stalled_half_frame_does_not_hold_up_anyone(controller):
    whole = api_versions_frame(3, 77)
    with raw_socket(controller) as staller:
        staller.sendall(whole[:10])
        # Everyone else is served while the staller sits on half a frame.
        broker = WireBroker(controller, 1)
        assert broker.register().error_code == Error.NONE
        assert broker.heartbeat().is_fenced is False
        with connect(controller) as admin:
            assert listed_brokers(admin) == [1]
        assert_served(controller)
        # The rest of the frame arrives, byte by byte: the request is answered after all.
        for i in range(10, len(whole)):
            staller.sendall(whole[i:i + 1])
        reply = read_frame(staller)
        header, pos = ResponseHeader.decode(reply, 0)
        assert header.correlation_id == 77
        assert ApiVersionsResponse.decode(reply, 3, pos)[0].error_code == Error.NONE


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below the {needed} descriptors needed")


def test_a_thousand_concurrent_connections(controller):
    count = 1000
    raise_fd_limit(count + 200)

    async def one(i: int, opened: asyncio.Event, ready: list) -> int:
        reader, writer = await asyncio.open_connection(controller.host, controller.port)
        try:
            ready.append(i)
            if len(ready) == count:
                opened.set()
            await opened.wait()  # every connection is open before any request goes out
            writer.write(api_versions_frame(3, i))
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            reply = await reader.readexactly(size)
            header, pos = ResponseHeader.decode(reply, 0)
            assert header.correlation_id == i
            return ApiVersionsResponse.decode(reply, 3, pos)[0].error_code
        finally:
            writer.close()

    async def everyone() -> list[int]:
        opened, ready = asyncio.Event(), []
        return await asyncio.wait_for(
            asyncio.gather(*(one(i, opened, ready) for i in range(count))), timeout=60)

    codes = asyncio.run(everyone())
    assert codes == [Error.NONE] * count
    assert_served(controller)
    assert_no_tracebacks(controller)


_served: list[tuple[int, int]] = []


def served_versions(controller) -> list[tuple[int, int]]:
    """(API key, version) for every version of every API the controller lists, but ApiVersions."""
    if not _served:
        with connect(controller) as client:
            for k in api_versions(client).api_keys:
                if k.api_key != 18:
                    _served.extend((k.api_key, v) for v in range(k.min_version, k.max_version + 1))
    return _served


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), body=st.binary(max_size=96))
def test_random_bodies_for_served_apis_never_break_the_server(module_controller, data, body):
    fuzz_target = module_controller
    api_key, version = data.draw(st.sampled_from(served_versions(fuzz_target)))
    header_version = APIS[api_key].request_header_version(version)
    with raw_socket(fuzz_target, timeout=5) as sock:
        sock.sendall(request_frame(api_key, version, 1, body, header_version=header_version))
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(5)
        data = b""
        while chunk := sock.recv(65536):  # answered or closed, never hung
            data += chunk
    if data:
        (size,) = struct.unpack(">i", data[:4])
        assert size == len(data) - 4
        assert struct.unpack(">i", data[4:8])[0] == 1
    assert fuzz_target.running
    assert_no_tracebacks(fuzz_target)


_values: dict[int, object] = {}


def request_values(api_key: int):
    """Hypothesis values for any valid request of ``api_key``, from the project's schema."""
    if api_key not in _values:
        import sys
        from pathlib import Path

        from tests.support.message_strategies import MessageValues
        from tools.codegen.schema import load_schema

        cls = APIS[api_key].request
        schema = load_schema(Path(__file__).resolve().parents[2] / "schemas" / "messages" / f"{cls.NAME}.json")
        _values[api_key] = MessageValues(schema, sys.modules[cls.__module__], unknown_tags=False)
    return _values[api_key]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_valid_requests_with_arbitrary_values_are_always_answered(module_controller, data):
    """Every well-formed request gets an answer (errors included), whatever its values."""
    api_key, version = data.draw(st.sampled_from(served_versions(module_controller)))
    request = data.draw(request_values(api_key).strategy(version))
    if getattr(request, "max_wait_ms", 0) > 100:
        request.max_wait_ms = 100  # a long poll (Fetch) may rightly wait that long for data
    header_version = APIS[api_key].request_header_version(version)
    with raw_socket(module_controller, timeout=30) as sock:
        sock.sendall(request_frame(api_key, version, 99, request.encode(version),
                                   header_version=header_version))
        reply = read_frame(sock)
    header, pos = ResponseHeader.decode(reply, APIS[api_key].response_header_version(version))
    assert header.correlation_id == 99
    _, end = APIS[api_key].response.decode(reply, version, pos)
    assert end == len(reply)
    text = module_controller.stderr_text()
    assert "handler failed" not in text and "Traceback" not in text, text[-3000:]


# --- clients that pipeline far more than they read ---------------------------------------------------

def numbered_requests(first: int, count: int) -> bytes:
    """``count`` ApiVersions v3 frames with correlation ids first, first+1, ..."""
    one = api_versions_frame(3, 0)
    out = bytearray(one * count)
    for i in range(count):
        struct.pack_into(">i", out, i * len(one) + 8, first + i)
    return bytes(out)


def server_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def probe(controller) -> None:
    """Another client is answered: a starved one would wait out the generous socket timeout."""
    with connect(controller, timeout=60) as client:
        assert api_versions(client).error_code == Error.NONE


SENT_LIMIT = 64 << 20


def test_a_client_that_never_reads_is_throttled(controller):
    """The server stops reading from a client whose answers pile up unread."""
    frame_len = len(api_versions_frame(3, 0))
    batch = 5000
    rss_before = server_rss_mb(controller.pid)
    sock = raw_socket(controller)
    sock.setblocking(False)
    sent = 0
    pending = b""
    last_progress = time.monotonic()
    while time.monotonic() - last_progress < 1.0:
        # A throttled server stops after a few MB (its output cap plus the kernel's buffers);
        # one that never stops reading would take requests for ever.
        assert sent < SENT_LIMIT, f"the server kept reading {sent / 1e6:.1f} MB of requests nobody reads answers to"
        if not pending:
            pending = numbered_requests(sent // frame_len, batch)
        try:
            n = sock.send(pending)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        sent += n
        pending = pending[n:]
        last_progress = time.monotonic()
    grew = server_rss_mb(controller.pid) - rss_before
    assert grew < 64, f"the server buffered {grew:.0f} MB for one client"
    # Others are served while that client sits on its answers.
    probe(controller)

    # Once it reads, its answers come, in order (the first few thousand are checked).
    sock.setblocking(True)
    sock.settimeout(30)
    for expected in range(min(3000, sent // frame_len)):
        reply = read_frame(sock)
        assert struct.unpack_from(">i", reply, 0)[0] == expected
    sock.close()
    assert controller.running


def test_a_pipelining_client_does_not_starve_the_others(controller):
    """One connection with thousands of requests in flight gets them answered in turns."""
    stop = threading.Event()
    answered = [0]

    def flood() -> None:
        with raw_socket(controller, timeout=30) as sock:
            def reader() -> None:
                try:
                    while True:
                        data = sock.recv(1 << 20)
                        if not data:
                            return
                        answered[0] += len(data)
                except OSError:
                    return
            threading.Thread(target=reader, daemon=True).start()
            first = 0
            while not stop.is_set():
                sock.sendall(numbered_requests(first, 20000))
                first += 20000

    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    try:
        poll(lambda: answered[0] > 1 << 18, timeout=20, message="the flood to get going")
        flooded = answered[0]
        for _ in range(8):
            probe(controller)
        # The probes were answered while the flood went on being answered too.
        assert flooder.is_alive() and answered[0] > flooded
    finally:
        stop.set()
    flooder.join(timeout=30)
    assert controller.running


# --- unusual but valid ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_api_versions_version_is_answered(module_controller, version):
    with raw_socket(module_controller) as sock:
        sock.sendall(api_versions_frame(version, -7))  # a negative correlation id is echoed too
        reply = read_frame(sock)
    header, pos = ResponseHeader.decode(reply, 0)
    assert header.correlation_id == -7
    body, end = ApiVersionsResponse.decode(reply, version, pos)
    assert end == len(reply)
    assert body.error_code == Error.NONE
    assert {k.api_key for k in body.api_keys} >= {18, 57, 60, 62, 63, 64}
    if version >= 3:
        assert [(f.name, f.max_version_level) for f in body.finalized_features] == [("metadata.version", 25)]


def test_a_null_client_id_is_accepted(module_controller):
    with raw_socket(module_controller) as sock:
        body = DescribeClusterRequest(endpoint_type=1).encode(1)
        sock.sendall(request_frame(60, 1, 11, body, header_version=2, client_id=None))
        reply = read_frame(sock)
    header, pos = ResponseHeader.decode(reply, 1)
    assert header.correlation_id == 11
    response, _ = DescribeClusterResponse.decode(reply, 1, pos)
    assert (response.error_code, response.cluster_id) == (Error.NONE, module_controller.cluster_id)


@pytest.mark.parametrize("version", [10, 11, 12])
def test_metadata_by_topic_id_is_answered_in_every_version(module_controller, version):
    from protocol.generated.messages.metadata_request import MetadataRequest, MetadataRequestTopic
    from protocol.primitives import random_uuid

    with connect(module_controller) as client:
        response = client.request(MetadataRequest(
            topics=[MetadataRequestTopic(topic_id=random_uuid(), name=None)]), version)
        # Ids are looked up from v12; before that Kafka refuses them as invalid.
        expected = Error.UNKNOWN_TOPIC_ID if version >= 12 else Error.INVALID_REQUEST
        assert [t.error_code for t in response.topics] == [expected]
        assert api_versions(client).error_code == Error.NONE  # the connection stays open
    assert "handler failed" not in module_controller.stderr_text()
