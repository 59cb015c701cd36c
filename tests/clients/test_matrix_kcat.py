"""kcat (librdkafka, the Debian package) against the controller and the test brokers.

kcat has no admin commands: it lists metadata, and produces and consumes, which a test broker
refuses at once with a reason.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.support.clients import BROKER_IDS, FAIL_FAST_S, Cluster, Truth

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat; .ci/run does)")


def kcat(bootstrap: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    return subprocess.run([KCAT, "-b", bootstrap, *args], input=stdin, capture_output=True, text=True,
                          timeout=FAIL_FAST_S)


def test_metadata(bootstrap: str, cluster: Cluster, topic: str, truth: Truth) -> None:
    truth.create_topic(topic, 6, 3)
    done = kcat(bootstrap, "-L", "-J", "-t", topic)
    assert done.returncode == 0, done.stderr
    metadata = json.loads(done.stdout)
    assert {b["id"]: b["name"] for b in metadata["brokers"]} == {
        i: cluster.broker_address(i) for i in BROKER_IDS}
    assert metadata["controllerid"] in BROKER_IDS
    (listed,) = metadata["topics"]
    assert {p["partition"]: [r["id"] for r in p["replicas"]] for p in listed["partitions"]} == truth.partitions(topic)
    assert all(p["leader"] in [r["id"] for r in p["isrs"]] for p in listed["partitions"])


def test_data_plane_fails_fast(bootstrap: str, topic: str, truth: Truth) -> None:
    truth.create_topic(topic, 1, 3)
    produced = kcat(bootstrap, "-P", "-t", topic, stdin="x\n")
    assert produced.returncode != 0
    assert "Topic authorization failed" in produced.stderr
    consumed = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e")
    assert consumed.returncode != 0
    assert "Topic authorization failed" in consumed.stderr
    grouped = kcat(bootstrap, "-G", "matrix-group", topic)
    assert grouped.returncode != 0
    assert re.search("coordinates? no groups", grouped.stderr), grouped.stderr
