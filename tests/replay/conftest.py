"""The one local Spark session the replay tests share: starting one costs seconds."""
import pytest

from tools.replay import job


@pytest.fixture(scope="session")
def spark():
    session = job.spark_session("local[2]", "kraftwire-replay-tests")
    yield session
    session.stop()
