"""pyspark is the optional ``replay`` extra: every module but the capture validation imports
without it, and the controller starts without it."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from tests.conftest import PYTHON, ROOT, free_port
from tools.processes import bounded_child

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
