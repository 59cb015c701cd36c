"""tools.bench's command line: what it lists, and a suite's own options reached through it.
Nothing here runs a benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench.__main__ import SUITES, main
from tools.bench.document import sections


def test_help_names_the_suites_and_where_their_options_are(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert all(name in out for name in SUITES)
    assert "python -m tools.bench SUITE --help" in out
    assert "quorum" in out.split("own options")[1]


def test_a_suite_named_alone_shows_its_own_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["quorum", "--help"])
    assert exit_.value.code == 0
    assert "--kills" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "says"), [
    (["nope"], "no suite nope"),
    (["codec", "--sizes", "1"], "codec takes no options"),
    (["codec", "quorum", "--kills", "1"], "need exactly one suite"),
])
def test_a_wrong_command_line_is_refused_with_its_reason(argv: list[str], says: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def _line(name: str, ours: float) -> str:
    return json.dumps({"name": name, "ours": ours, "anchor": 1.0, "unit": "s", "ratio": ours})


def test_a_documented_run_replaces_its_suites_sections_and_keeps_the_others(tmp_path: Path) -> None:
    doc, printed = tmp_path / "BENCHMARKS.md", tmp_path / "lines"
    printed.write_text(_line("codec.decode", 2.0) + "\n" + _line("quorum.commit", 3.0) + "\n")
    assert main(["codec", "quorum", "--doc", str(doc), "--lines", str(printed), "--machine", "sixteen cores"]) == 0
    printed.write_text("a note, not a line\n" + _line("quorum.commit", 4.0) + "\n" + _line("kafka.commit", 5.0) + "\n")
    assert main(["quorum", "kafka", "--doc", str(doc), "--lines", str(printed), "--machine", "two cores"]) == 0

    found = sections(doc.read_text())
    assert list(found) == ["codec", "quorum", "kafka"]
    assert "sixteen cores" in found["codec"] and '"ours": 2.0' in found["codec"]
    assert "two cores" in found["quorum"] and '"ours": 4.0' in found["quorum"] and '"ours": 3.0' not in doc.read_text()
    assert "- command: `python -m tools.bench quorum kafka`" in found["kafka"]
