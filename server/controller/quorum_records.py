"""What the metadata log says about its own quorum and history: kraft.version and the voter
set (KIP-853 control records), and the ZooKeeper migration state Kafka writes at bootstrap.

None of it changes how kraftwire serves metadata today; it is kept so that a snapshot carries
it forward and the tools can show it.
"""

from __future__ import annotations

from typing import Iterator

from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.generated.metadata.voters_record import VotersRecord
from protocol.generated.metadata.zk_migration_record import ZkMigrationStateRecord
from server.controller.offsets import OffsetControl, restore_attrs
from server.controller.result import VersionedRecord

# ZkMigrationState values, by Kafka's numbers.
MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION", 4: "ZK"}


class QuorumRecords:
    def __init__(self, offsets: OffsetControl) -> None:
        self.offsets = offsets
        self.kraft_version: int | None = None  # None: no KRaftVersionRecord seen (kraft.version 0)
        self.voters: VotersRecord | None = None
        self.zk_migration_state: int | None = None

    def replay_zk_migration(self, record: ZkMigrationStateRecord) -> None:
        self._record_undo(("zk_migration_state",))
        self.zk_migration_state = record.zk_migration_state

    def replay_kraft_version(self, record: KRaftVersionRecord) -> None:
        self._record_undo(("kraft_version",))
        self.kraft_version = record.k_raft_version

    def replay_voters(self, record: VotersRecord) -> None:
        self._record_undo(("voters",))
        self.voters = record

    def _record_undo(self, names: tuple[str, ...]) -> None:
        if self.offsets.recording:
            self.offsets.on_undo(restore_attrs(self, names))

    @property
    def voter_ids(self) -> list[int]:
        return [] if self.voters is None else sorted(v.voter_id for v in self.voters.voters)

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        """The quorum's control messages first (a snapshot carries them in its header batch),
        then the migration state."""
        if self.kraft_version is not None:
            yield KRaftVersionRecord(version=0, k_raft_version=self.kraft_version), 0
        if self.voters is not None:
            yield self.voters, self.voters.version
        if self.zk_migration_state is not None:
            yield ZkMigrationStateRecord(zk_migration_state=self.zk_migration_state), 0
