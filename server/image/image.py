"""A read-only metadata image for the tools (metadata shell, test broker): the state of the
log replayed by the loader, with the controller's own replay, but nobody's controller.

The controls are exposed for reading; only ``load_snapshot`` and ``replay_batch`` change the
image. Listeners hear every log record after it is replayed; a snapshot replaces the image.
"""

from __future__ import annotations

from typing import Callable, Iterable

from protocol.message import Message
from protocol.records import RecordBatch
from server.controller.acls import AclControl
from server.controller.clock import ManualClock
from server.controller.cluster import BrokerRegistration, ClusterControl
from server.controller.configs import ConfigControl
from server.controller.delegation_tokens import DelegationTokenControl, TokenSettings
from server.controller.features import FeatureControl
from server.controller.producer_ids import ProducerIdControl
from server.controller.quorum_controller import QuorumController
from server.controller.quorum_records import QuorumRecords
from server.controller.quotas import ClientQuotaControl
from server.controller.replication import ReplicationControl
from server.controller.result import VersionedRecord
from server.controller.scram import ScramControl
from server.image.loader import Leader, MetadataLoader

RecordListener = Callable[[Message, int], None]


class MetadataImage:
    def __init__(self, tokens: TokenSettings | None = None) -> None:
        """``tokens``: a broker's delegation token settings, whose secret gives the HMACs of
        the tokens replayed (its clients log in with them)."""
        self.listeners: list[RecordListener] = []
        self.token_settings = tokens or TokenSettings()
        self.reset()

    def reset(self) -> None:
        """Forget everything: the next batch replayed must start the log."""
        # Cluster id, node id and clock play no part in replay.
        self._controller = QuorumController("", -1, ManualClock())
        self._controller.delegation_tokens.configure(self.token_settings)
        self._loader = MetadataLoader(self._controller)

    # --- changing it ----------------------------------------------------------------------
    def load_snapshot(self, records: Iterable[VersionedRecord], end_offset: int, where: str = "snapshot",
                      epoch: int = -1) -> None:
        """Replace the image with a snapshot's records, as of ``end_offset`` and ``epoch``. The
        next Fetch names no last epoch: the log may no longer hold a batch of the snapshot's epoch."""
        self.reset()
        self._loader.snapshot(records, end_offset, where, epoch)

    def replay_batch(self, batch: RecordBatch, where: str = "the fetched log") -> None:
        """Replay a log batch's records this image has not seen yet."""
        for record, offset in self._loader.batch(batch, where):
            for listener in self.listeners:
                listener(record, offset)

    def replay_raw(self, data: bytes, pos: int, where: str) -> None:
        """Replay the whole, CRC-checked batch at ``data[pos:]`` (a segment file)."""
        self._loader.raw_batch(data, pos, where)

    def set_leader(self, leader_id: int, epoch: int) -> None:
        """The leader a Fetch response names, which is newer than any LeaderChange read."""
        self._loader.leader = Leader(leader_id, epoch)

    # --- reading it -----------------------------------------------------------------------
    @property
    def next_offset(self) -> int:
        return self._controller.next_offset

    @property
    def offset(self) -> int:
        """The last offset replayed: what a heartbeat reports as CurrentMetadataOffset."""
        return self._controller.last_applied_offset

    @property
    def last_epoch(self) -> int:
        """Leader epoch of the last batch replayed, for Fetch's LastFetchedEpoch."""
        return self._loader.last_epoch

    @property
    def contained_epoch(self) -> int:
        """Epoch of the last batch or snapshot the image holds: what it reflects, for people."""
        return self._loader.contained_epoch

    @property
    def leader(self) -> Leader | None:
        return self._loader.leader

    @property
    def cluster(self) -> ClusterControl:
        return self._controller.cluster

    @property
    def replication(self) -> ReplicationControl:
        return self._controller.replication

    @property
    def features(self) -> FeatureControl:
        return self._controller.features

    @property
    def configs(self) -> ConfigControl:
        return self._controller.configs

    @property
    def acls(self) -> AclControl:
        return self._controller.acls

    @property
    def quotas(self) -> ClientQuotaControl:
        return self._controller.quotas

    @property
    def scram(self) -> ScramControl:
        return self._controller.scram

    @property
    def delegation_tokens(self) -> DelegationTokenControl:
        return self._controller.delegation_tokens

    @property
    def producer_ids(self) -> ProducerIdControl:
        return self._controller.producer_ids

    @property
    def quorum(self) -> QuorumRecords:
        return self._controller.quorum

    def registration(self, broker_id: int) -> BrokerRegistration | None:
        return self._controller.cluster.brokers.get(broker_id)

    def is_usable(self, broker_id: int) -> bool:
        return self._controller.cluster.is_usable(broker_id)
