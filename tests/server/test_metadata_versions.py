"""metadata.version 26-29 (Kafka 4.1 and 4.2): read, run and formatted like 25, whose record
versions they keep."""

from __future__ import annotations

import pytest

from server.controller.features import SUPPORTED_FEATURES, FeatureControl
from server.metalog.bootstrap import metadata_level, release_name


@pytest.mark.parametrize("release, level", [("4.1-IV0", 26), ("4.1", 27), ("4.2-IV0", 28), ("4.2", 29)])
def test_kafka_4_1_and_4_2_levels_are_known(release: str, level: int) -> None:
    assert metadata_level(release) == level
    assert release_name(level) == (release if "-" in release else f"{release}-IV1")
    assert SUPPORTED_FEATURES["metadata.version"][0] <= level <= SUPPORTED_FEATURES["metadata.version"][1]


@pytest.mark.parametrize("level", [26, 27, 28, 29])
def test_records_are_written_at_the_versions_of_4_0(level: int) -> None:
    at_25, at_level = FeatureControl(finalized={"metadata.version": 25}), FeatureControl(
        finalized={"metadata.version": level})
    for choose in ("register_broker_record_version", "partition_record_version"):
        assert getattr(at_level, choose)() == getattr(at_25, choose)()
