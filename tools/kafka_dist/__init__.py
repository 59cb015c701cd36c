"""Apache Kafka's server and tools, fetched from Maven Central by coordinates, and run as
Kafka's own scripts run them: ``java`` with a classpath of the jars and a log binding.

Kafka's tests and benchmarks use these to put real Kafka brokers, tools and controllers beside
kraftwire. Nothing here is committed: the jars land in a cache outside the checkout
(``KRAFTWIRE_KAFKA_CACHE``, else ``~/.cache/kraftwire/kafka``), one folder per version, and
Maven keeps its own copy in its local repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

# The versions the tests run, newest first. 4.3.1 is the newest 4.x whose modules all resolve
# (kafka-shell 4.4.0 is not published); 3.7.2 is the last of the line that fetches the metadata
# log without a directory id.
KAFKA_4 = "4.3.1"
KAFKA_3_9 = "3.9.1"
KAFKA_3_7 = "3.7.2"
VERSIONS = (KAFKA_4, KAFKA_3_9, KAFKA_3_7)

# The modules the server and its tools live in (kafka-storage holds the dump-log and storage
# tools' log code; kafka_2.13 holds kafka.Kafka itself).
MODULES = ("kafka_2.13", "kafka-tools", "kafka-shell", "kafka-storage")

# Kafka 3.x logs through slf4j 1 to reload4j, Kafka 4.x through slf4j 2 to log4j 2, as their
# distributions ship them.
LOG_BINDINGS = {
    3: (("org.slf4j", "slf4j-reload4j", "1.7.36"),),
    4: (("org.slf4j", "slf4j-api", "2.0.17"),
        ("org.apache.logging.log4j", "log4j-slf4j2-impl", "2.24.3"),
        ("org.apache.logging.log4j", "log4j-core", "2.24.3")),
}

# Each tool's main class, by script name, newest location first: Kafka moved several from the
# core (Scala) module into kafka-tools over the 3.x and 4.x releases.
TOOLS: dict[str, tuple[str, ...]] = {
    "kafka-server-start": ("kafka.Kafka",),
    "kafka-storage": ("org.apache.kafka.tools.StorageTool", "kafka.tools.StorageTool"),
    "kafka-dump-log": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "kafka-metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-metadata-shell": ("org.apache.kafka.shell.MetadataShell",),
    "kafka-features": ("org.apache.kafka.tools.FeatureCommand",),
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "kafka-configs": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-acls": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
    "kafka-reassign-partitions": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                                  "kafka.admin.ReassignPartitionsCommand"),
    "kafka-leader-election": ("org.apache.kafka.tools.LeaderElectionCommand", "kafka.admin.LeaderElectionCommand"),
    "kafka-console-producer": ("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"),
    "kafka-console-consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer"),
    "kafka-get-offsets": ("org.apache.kafka.tools.GetOffsetShell", "kafka.tools.GetOffsetShell"),
    "kafka-producer-perf-test": ("org.apache.kafka.tools.ProducerPerformance",),
}

# kafka-run-class.sh's heap for tools; servers get more. The JIT stops at its first tier: these
# processes run seconds to minutes on small machines, where C2's compile threads cost more
# than they give back.
TOOL_HEAP = "256m"
SERVER_HEAP = "512m"
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
# kafka-run-class.sh's own (KAFKA_JVM_PERFORMANCE_OPTS) and kafka-server-start.sh's heap, for a
# server measured against kraftwire rather than started quickly.
PERFORMANCE_FLAGS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                     "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true")
PERFORMANCE_HEAP = "1g"

LOG4J1 = """log4j.rootLogger={level}, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=[%d] %p %m (%c)%n
"""
LOG4J2 = """status=warn
appender.err.type=Console
appender.err.name=err
appender.err.target=SYSTEM_ERR
appender.err.layout.type=PatternLayout
appender.err.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level={level}
rootLogger.appenderRef.err.ref=err
"""


class DistributionError(RuntimeError):
    """Kafka's jars could not be fetched or are not there."""


def cache_root() -> Path:
    configured = os.environ.get("KRAFTWIRE_KAFKA_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "kraftwire" / "kafka"


def major(version: str) -> int:
    return int(version.split(".", 1)[0])


def pom(version: str) -> str:
    """A Maven project whose runtime dependencies are Kafka's distribution of ``version``."""
    coordinates = [("org.apache.kafka", module, version) for module in MODULES]
    coordinates += LOG_BINDINGS[major(version)]
    dependencies = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in coordinates)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>kraftwire.kafka</groupId><artifactId>kafka-dist</artifactId><version>{version}</version>"
            f"<packaging>pom</packaging><dependencies>{dependencies}</dependencies></project>\n")


