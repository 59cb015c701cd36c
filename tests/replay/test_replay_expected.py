"""The job's tables and report on fixed captures, row for row against results kept in
data/expected.json: the README walkthrough's capture (data/walkthrough.pcapng, recorded once),
that capture damaged in every layer, the same as pcap, an IPv6 conversation and the flow
tests' misbehaving clients. However a capture is split between tasks, what the job writes
must not change, so the job runs it whole and cut into many small shares.

After a deliberate change of what the job reports, write the file again with
`python -m tests.replay.test_replay_expected` and review its diff.
"""
from __future__ import annotations

import io
import json
import math
import struct
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from captures import pcapng_writer
from tests.replay import kafka_frames as k
from tools.replay import job
from tools.replay.capture import Packet
from tools.replay.packet import Segment, decode_segment

pytestmark = pytest.mark.spark

DATA = Path(__file__).parent / "data"
EXPECTED = DATA / "expected.json"
WALKTHROUGH = DATA / "walkthrough.pcapng"


def damaged() -> bytes:
    """The walkthrough with one packet of each kind of damage: a flipped byte in a request
    body, a lost data segment, a response segment cut by the snaplen, IP headers cut short,
    a block whose lengths disagree, and the file cut inside its last block."""
    packets = k.packets(WALKTHROUGH.read_bytes())
    data = [i for i, p in enumerate(packets) if _payload(p)]
    # A registration, a Metadata response, a DescribeCluster response and a Fetch.
    flipped, lost, cut, short = data[13], data[7], data[23], data[20]
    out = list(packets)
    body = bytearray(out[flipped].data)
    body[-40] ^= 0xFF
    out[flipped] = out[flipped]._replace(data=bytes(body))
    out[cut] = out[cut]._replace(data=out[cut].data[:300])
    out[short] = out[short]._replace(data=out[short].data[:30])
    del out[lost]
    raw = bytearray(k.rewrite(out))
    # A block in the middle whose trailing length disagrees with its leading one.
    middle = _block_offsets(bytes(raw))[len(out) // 2]
    total = struct.unpack_from("<I", raw, middle + 4)[0]
    struct.pack_into("<I", raw, middle + total - 4, total + 4)
    return bytes(raw[:-9])


def _payload(packet: Packet) -> bytes:
    segment = decode_segment(packet.link_type, packet.data, packet.orig_len)
    return segment.payload if isinstance(segment, Segment) else b""


def _block_offsets(raw: bytes) -> list[int]:
    """Where each packet block of a little-endian pcapng written by the writer starts."""
    offsets, pos = [], 0
    while pos + 8 <= len(raw):
        block_type, total = struct.unpack_from("<II", raw, pos)
        if block_type == 6:
            offsets.append(pos)
        pos += total
    return offsets


def as_pcap() -> bytes:
    buffer = io.BytesIO()
    with pcapng_writer.open(buffer, format="pcap") as writer:
        for p in k.packets(WALKTHROUGH.read_bytes()):
            writer.write_packet(p.timestamp_ns, p.data, p.orig_len)
        return buffer.getvalue()


def ipv6() -> bytes:
    buffer = io.BytesIO()
    with pcapng_writer.open(buffer) as writer:
        conn = writer.connection(("fd00::1", 40001), ("fd00::2", k.SERVER[1]), k.T0, client_isn=7, server_isn=9)
        for n, (request, response) in enumerate([k.api_versions(), k.registration(2, 1, 5), k.heartbeat(3, 1, 5)]):
            conn.client_to_server(request, k.T0 + 2 * n + 1)
            conn.server_to_client(response, k.T0 + 2 * n + 2)
        conn.close(k.T0 + 100)
        return buffer.getvalue()


def captures() -> dict[str, Callable[[], bytes]]:
    from tests.replay.test_replay_cluster import traffic
    from tests.replay.test_replay_flows import CAPTURES

    return {"walkthrough.pcapng": WALKTHROUGH.read_bytes, "damaged.pcapng": damaged, "walkthrough.pcap": as_pcap,
            "ipv6.pcapng": ipv6, "brokers.pcapng": lambda: traffic(brokers=3),
            **{f"{name}.pcapng": build for name, build in CAPTURES.items()}}


def results(spark: Any, folder: Path, share_bytes: int | None = None) -> dict[str, Any]:
    """The tables and the report's figures of one job over every capture written to `folder`,
    with the folder left out of every path so that runs in different folders compare."""
    paths = []
    for name, build in captures().items():
        path = folder / name
        path.write_bytes(build())
        paths.append(str(path))
    out = folder / "out"
    figures = job.validate(paths, str(out), context=spark.sparkContext, quiet=True, share_bytes=share_bytes)
    figures.pop("seconds")
    figures.pop("cpu_s")
    tables = {name: sorted(_plain([list(r) for r in spark.read.parquet(str(out / name)).collect()], folder),
                           key=json.dumps)
              for name in job.TABLES}
    return dict(figures=_plain(figures, folder), **tables)


def _plain(value: Any, folder: Path) -> Any:
    """`value` as JSON gives it back: lists for tuples, the folder out of strings, and NaN,
    which JSON has no word for, as a string."""
    if isinstance(value, str):
        return value.replace(f"{folder}/", "")
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {key: _plain(item, folder) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, folder) for item in value]
    return value


@pytest.fixture
def expected() -> dict[str, Any]:
    return json.loads(EXPECTED.read_text())


@pytest.mark.parametrize("share_bytes", [None, 4096], ids=["whole", "small-shares"])
def test_tables_and_report_are_the_expected_ones(spark, tmp_path, expected, share_bytes):
    got = results(spark, tmp_path, share_bytes)
    for table in job.TABLES:
        assert len(got[table]) == len(expected[table]), table
        for row, want in zip(got[table], expected[table]):
            assert row == want, table
    # The summary lists problems by capture and flow, in no order within those, and rules by
    # count, each with any one of its violations' details as an example.
    details = {(row[4], row[7]) for row in got["violations"]}
    assert all((rule["rule"], rule["example"]) in details for rule in got["figures"]["rules"])
    for figures in (got["figures"], expected["figures"]):
        figures["problems"].sort(key=lambda problem: json.dumps(problem, sort_keys=True))
        figures["rules"] = sorted((r["rule"], r["severity"], r["count"]) for r in figures["rules"])
    assert got["figures"] == expected["figures"]


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from pyspark.sql import SparkSession

    job.spark_context("local[2]", "kraftwire-replay-expected")
    session = SparkSession.builder.getOrCreate()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            written = results(session, Path(tmp))
    finally:
        session.stop()
    EXPECTED.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n")
