"""The broker's small records: the clean-shutdown marker and the latency histogram."""

from __future__ import annotations

import json

import pytest

from tools.broker.state_dir import MARKER, StateDir
from tools.broker.stats import LatencyHistogram


def test_the_clean_shutdown_epoch_is_read_once(tmp_path):
    state = StateDir(tmp_path / "broker-1")
    assert state.take_clean_shutdown_epoch() == -1  # nothing recorded, no directory yet
    state.record_clean_shutdown(57)
    assert json.loads((tmp_path / "broker-1" / MARKER).read_text()) == {"version": 0, "brokerEpoch": 57}
    assert state.take_clean_shutdown_epoch() == 57
    assert state.take_clean_shutdown_epoch() == -1  # taken at start: a later crash is not clean


@pytest.mark.parametrize("text", ["", "{", '{"version": 0}', '{"brokerEpoch": "x"}', "[]"])
def test_a_damaged_marker_proves_nothing(tmp_path, text):
    (tmp_path / MARKER).write_text(text)
    assert StateDir(tmp_path).take_clean_shutdown_epoch() == -1
    assert not (tmp_path / MARKER).exists()


def test_percentiles_are_within_two_percent():
    h = LatencyHistogram()
    assert h.percentile_ms(99) == 0.0
    for ms in range(1, 1001):
        h.record(ms / 1000)
    assert h.count == 1000 and h.max_s == 1.0
    assert h.percentile_ms(50) == pytest.approx(500, rel=0.02)
    assert h.percentile_ms(99) == pytest.approx(990, rel=0.02)
    assert h.percentile_ms(100) <= 1000.0
    h.record(0.0)  # below a microsecond still counts
    assert h.count == 1001