@dataclass(frozen=True)
class Distribution:
    """One fetched Kafka version: its jars and log configurations in ``home``."""

    version: str
    home: Path

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def complete(self) -> bool:
        return (self.home / "COMPLETE").exists()

    @cached_property
    def classpath(self) -> str:
        if not self.complete:
            raise DistributionError(f"Kafka {self.version} is not fetched: python -m tools.kafka_dist fetch {self.version}")
        return os.pathsep.join(str(p) for p in sorted(self.libs.glob("*.jar")))

    @cached_property
    def _classes(self) -> frozenset[str]:
        names: set[str] = set()
        for jar in self.libs.glob("*.jar"):
            with zipfile.ZipFile(jar) as archive:
                names.update(n[:-6].replace("/", ".") for n in archive.namelist() if n.endswith(".class"))
        return frozenset(names)

    def main_class(self, tool: str) -> str:
        """The class that ``bin/<tool>.sh`` of this version runs."""
        candidates = TOOLS.get(tool)
        if candidates is None:
            raise DistributionError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOLS))}")
        for name in candidates:
            if name in self._classes:
                return name
        raise DistributionError(f"Kafka {self.version} has none of {', '.join(candidates)} for {tool}")

    def log_config(self, level: str = "INFO") -> list[str]:
        """The system property that points this version's log binding at a console layout on
        stderr, at ``level``."""
        if major(self.version) >= 4:
            return [f"-Dlog4j2.configurationFile={self.home / f'log4j2-{level}.properties'}"]
        return [f"-Dlog4j.configuration=file:{self.home / f'log4j-{level}.properties'}"]

    def command(self, tool: str, *args: str, heap: str | None = None, level: str | None = None,
                performance: bool = False) -> list[str]:
        """The argv that runs ``tool`` as Kafka's script would: servers log at INFO with a
        larger heap, tools at WARN (Kafka's tools-log4j) with kafka-run-class's heap. With
        ``performance``, the JVM options and heap of Kafka's own scripts, for benchmarks."""
        server = tool == "kafka-server-start"
        flags: tuple[str, ...]
        if performance:
            heap = heap or PERFORMANCE_HEAP
            flags = (f"-Xms{heap}", *PERFORMANCE_FLAGS)
        else:
            heap, flags = heap or (SERVER_HEAP if server else TOOL_HEAP), JVM_FLAGS
        level = level or ("INFO" if server else "WARN")
        return [java(), f"-Xmx{heap}", *flags, *self.log_config(level), "-cp", self.classpath,
                self.main_class(tool), *args]


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise DistributionError("no java on PATH (Kafka needs a JDK 17+): install openjdk-17-jdk-headless")
    return found


def distribution(version: str) -> Distribution:
    return Distribution(version, cache_root() / version)


def fetch(version: str, quiet: bool = True) -> Distribution:
    """Fetch ``version`` into the cache (once; a fetched version is used as it is)."""
    dist = distribution(version)
    if dist.complete:
        return dist
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DistributionError("no mvn on PATH (Kafka's jars come from Maven Central): install maven")
    java()
    dist.home.mkdir(parents=True, exist_ok=True)
    # A fresh folder each time, renamed into place whole, so an interrupted fetch leaves nothing
    # that looks complete.
    with tempfile.TemporaryDirectory(dir=dist.home.parent, prefix=f".{version}-") as scratch:
        work = Path(scratch)
        (work / "pom.xml").write_text(pom(version), encoding="utf-8")
        done = subprocess.run([mvn, "-B", *(["-q"] if quiet else []), "dependency:copy-dependencies",
                               "-DincludeScope=runtime", f"-DoutputDirectory={work / 'libs'}"],
                              cwd=work, capture_output=quiet, text=True)
        if done.returncode != 0:
            detail = (done.stdout or "")[-2000:] if quiet else ""
            raise DistributionError(f"Maven could not fetch Kafka {version}:\n{detail}")
        for level in ("INFO", "WARN", "DEBUG"):
            (work / f"log4j-{level}.properties").write_text(LOG4J1.format(level=level), encoding="utf-8")
            (work / f"log4j2-{level}.properties").write_text(LOG4J2.format(level=level), encoding="utf-8")
        (work / "COMPLETE").write_text(version + "\n", encoding="utf-8")
        shutil.rmtree(dist.home)
        work.rename(dist.home)
        # The TemporaryDirectory's own cleanup finds nothing left to remove.
        work.mkdir()
    return dist
