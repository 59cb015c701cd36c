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
