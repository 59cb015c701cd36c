"""tools.bench's command line: what it lists, and a suite's own options reached through it.
Nothing here runs a benchmark."""

from __future__ import annotations

import pytest

from tools.bench.__main__ import SUITES, main


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
