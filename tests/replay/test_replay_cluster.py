"""The job on a Spark standalone cluster: a master and two workers on loopback, started with
pyspark's own launcher (bin/spark-class and the bundled jars), running `tools.replay validate
--master spark://...` exactly as a user would, with the same tables as local mode."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.replay import kafka_frames as k
from tools.controller_process import ROOT
from tools.processes import bounded_child, free_port, poll, stop_child
from tools.replay import job

pytestmark = pytest.mark.spark

CLUSTER_LIFETIME_S = 600
START_TIMEOUT_S = 120
JOB_TIMEOUT_S = 480


def spark_home() -> Path:
    import pyspark
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        pytest.skip("this pyspark has no bin/spark-class")
    return home


def launch(home: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    with open(log, "wb") as out:
        # spark-class ends in exec: the PID is the JVM's.
        return subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                                env=env, preexec_fn=bounded_child(CLUSTER_LIFETIME_S))


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:PORT with two registered workers of one core each."""
    home = spark_home()
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log = tmp_path / "master.log"
    started = [launch(home, master_log, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                      "--port", str(port), "--webui-port", str(free_port()))]
    try:
        for n in (1, 2):
            work = tmp_path / f"worker-{n}"
            work.mkdir()
            started.append(launch(home, tmp_path / f"worker-{n}.log", "org.apache.spark.deploy.worker.Worker", url,
                                  "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                  "--webui-port", str(free_port()), "--work-dir", str(work)))
        poll(lambda: master_log.read_text(errors="replace").count("Registering worker") >= 2
             or any(p.poll() is not None for p in started), START_TIMEOUT_S, 0.5, "two workers to register")
        assert all(p.poll() is None for p in started), master_log.read_text(errors="replace")[-3000:]
        yield url
    finally:
        for proc in reversed(started):
            stop_child(proc)


def rows(spark, folder: Path, table: str) -> list[tuple]:
    frame = spark.read.parquet(str(folder / table))
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_the_job_on_a_standalone_cluster_gives_the_local_tables(cluster, spark, tmp_path):
    # Two captures: two tasks, one for each worker's core.
    captures = [tmp_path / "traffic-1.pcapng", tmp_path / "traffic-2.pcapng"]
    for n, capture in enumerate(captures):
        capture.write_bytes(traffic(brokers=3 + n))
    local, remote = tmp_path / "local", tmp_path / "cluster"
    job.validate([str(c) for c in captures], str(local), context=spark.sparkContext)
    # The executors run this interpreter (it has the decoder's packages); the code goes as a zip.
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run([sys.executable, "-m", "tools.replay", "validate", *map(str, captures),
                             "--out", str(remote), "--master", cluster], cwd=ROOT, env=env, capture_output=True, timeout=JOB_TIMEOUT_S)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    assert f"report: {remote / 'report.html'}" in result.stdout.decode()
    for table in job.TABLES:
        assert rows(spark, remote, table) == rows(spark, local, table), table
    # Both captures' every request and answer: 3 + 4 brokers, 3 + HEARTBEATS exchanges each.
    assert len(rows(spark, remote, "frames")) == (3 + 4) * 2 * (3 + HEARTBEATS)


HEARTBEATS = 5


def traffic(brokers: int) -> bytes:
    """A capture of `brokers` connections: versions, a registration, heartbeats, a fetch."""
    flows = []
    for broker_id in range(1, brokers + 1):
        epoch = 100 + broker_id
        exchanges = [k.api_versions(1), k.registration(2, broker_id, epoch)]
        exchanges += [k.heartbeat(3 + n, broker_id, epoch) for n in range(HEARTBEATS)]
        exchanges += [k.fetch(3 + HEARTBEATS, k.record_batch())]
        flows.append(exchanges)
    return k.capture(*flows)
