"""Hostile bytes into every decoder of the project's generated classes, at every version.

The contract: a decoder either returns a message or raises protocol.errors.DecodeError; no other
exception, no hang, and a length prefix never makes it allocate more than the bytes that remain.
Anything a decoder accepts, the encoder can write back, and that writing is stable.
"""

from __future__ import annotations

import contextlib
import random
import signal
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import DecodeError
from protocol.primitives import write_uvarint
from tests.support.message_strategies import MessageValues
from tests.support.schema_corpus import case_id, hypothesis_settings, project_cases, version_params

CASES = project_cases()
PARAMS = version_params(CASES)
BY_NAME = {c.schema.name: c for c in CASES}


class Hang(Exception):
    pass


@contextlib.contextmanager
def watchdog(seconds: float):
    """Turn a decoder that never returns into a test failure instead of a stuck run."""
    def fire(signum, frame):
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def decode_or_decode_error(cls, data: bytes, version: int) -> bool:
    """Decode ``data``; True if accepted. Anything but DecodeError propagates and fails."""
    try:
        obj, end = cls.decode(data, version)
    except DecodeError as exc:
        assert exc.message_name == cls.NAME
        assert exc.version == version
        assert 0 <= exc.offset <= len(data), exc
        assert isinstance(exc.reason, str) and exc.reason
        return False
    assert 0 <= end <= len(data)
    # Accepted bytes describe a message the encoder can write; writing is canonical, so the
    # written form reads back and writes again to the same bytes.
    canonical = obj.encode(version)
    again, end = cls.decode(canonical, version)
    assert end == len(canonical)
    assert again.encode(version) == canonical
    return True


def uvarint(value: int) -> bytes:
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


# --- mutations ------------------------------------------------------------------------------

HUGE_PREFIXES = (
    b"\x7f\xff\xff\xff",          # int32 2^31-1 (array / bytes length)
    b"\x7f\xff",                  # int16 32767 (string length)
    b"\xff\xff\xff\xfe",          # int32 -2 (a negative length that is not null)
    uvarint(2 ** 31),             # compact length 2^31 - 1
    uvarint(2 ** 32 - 1),         # largest unsigned varint32
    b"\xff\xff\xff\xff\xff\x01",  # a varint longer than 5 bytes
)


@st.composite
def mutated(draw, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "huge", "byte"]))
        pos = draw(st.integers(0, len(data)))
        if kind == "flip" and data:
            i = min(pos, len(data) - 1)
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and data:
            data[min(pos, len(data) - 1)] = draw(st.sampled_from([0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff]))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 4))]
        elif kind == "huge":
            prefix = draw(st.sampled_from(HUGE_PREFIXES))
            if draw(st.booleans()):
                data[pos:pos + len(prefix)] = prefix  # overwrite
            else:
                data[pos:pos] = prefix
    return bytes(data)


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_mutated_frames(case, version):
    cls = case.cls()
    values = MessageValues(case.schema, case.module())

    @hypothesis_settings(15)
    @given(st.data())
    def run(data):
        frame = data.draw(values.strategy(version)).encode(version)
        bad = data.draw(mutated(frame))
        with watchdog(5):
            decode_or_decode_error(cls, bad, version)

    run()


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_every_proper_prefix_is_rejected(case, version):
    """Kafka encodings are self-delimiting: a valid frame cut short anywhere cannot decode."""
    cls = case.cls()
    values = MessageValues(case.schema, case.module())

    @hypothesis_settings(3)
    @given(values.strategy(version))
    def run(obj):
        frame = obj.encode(version)
        with watchdog(5):
            for cut in range(len(frame)):
                with pytest.raises(DecodeError):
                    cls.decode(frame[:cut], version)

    run()


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_random_bytes(case, version):
    cls = case.cls()
    rng = random.Random(f"{case.schema.name}-{version}")
    with watchdog(10):
        for _ in range(100):
            size = rng.choice((0, 1, 2, 3, 5, 8, 13, 21, 40, 80))
            data = bytes(rng.getrandbits(8) for _ in range(size))
            decode_or_decode_error(cls, data, version)
            # Mostly-zero and mostly-0xff buffers reach deeper than uniform noise.
            fill = rng.choice((0x00, 0xff, 0x01, 0x80))
            data = bytearray([fill] * size)
            for _ in range(rng.randint(0, 3)):
                if data:
                    data[rng.randrange(len(data))] = rng.getrandbits(8)
            decode_or_decode_error(cls, bytes(data), version)


