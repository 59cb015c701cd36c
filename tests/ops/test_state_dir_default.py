"""Without --state-dir the test brokers keep their state in the user's state directory, not in
the working directory (usually the checkout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.broker.__main__ import options_from_args
from tools.controller_process import ROOT


def test_default_state_dir_is_outside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    options, _ = options_from_args(["--controller", "127.0.0.1:9093", "--fleet", "2", "--base-id", "5"])
    assert options.state_dir(6) == tmp_path / "state" / "kraftwire" / "broker-6"


def test_without_xdg_state_home_it_is_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    options, _ = options_from_args(["--controller", "127.0.0.1:9093", "--node-id", "1"])
    assert options.state_dir(1) == tmp_path / ".local" / "state" / "kraftwire" / "broker-1"


def test_given_state_dir_is_used(tmp_path: Path):
    options, _ = options_from_args(["--controller", "127.0.0.1:9093", "--fleet", "3",
                                    "--state-dir", str(tmp_path / "fleet")])
    assert options.state_dir(2) == tmp_path / "fleet" / "broker-2"
