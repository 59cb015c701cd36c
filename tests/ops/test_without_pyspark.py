"""pyspark is the optional ``replay`` extra: every module but the capture validation imports
without it, the controller starts without it, and ``make run`` does not install it."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
import tomllib
from pathlib import Path

import pytest

from tests.support.processes import PYTHON
from tools.controller_process import ROOT
from tools.processes import bounded_child, free_port

PACKAGES = ("protocol", "captures", "server", "tools")
# The only modules allowed to need pyspark.
NEEDS_SPARK = ("tools/replay/", "tools/bench/replay.py")

BLOCK_SPARK = textwrap.dedent("""
    import importlib.abc, sys

    class NoSpark(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pyspark", "py4j"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, NoSpark())
""")


def modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(NEEDS_SPARK):
                continue
            name = rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            found.append(name)
    return found


def run_blocked(code: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-c", BLOCK_SPARK + code], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=bounded_child(timeout))


def test_the_block_works():
    result = run_blocked("import pyspark")
    assert result.returncode != 0 and "blocked" in result.stderr


def test_every_other_module_imports_without_pyspark():
    names = modules()
    assert "server.app" in names and "tools.metadata_shell.__main__" in names
    result = run_blocked(f"import importlib\nfor name in {names!r}:\n    importlib.import_module(name)\n")
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_controller_starts_without_pyspark(tmp_path: Path):
    port = free_port()
    code = textwrap.dedent(f"""
        import signal, sys, threading, os
        from server.__main__ import main
        # Stop once it is up: SIGTERM is what the controller shuts down on.
        threading.Timer(4.0, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
        sys.exit(main(["--data-dir", {str(tmp_path / "data")!r}, "--port", "{port}"]))
    """)
    result = run_blocked(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "is active on" in result.stdout


def make_dry_run(target: str, venv: Path) -> list[str]:
    """The commands ``make TARGET`` would run on a fresh clone whose venv is ``venv``."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    result = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def pip_installs(commands: list[str]) -> list[str]:
    return [c.split(" install ", 1)[1] for c in commands if " -m pip install " in c and "--upgrade pip" not in c]


def test_make_run_installs_the_project_without_its_extras(tmp_path: Path):
    """``make run`` installs the project's own dependencies only, and none of them is pyspark;
    ``make test`` still installs the test extras, pyspark among them."""
    assert pip_installs(make_dry_run("run", tmp_path / "venv")) == ["--quiet -e ."]
    assert pip_installs(make_dry_run("test", tmp_path / "venv")) == ["--quiet -e '.[test]'"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]]
    assert names and not {"pyspark", "py4j"} & set(names)
    assert any("pyspark" in d for d in project["optional-dependencies"]["replay"])


def test_replay_validate_without_pyspark_names_what_to_install(tmp_path: Path):
    from captures import pcapng_writer

    capture = tmp_path / "c.pcapng"
    with pcapng_writer.open(capture) as writer:
        writer.connection(("10.0.0.1", 50000), ("10.0.0.2", 9093), 0).close(1000)
    result = run_blocked("import sys\nfrom tools.replay.__main__ import main\n"
                         f"sys.exit(main(['validate', {str(capture)!r}, '--out', {str(tmp_path / 'out')!r}]))")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("python -m tools.replay validate: PySpark is not installed; install the replay extra: "
                             "pip install -e '.[replay]'\n")
