"""tshark's Kafka dissector as a second reader of a capture, for the tests that compare with it."""
from __future__ import annotations

import collections
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest


class Reading(NamedTuple):
    requests_per_api: collections.Counter  # API key -> requests
    # "requests" and "responses" -> Kafka messages. tshark names a response's API only when it
    # knows the request's version, so responses are counted, not split by API.
    messages: collections.Counter


def require() -> None:
    """Skip the calling test, saying why, where tshark is not installed."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (Debian: apt-get install tshark); no second reader to compare with")


def read(capture: Path | str, port: int) -> Reading:
    """The Kafka messages tshark finds in a capture, decoding `port` as Kafka."""
    out = subprocess.run(
        ["tshark", "-r", str(capture), "-d", f"tcp.port=={port},kafka", "-Y", "kafka", "-T", "fields",
         "-e", "tcp.dstport", "-e", "kafka.api_key", "-e", "kafka.correlation_id"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    reading = Reading(collections.Counter(), collections.Counter())
    for line in out.splitlines():
        dstport, api_keys, correlation_ids = line.split("\t")
        # A packet holding several Kafka messages lists their values joined by commas.
        direction = "requests" if int(dstport) == port else "responses"
        reading.messages[direction] += sum(1 for value in correlation_ids.split(",") if value)
        if direction == "requests":
            reading.requests_per_api.update(int(key) for key in api_keys.split(",") if key)
    return reading
