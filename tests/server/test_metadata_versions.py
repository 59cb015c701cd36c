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


def test_kraft_version_is_reported_as_finalized_once_the_quorum_records_it() -> None:
    """Kafka's controllers report the quorum's kraft.version among the finalized features
    (ApiVersions, and so Admin.describeFeatures), and leave it out while it is 0."""
    from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
    from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
    from server.controller.clock import ManualClock
    from server.controller.quorum_controller import QuorumController
    from server.controller.result import ControllerResult

    controller = QuorumController("cluster", 1, ManualClock())
    controller.apply(ControllerResult([(FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]))

    def finalized() -> dict[str, int]:
        return {f.name: f.max_version_level for f in controller.finalized_features()}

    assert finalized() == {"metadata.version": 21}
    controller.apply(ControllerResult([(KRaftVersionRecord(version=0, k_raft_version=1), 0)]))
    assert finalized() == {"metadata.version": 21, "kraft.version": 1}
