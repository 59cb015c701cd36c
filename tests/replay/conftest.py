"""The one local Spark context the replay tests share, with a SQL session over it to read the
tables back: starting one costs seconds."""
import pytest

from tools.replay import job


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    job.spark_context("local[2]", "kraftwire-replay-tests")
    session = SparkSession.builder.getOrCreate()
    yield session
    session.stop()
