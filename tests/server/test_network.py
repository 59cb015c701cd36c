"""server.network on its own: a Connection with a fake router, in process.

Over a fake transport the turn-taking, back-pressure and ordering rules are exact (no timing);
over real loopback sockets, a Listener shows that a failing handler costs only its connection.
"""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from protocol.errors import DecodeError
from server.network import FRAMES_PER_TURN, Connection, FailureLog, Listener, RequestRejected


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def frames_of(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        out.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    assert pos == len(data)
    return out


class FakeRouter:
    """Answers ``re:<payload>`` at once; ``wait*`` later (a future), ``boom`` raises a bug,
    ``reject`` is refused, ``bad`` does not decode, ``silent`` gets no answer."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self.pending: dict[bytes, asyncio.Future] = {}

    def dispatch(self, conn: Connection, payload: bytes):
        self.seen.append(payload)
        if payload.startswith(b"wait"):
            fut = asyncio.get_running_loop().create_future()
            self.pending[payload] = fut
            return fut
        if payload == b"boom":
            raise ZeroDivisionError("a handler bug")
        if payload == b"reject":
            raise RequestRejected("unknown or unserved API key 9999")
        if payload == b"bad":
            raise DecodeError("FakeRequest", 0, 3, "truncated")
        if payload == b"silent":
            return None
        return frame(b"re:" + payload)

    def release(self, payload: bytes) -> None:
        self.pending[payload].set_result(frame(b"re:" + payload))


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.reading = True
        self.closing = False
        self.pauses = 0

    def get_extra_info(self, name, default=None):
        return {"peername": ("192.0.2.7", 40001)}.get(name, default)

    def write(self, data) -> None:
        assert not self.closing
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        self.pauses += 1
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def answers(self) -> list[bytes]:
        return frames_of(b"".join(self.written))


def connection(router: FakeRouter, max_frame: int = 1 << 20) -> tuple[Connection, FakeTransport, list]:
    closed: list[Connection] = []
    conn = Connection(router.dispatch, max_frame, closed.append)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport, closed


async def turns(n: int = 1) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def run(coro):
    import uvloop

    return uvloop.run(coro)


# --- order ----------------------------------------------------------------------------------------

def test_answers_leave_in_request_order_whatever_finishes_first():
    async def main():
        router = FakeRouter()
        conn, transport, _ = connection(router)
        conn.data_received(b"".join(frame(p) for p in [b"wait1", b"a", b"wait2", b"silent", b"b"]))
        assert transport.answers() == []  # "a" must wait behind wait1
        router.release(b"wait2")
        await turns(3)
        assert transport.answers() == []
        router.release(b"wait1")
        await turns(3)
        assert transport.answers() == [b"re:wait1", b"re:a", b"re:wait2", b"re:b"]
        # Ready answers of one turn go out in one write.
        assert len(transport.written) == 1

    run(main())


def test_frames_split_anywhere_are_reassembled():
    async def main():
        router = FakeRouter()
        conn, transport, _ = connection(router)
        data = b"".join(frame(b"x%d" % i) for i in range(20))
        for i in range(0, len(data), 3):
            conn.data_received(data[i:i + 3])
        assert transport.answers() == [b"re:x%d" % i for i in range(20)]

    run(main())


# --- turns and back-pressure ---------------------------------------------------------------------

def test_a_big_read_is_handled_in_turns_without_reading_more():
    async def main():
        router = FakeRouter()
        conn, transport, _ = connection(router)
        total = FRAMES_PER_TURN * 3 + 5
        conn.data_received(b"".join(frame(b"%d" % i) for i in range(total)))
        assert len(router.seen) == FRAMES_PER_TURN
        assert transport.reading is False  # no more bytes until the backlog is done
        await turns(1)
        assert len(router.seen) == 2 * FRAMES_PER_TURN
        await turns(3)
        assert len(router.seen) == total
        assert transport.reading is True
        assert transport.answers() == [b"re:%d" % i for i in range(total)]

    run(main())


def test_unread_answers_stop_reading_and_handling_until_they_drain():
    async def main():
        router = FakeRouter()
        conn, transport, _ = connection(router)
        conn.data_received(frame(b"first"))
        conn.pause_writing()  # the transport's buffer is over its high-water mark
        assert transport.reading is False
        conn.data_received(b"".join(frame(b"q%d" % i) for i in range(10)))  # already in flight
        await turns(3)
        assert router.seen == [b"first"]
        conn.resume_writing()
        assert router.seen == [b"first"] + [b"q%d" % i for i in range(10)]
        assert transport.reading is True
        assert transport.answers() == [b"re:first"] + [b"re:q%d" % i for i in range(10)]

    run(main())


# --- failures ------------------------------------------------------------------------------------

@pytest.mark.parametrize("payload,message", [
    (b"reject", "unknown or unserved API key 9999"),
    (b"bad", "truncated"),
    (b"boom", "handler failed"),
])
def test_a_bad_request_closes_its_connection_after_earlier_answers(caplog, payload, message):
    async def main():
        router = FakeRouter()
        conn, transport, _ = connection(router)
        conn.data_received(b"".join(frame(p) for p in [b"a", payload, b"never"]))
        assert transport.closing
        assert transport.answers() == [b"re:a"]
        assert router.seen == [b"a", payload]

    with caplog.at_level(logging.WARNING, logger="kraftwire.network"):
        run(main())
    lines = [r.getMessage() for r in caplog.records if r.name == "kraftwire.network"]
    assert any("192.0.2.7:40001" in line and message in line for line in lines), lines


def test_a_failed_pending_answer_closes_the_connection(caplog):
    async def main():
        router = FakeRouter()
        conn, transport, _ = connection(router)
        conn.data_received(frame(b"a") + frame(b"wait1") + frame(b"b"))
        router.pending[b"wait1"].set_exception(RuntimeError("commit failed"))
        await turns(3)
        assert transport.closing
        assert transport.answers() == [b"re:a"]

    with caplog.at_level(logging.WARNING, logger="kraftwire.network"):
        run(main())
    assert any("handler failed" in r.getMessage() for r in caplog.records)


def test_an_oversized_prefix_is_refused_before_its_body(caplog):
    async def main():
        conn, transport, _ = connection(FakeRouter(), max_frame=1024)
        conn.data_received(struct.pack(">i", 1025))
        assert transport.closing

    with caplog.at_level(logging.WARNING, logger="kraftwire.network"):
        run(main())
    assert any("1025" in r.getMessage() and "1024" in r.getMessage() for r in caplog.records)


def test_a_peer_leaving_mid_frame_is_logged_but_a_clean_close_is_not(caplog):
    async def main():
        for data in (frame(b"whole"), frame(b"cut")[:5]):
            conn, _, closed = connection(FakeRouter())
            conn.data_received(data)
            conn.connection_lost(None)
            assert closed == [conn]

    with caplog.at_level(logging.WARNING, logger="kraftwire.network"):
        run(main())
    lines = [r.getMessage() for r in caplog.records if r.name == "kraftwire.network"]
    assert len(lines) == 1 and "in the middle of a frame" in lines[0] and "5 bytes" in lines[0]


# --- over sockets --------------------------------------------------------------------------------

def test_a_handler_bug_costs_only_its_connection_over_real_sockets(caplog):
    async def exchange(port: int, payloads: list[bytes]) -> tuple[list[bytes], bool]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(frame(p) for p in payloads))
        data = await asyncio.wait_for(reader.read(), timeout=10)  # until the server closes
        writer.close()
        return frames_of(data), True

    async def ask(port: int, payload: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(payload))
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
        answer = await reader.readexactly(size)
        writer.close()
        return answer

    async def main():
        router = FakeRouter()
        listener = Listener(router.dispatch, 1 << 20)
        _, port = await listener.start("127.0.0.1", 0)
        try:
            answers, _ = await exchange(port, [b"one", b"boom", b"two"])
            assert answers == [b"re:one"]
            assert await ask(port, b"still") == b"re:still"
            assert len(await asyncio.gather(*(ask(port, b"c%d" % i) for i in range(50)))) == 50
        finally:
            await listener.stop()

    with caplog.at_level(logging.WARNING):
        run(main())
    assert any(r.name == "kraftwire.network" and "handler failed" in r.getMessage()
               for r in caplog.records)
    assert not any("Fatal error" in r.getMessage() for r in caplog.records)


# --- bounded bytes -------------------------------------------------------------------------------

def test_a_large_frame_in_odd_pieces_is_assembled_exactly():
    async def main():
        router = FakeRouter()
        conn, transport, _ = connection(router, max_frame=4 << 20)
        big = bytes(range(256)) * 12_000  # about 3 MB
        data = frame(b"small") + frame(big) + frame(b"after")
        pos, step = 0, 1
        while pos < len(data):
            conn.data_received(data[pos:pos + step])
            pos += step
            step = step * 7 % 100_003 + 1  # pieces that split prefixes and bodies anywhere
        assert router.seen == [b"small", big, b"after"]
        assert conn.pending == 0

    run(main())


def test_failed_authentications_are_logged_once_per_address_per_window():
    failures = FailureLog(window_s=60.0, max_addresses=2)
    assert failures.failed("10.0.0.1", "mechanism PLAIN, user 'bob': wrong", now=0.0) == (
        "Failed authentication with /10.0.0.1 (mechanism PLAIN, user 'bob': wrong)")
    assert all(failures.failed("10.0.0.1", "again", now=t) is None for t in range(1, 60))
    assert failures.failed("10.0.0.2", "other", now=1.0) is not None  # each address has its own window
    assert failures.failed("10.0.0.3", "past the tracked addresses", now=1.0) is None
    line = failures.failed("10.0.0.1", "still wrong", now=61.0)
    assert line is not None and line.endswith("; 59 more failed authentications from /10.0.0.1 were not logged")
    failures.failed("10.0.0.1", "once more", now=62.0)
    # Quiet for a whole window after its window: its count is logged on its own and the
    # address forgotten (a client still retrying would have had its line by then).
    assert failures.expired(now=100.0) == [
        "1 failed authentications from other addresses were not logged"]
    assert failures.expired(now=180.0) == []
    assert failures.expired(now=181.0) == ["1 more failed authentications from /10.0.0.1 were not logged"]
    assert failures.expired(now=500.0) == []
    assert failures.failed("10.0.0.1", "new", now=501.0) == "Failed authentication with /10.0.0.1 (new)"


async def _raw(port: int, data: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    return reader, writer


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), timeout=30) == b""
    except ConnectionResetError:
        return True


def test_a_frame_before_login_is_judged_by_sasl_server_max_receive_size(caplog):
    from server.security.sasl import SaslSession
    from server.security.settings import SecurityConfig

    async def main():
        router = FakeRouter()
        security = SecurityConfig(protocol="SASL_PLAINTEXT", sasl_mechanisms=("PLAIN",),
                                  sasl_server_max_receive_size=1024)
        listener = Listener(router.dispatch, 1 << 30, security=security,
                            sasl_factory=lambda: SaslSession(("PLAIN",), {}, lambda u, m: None, 0))
        _, port = await listener.start("127.0.0.1", 0)
        try:
            # At the limit: handed on. One byte over: closed at the prefix, with 100 MiB announced
            # and only a few bytes of it sent.
            reader, writer = await _raw(port, frame(b"x" * 1024))
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))
            assert await reader.readexactly(size) == b"re:" + b"x" * 1024
            writer.close()
            reader, writer = await _raw(port, struct.pack(">i", 100 << 20) + b"abc")
            assert await _closed_by_server(reader)
            writer.close()
            assert listener.used == 0  # nothing of an unauthenticated client counts
        finally:
            await listener.stop()

    with caplog.at_level(logging.INFO, logger="kraftwire.network"):
        run(main())
    lines = [r.getMessage() for r in caplog.records if r.name == "kraftwire.network"]
    assert lines == ["Failed authentication with /127.0.0.1 (invalid receive size before authentication: "
                     "frame of 104857600 bytes exceeds sasl.server.max.receive.size=1024)"], lines


def test_a_connection_waiting_for_the_budget_is_not_idle_and_its_peer_close_is_seen():
    from server.security.settings import SecurityConfig

    async def main():
        router = FakeRouter()
        security = SecurityConfig(queued_max_request_bytes=1000, connections_max_idle_ms=300)
        listener = Listener(router.dispatch, 1 << 20, security=security)
        _, port = await listener.start("127.0.0.1", 0)
        async def until(condition, what: str) -> None:
            async def watch() -> None:
                while not condition():
                    await asyncio.sleep(0.02)
            try:  # a bound on waiting for the event, generous for busy machines
                await asyncio.wait_for(watch(), 120)
            except asyncio.TimeoutError:
                pytest.fail(f"waited in vain for {what}")

        try:
            # The holder overdraws the budget with one frame and keeps sending it slowly, so
            # it is never idle; the waiters' frames cannot start meanwhile.
            holder_frame = frame(b"h" * 5000)
            _, holder = await _raw(port, holder_frame[:100])
            await until(lambda: listener.used == 5004, "the holder's frame reserved")
            waiter_frame = frame(b"w" * 2000)
            waiter_reader, waiter = await _raw(port, waiter_frame[:500])
            _, leaver = await _raw(port, frame(b"l" * 2000)[:500])
            await until(lambda: len(listener.waiting) == 2, "both wait for the budget")
            sent = 100
            stop = asyncio.Event()

            async def trickle() -> None:
                nonlocal sent
                while not stop.is_set():
                    holder.write(holder_frame[sent:sent + 1])
                    sent += 1
                    await asyncio.sleep(0.03)

            trickling = asyncio.create_task(trickle())
            # The time passing is what is tested: four times connections.max.idle.ms, after which
            # an idle connection is closed (tests/security/test_units.py sees that happen).
            await asyncio.sleep(1.2)
            assert len(listener.connections) == 3 and len(listener.waiting) == 2
            # A waiter that goes away is seen, though it is not read from.
            leaver.close()
            await until(lambda: len(listener.connections) == 2, "the leaver's close seen")
            stop.set()
            await trickling
            # The holder's frame completes and releases the budget: the waiter goes on.
            holder.write(holder_frame[sent:])
            waiter.write(waiter_frame[500:])
            (size,) = struct.unpack(">i", await asyncio.wait_for(waiter_reader.readexactly(4), 30))
            assert await waiter_reader.readexactly(size) == b"re:" + b"w" * 2000
            assert router.seen == [b"h" * 5000, b"w" * 2000]
            await until(lambda: listener.used == 0, "the budget given back")
            holder.close()
            waiter.close()
        finally:
            await listener.stop()

    run(main())
