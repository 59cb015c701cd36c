"""Plain connections read straight from segments to frames (`in_order`) give the rows the
general path (reassembler, router, framer) gives, and connections that are not plain go the
general way."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

import pytest

from captures import pcapng_writer
from tests.replay import kafka_frames as k
from tests.replay.test_replay_expected import captures
from tools.replay import in_order
from tools.replay.decode import decode_flows
from tools.replay.flows import PROBE_LIMIT, route
from tools.replay.index import index_capture, share_events


def conversation(isn: int = 7, close: bool = True, first: bytes | None = None, after: bytes = b"") -> bytes:
    """A client's requests and the server's answers over one connection whose client numbers
    its bytes from `isn`; `first` goes before them and `after` after them, from the client."""
    buffer = io.BytesIO()
    with pcapng_writer.open(buffer) as writer:
        conn = writer.connection(k.CLIENT, k.SERVER, k.T0, client_isn=isn, server_isn=isn ^ 0x5A5A)
        if first is not None:
            conn.client_to_server(first, k.T0 + 1)
        for n, (request, response) in enumerate([k.api_versions(), k.registration(2, 1, 5), k.heartbeat(3, 1, 5)]):
            conn.client_to_server(request, k.T0 + 10 * n + 2)
            conn.server_to_client(response, k.T0 + 10 * n + 3)
        if after:
            conn.client_to_server(after, k.T0 + 100)
        if close:
            conn.close(k.T0 + 200)
        return buffer.getvalue()


PLAIN: dict[str, Callable[[], bytes]] = {
    "closed": conversation,
    "left open": lambda: conversation(close=False),
    "sequence numbers that wrap": lambda: conversation(isn=0xFFFFFF00),
}
NOT_PLAIN: dict[str, Callable[[], bytes]] = {
    "a first request larger than the probe looks at": lambda: conversation(first=k.raw_frame(b"\0" * PROBE_LIMIT)),
    "a size prefix that cannot be one": lambda: conversation(after=b"\xff" * 12),
    "a frame left unfinished": lambda: conversation(after=k.api_versions(9)[0][:-3]),
}


def rows(path: Path, parts: int, share_bytes: int, ports: frozenset[int], read: Callable[..., Any]) -> list[str]:
    index = index_capture(str(path), str(path))
    return sorted(repr(row) for share in index.shares(parts, share_bytes) for row in read(share, str(path), ports))


def general(share: Any, capture: str, ports: frozenset[int]) -> Any:
    return decode_flows(route(share_events(share), capture, ports or None), capture)


def plain_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each connection `in_order` tried was read the plain way, as it goes."""
    calls: list[bool] = []
    tried = in_order._plain

    def spy(*args: Any) -> Any:
        result = tried(*args)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(in_order, "_plain", spy)
    return calls


@pytest.mark.parametrize("name", sorted(captures()))
@pytest.mark.parametrize("ports", [frozenset(), frozenset({k.SERVER[1]})], ids=["probed", "by-port"])
def test_every_capture_reads_as_the_general_path_reads_it(tmp_path, name, ports):
    path = tmp_path / name
    path.write_bytes(captures()[name]())
    for parts, share_bytes in ((1, 1 << 40), (8, 4096)):
        assert rows(path, parts, share_bytes, ports, in_order.decode_share) == rows(
            path, parts, share_bytes, ports, general)


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_a_plain_connection_is_read_without_the_general_path(tmp_path, monkeypatch, name):
    path = tmp_path / "capture.pcapng"
    path.write_bytes(PLAIN[name]())
    calls = plain_calls(monkeypatch)
    got = rows(path, 1, 1 << 40, frozenset(), in_order.decode_share)
    assert calls == [True]
    assert got == rows(path, 1, 1 << 40, frozenset(), general)


@pytest.mark.parametrize("name", sorted(NOT_PLAIN))
def test_a_connection_that_is_not_plain_goes_the_general_way(tmp_path, monkeypatch, name):
    path = tmp_path / "capture.pcapng"
    path.write_bytes(NOT_PLAIN[name]())
    calls = plain_calls(monkeypatch)
    got = rows(path, 1, 1 << 40, frozenset(), in_order.decode_share)
    assert calls == [False]
    assert got == rows(path, 1, 1 << 40, frozenset(), general)


def test_retransmitted_segments_go_the_general_way(tmp_path, monkeypatch):
    path = tmp_path / "capture.pcapng"
    path.write_bytes(captures()["retransmitted_and_overlapping.pcapng"]())
    calls = plain_calls(monkeypatch)
    got = rows(path, 1, 1 << 40, frozenset(), in_order.decode_share)
    assert calls and not any(calls)
    assert got == rows(path, 1, 1 << 40, frozenset(), general)
