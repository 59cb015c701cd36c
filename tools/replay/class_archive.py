"""A class-data archive for the local job's JVM, so that every run after the first starts faster.

Most of a local Spark driver's start is its JVM loading and verifying some ten thousand of
Spark's classes. Java's application class-data sharing (AppCDS, JDK 13+) maps them instead from
an archive that one run writes as its JVM exits (-XX:ArchiveClassesAtExit) and later runs read
(-XX:SharedArchiveFile). The archive holds what that run loaded, and the JVM itself refuses one
that does not match its own build or class path, falling back to loading as usual; it is kept
per Java and PySpark install under KRAFTWIRE_SPARK_CACHE (default ~/.cache/kraftwire/spark), out
of any checkout.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pyspark import SparkContext

# How long a run that writes the archive waits for its JVM to finish writing, at its end.
WRITE_TIMEOUT_S = 120


def folder() -> Path:
    configured = os.environ.get("KRAFTWIRE_SPARK_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "kraftwire" / "spark"


def archive_path() -> Path | None:
    """The archive for this Java and PySpark, whether or not it exists yet; None without Java."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if java is None or not os.path.exists(java):
        return None
    java = os.path.realpath(java)
    key = f"{java}:{os.stat(java).st_mtime_ns}:{pyspark.__version__}:{os.path.realpath(pyspark.__file__)}"
    return folder() / f"driver-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


class Use(NamedTuple):
    """How this run uses the archive: the JVM option; and for a run that writes it, where its
    JVM writes and where the archive goes once whole."""

    option: str
    writing: Path | None
    archive: Path


def use() -> Use | None:
    """Read the archive if it exists, else write it at this run's end; None without Java or
    without a cache folder that can be written."""
    path = archive_path()
    if path is None:
        return None
    if path.exists():
        return Use(f"-XX:SharedArchiveFile={path}", None, path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    writing = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    return Use(f"-XX:ArchiveClassesAtExit={writing}", writing, path)


def finish(context: SparkContext, archive: Use) -> None:
    """After the run's last job: end its JVM, which writes the archive as it exits, and put
    the archive in place once whole. A JVM that does not finish in time is ended, leaving none."""
    from pyspark import SparkContext

    context.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if archive.writing is None or gateway is None or process is None:
        return
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    process.stdin.close()  # the JVM exits when its Python driver's pipe closes
    try:
        process.wait(WRITE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.returncode == 0 and archive.writing.exists():
        os.replace(archive.writing, archive.archive)
    else:
        archive.writing.unlink(missing_ok=True)
