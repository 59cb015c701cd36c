"""Finalized feature levels (metadata.version and friends) and the record versions they allow.

Records are written at the newest version that the finalized metadata.version permits, so
that every broker that accepted that level can read the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from protocol.constants import FeatureUpgradeType
from protocol.error_codes import Error
from protocol.generated.messages.update_features_request import UpdateFeaturesRequest
from protocol.generated.messages.update_features_response import (
    UpdateFeaturesResponse, UpdatableFeatureResult)
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from protocol.message import Message
from server.controller.offsets import OffsetControl, restore_key
from server.controller.result import ControllerResult, VersionedRecord

METADATA_VERSION = "metadata.version"
MV_3_3_IV3 = 7  # controlled-shutdown state in registrations; the oldest level Kafka 4 reads
MV_3_4_IV0 = 8  # ZooKeeper migration fields in registrations
MV_3_6_IV0 = 12  # no more leader epoch bump when an ISR shrinks
MV_3_6_IV1 = 13  # metadata transactions (KIP-868)
MV_3_7_IV2 = 17  # log directory assignment (Directories, LogDirs)
MV_4_0_IV1 = 23  # eligible leader replicas in partition records
# 4.1-IV0 to 4.2-IV1 (26-29) change no metadata record: Kafka writes every record at the
# versions of 4.0-IV3, so a log at those levels reads and continues as one at 25 does.
MV_LATEST = 29  # 4.2-IV1

# What this controller can run, by feature: (min, max) level.
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MV_3_3_IV3, MV_LATEST),
    "kraft.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
    "group.version": (0, 1),
    "transaction.version": (0, 2),
}


KRAFT_VERSION = "kraft.version"

# Raising kraft.version to a level: (error code, message, the records to write).
KraftUpgrade = Callable[[int], tuple[int, str | None, list[Message]]]


@dataclass
class FeatureControl:
    finalized: dict[str, int] = field(default_factory=dict)
    offsets: OffsetControl = field(default_factory=OffsetControl)
    # kraft.version is the quorum's, not a FeatureLevelRecord: raising it writes the records
    # the Raft leader gives (KRaftVersionRecord and the first VotersRecord), or its refusal.
    kraft_upgrade: KraftUpgrade | None = None

    @property
    def metadata_version(self) -> int:
        return self.finalized.get(METADATA_VERSION, MV_3_3_IV3)

    def replay_feature_level(self, record: FeatureLevelRecord) -> None:
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self.finalized, record.name))
        if record.feature_level == 0:
            self.finalized.pop(record.name, None)
        else:
            self.finalized[record.name] = record.feature_level

    # --- record versions chosen by metadata.version --------------------------------------
    def register_broker_record_version(self) -> int:
        mv = self.metadata_version
        return 3 if mv >= MV_3_7_IV2 else 2 if mv >= MV_3_4_IV0 else 1

    def partition_record_version(self) -> int:
        mv = self.metadata_version
        return 2 if mv >= MV_4_0_IV1 else 1 if mv >= MV_3_7_IV2 else 0

    # --- UpdateFeatures -------------------------------------------------------------------
    def update_features(self, request: UpdateFeaturesRequest, version: int,
                        broker_ranges: list[dict[str, tuple[int, int]]]) -> ControllerResult:
        """Validate every update against this controller and every registered broker.

        The request is all-or-nothing: one bad update fails them all, as Kafka does.
        """
        results = []
        records: list[VersionedRecord] = []
        failed = False
        for update in request.feature_updates:
            kind: int
            if version == 0:
                kind = FeatureUpgradeType.SAFE_DOWNGRADE if update.allow_downgrade else FeatureUpgradeType.UPGRADE
            else:
                kind = update.upgrade_type
            code, message = self._check_update(update.feature, update.max_version_level, kind, broker_ranges)
            quorum_records: list[Message] = []
            if code == Error.NONE and update.feature == KRAFT_VERSION:
                if self.kraft_upgrade is None:
                    code, message = Error.INVALID_UPDATE_VERSION, "this controller cannot change kraft.version"
                else:
                    code, message, quorum_records = self.kraft_upgrade(update.max_version_level)
            failed |= code != Error.NONE
            results.append(UpdatableFeatureResult(feature=update.feature, error_code=code, error_message=message))
            if code == Error.NONE and update.feature == KRAFT_VERSION:
                records.extend((m, 0) for m in quorum_records)
            elif code == Error.NONE:
                records.append((FeatureLevelRecord(name=update.feature, feature_level=update.max_version_level), 0))
        if failed:
            for r in results:
                if r.error_code == Error.NONE:
                    r.error_code = Error.INVALID_REQUEST
                    r.error_message = "another update in the request failed"
            records = []
        if request.validate_only:
            records = []
        response = UpdateFeaturesResponse(results=results)
        first_error = next((r for r in results if r.error_code != Error.NONE), None)
        if version >= 2:
            # v2 reports one top-level outcome; per-feature results no longer exist.
            response.results = []
            if first_error is not None:
                response.error_code = first_error.error_code
                response.error_message = first_error.error_message
        return ControllerResult(records, response)

    def _check_update(self, name: str, level: int, kind: int,
                      broker_ranges: list[dict[str, tuple[int, int]]]) -> tuple[int, str | None]:
        if name not in SUPPORTED_FEATURES:
            return Error.INVALID_UPDATE_VERSION, f"the controller does not support feature {name}"
        if kind not in (FeatureUpgradeType.UPGRADE, FeatureUpgradeType.SAFE_DOWNGRADE,
                        FeatureUpgradeType.UNSAFE_DOWNGRADE):
            return Error.INVALID_REQUEST, f"unknown upgrade type {kind}"
        lo, hi = SUPPORTED_FEATURES[name]
        current = self.finalized.get(name, 0)
        if level != 0 and not lo <= level <= hi:
            return Error.INVALID_UPDATE_VERSION, f"{name} level {level} is outside the controller's range {lo}-{hi}"
        if name == METADATA_VERSION and level == 0:
            return Error.INVALID_UPDATE_VERSION, "metadata.version cannot be removed"
        if level < current:
            if kind == FeatureUpgradeType.UPGRADE:
                return Error.INVALID_UPDATE_VERSION, f"{name} {current} -> {level} is a downgrade; ask for one explicitly"
            if name == METADATA_VERSION:
                return Error.INVALID_UPDATE_VERSION, "downgrading metadata.version is not supported"
        for ranges in broker_ranges:
            blo, bhi = ranges.get(name, (0, 0))
            if level != 0 and not blo <= level <= bhi:
                return Error.INVALID_UPDATE_VERSION, f"a registered broker supports {name} {blo}-{bhi} only"
        return Error.NONE, None