# --- explicit hostile lengths ---------------------------------------------------------------

TEN = bytes(10)
INT32_MAX = b"\x7f\xff\xff\xff"
COMPACT_INT32_MAX = uvarint(2 ** 31 - 1 + 1)  # compact lengths carry n + 1
HEARTBEAT_FIXED = bytes(4 + 8 + 8 + 2)          # BrokerHeartbeatRequest's fixed fields


def _first_field_array_cases():
    out = []
    for case in CASES:
        for version in case.versions():
            present = [f for f in case.schema.root.fields
                       if version in f.versions and version not in f.tagged]
            if present and present[0].is_array:
                out.append(pytest.param(case, version, id=f"{case_id(case)}-v{version}"))
    return out


HOSTILE = [
    # (message, version, bytes, what)
    ("ElectLeadersRequest", 0, b"\x00\x00\x00\x01" + b"\x00\x01t" + INT32_MAX + TEN,
     "classic []int32 inside a struct array"),
    ("PartitionRecord", 0, bytes(4 + 16) + COMPACT_INT32_MAX + TEN, "compact []int32"),
    ("BrokerHeartbeatRequest", 1, HEARTBEAT_FIXED + b"\x01\x00\x0f" + COMPACT_INT32_MAX + TEN,
     "compact []uuid inside a tagged field"),
    ("BrokerHeartbeatRequest", 1, HEARTBEAT_FIXED + uvarint(2 ** 31 - 1) + TEN,
     "tagged field count"),
    ("BrokerHeartbeatRequest", 1, HEARTBEAT_FIXED + b"\x01\x05" + uvarint(2 ** 31) + TEN,
     "unknown tagged field size"),
    ("SaslAuthenticateRequest", 0, INT32_MAX + TEN, "classic bytes"),
    ("SaslAuthenticateRequest", 2, COMPACT_INT32_MAX + TEN, "compact bytes"),
    ("SaslHandshakeRequest", 0, b"\x7f\xff" + TEN, "classic string"),
    ("TopicRecord", 0, COMPACT_INT32_MAX + TEN, "compact string"),
]


def _assert_rejected_without_allocating(cls, data: bytes, version: int) -> None:
    tracemalloc.start()
    try:
        with watchdog(5):
            with pytest.raises(DecodeError):
                cls.decode(data, version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"decoding {len(data)} hostile bytes peaked at {peak} bytes"


@pytest.mark.parametrize(("case", "version"), _first_field_array_cases())
def test_huge_array_length_first_field(case, version):
    cls = case.cls()
    compact = version in case.schema.flexible
    data = (COMPACT_INT32_MAX if compact else INT32_MAX) + TEN
    _assert_rejected_without_allocating(cls, data, version)


def test_first_field_array_cases_cover_both_forms():
    params = _first_field_array_cases()
    forms = {p.values[1] in p.values[0].schema.flexible for p in params}
    assert forms == {True, False}


@pytest.mark.parametrize(("name", "version", "data", "what"), HOSTILE, ids=[h[3] for h in HOSTILE])
def test_huge_lengths_do_not_allocate(name, version, data, what):
    _assert_rejected_without_allocating(BY_NAME[name].cls(), data, version)


def test_huge_lengths_are_reported_where_they_are():
    cls = BY_NAME["MetadataRequest"].cls()
    with pytest.raises(DecodeError) as info:
        cls.decode(INT32_MAX + TEN, 1)
    assert info.value.message_name == "MetadataRequest"
    assert info.value.version == 1
    assert info.value.offset <= 4


def test_compact_string_longer_than_int16_max_is_rejected():
    # The bytes are all there; Kafka still refuses a string longer than 0x7fff bytes.
    cls = BY_NAME["TopicRecord"].cls()
    data = uvarint(0x8000 + 1) + b"x" * 0x8000 + bytes(16) + b"\x00"
    with pytest.raises(DecodeError):
        cls.decode(data, 0)
    ok = uvarint(0x7FFF + 1) + b"x" * 0x7FFF + bytes(16) + b"\x00"
    assert cls.decode(ok, 0)[1] == len(ok)
