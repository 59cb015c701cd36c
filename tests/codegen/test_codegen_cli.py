"""The codegen command refuses a --schemas folder it cannot generate from, and leaves the
output alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.codegen.__main__ import main


@pytest.mark.parametrize("make", ["missing", "empty", "no-json"])
def test_schemas_folder_without_schemas_fails(tmp_path: Path, make: str, capsys: pytest.CaptureFixture[str]):
    schemas = tmp_path / "schemas"
    if make != "missing":
        schemas.mkdir()
    if make == "no-json":
        (schemas / "README.md").write_text("not a schema")
    out = tmp_path / "out"
    out.mkdir()
    kept = out / "kept.py"
    kept.write_text("# generated earlier\n")
    assert main(["--schemas", str(schemas), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(schemas) in err and err.count("\n") == 1
    assert kept.exists()  # nothing deleted


def test_help_is_whole_sentences_and_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "With --check it writes nothing and exits 1 when the checked-in code differs" in text
    assert "--schemas DIR the directory of schema files" in text
    assert "--out DIR the directory the generated code goes into" in text
