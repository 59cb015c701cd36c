"""The fetching side: a follower's and an observer's Fetch and FetchSnapshot, what their answers
do to the log (append, truncate at a divergence, install a snapshot) and the high watermark, and
a voter telling the leader its listeners (UpdateRaftVoter)."""

from __future__ import annotations

from typing import Any



from protocol.error_codes import Error
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_response import FetchResponse
from protocol.generated.messages.fetch_snapshot_response import FetchSnapshotResponse
from protocol.generated.messages.update_raft_voter_request import (
    KRaftVersionFeature as UpdateKRaftVersionFeature, Listener as UpdateListener, UpdateRaftVoterRequest)
from protocol.primitives import ZERO_UUID
from protocol.records import read_batch_header
from server.raft import messages as rpc
from server.raft.base import CoreBase
from server.raft.log import split_batches
from server.raft.outbox import Kind
from server.raft.outputs import Refused, SnapshotInstalled
from server.raft.replication import truncation_offset
from server.raft.state import Election, Follower, SnapshotDownload, Unattached
from server.raft.types import OffsetAndEpoch
from server.raft.voters import KRAFT_VERSION_DYNAMIC, SUPPORTED_KRAFT_VERSIONS, snapshot_quorum_messages


class FollowerReplication(CoreBase):
    """Replicating from the leader, as a voter or an observer."""

    def _poll_observer(self, state: Follower | Unattached, now: int) -> None:
        """An observer never stands: it fetches from the leader it knows, and when that
        leader goes silent (or it knows none) asks a bootstrap server or a known voter in
        turn, whose answer names the leader, as Kafka's observers do."""
        if isinstance(state, Follower):
            if now < state.fetch_deadline:
                self._send_fetch(state, now)
                return
            self.transitions.set_state(Unattached(Election(self.epoch), now), now)
        unattached = self.state
        assert isinstance(unattached, Unattached)
        if not self.outbox.idle:
            # The answer (or its failure) wakes it; the timer need not.
            unattached.election_deadline = now + self.config.request_timeout_ms
            return
        # Asked again after a backoff whatever happens, so that nothing spins while no
        # bootstrap server answers.
        unattached.election_deadline = now + max(1, self.config.retry_backoff_ms)
        # The bootstrap servers, then the voters the log names: a leader that removed itself
        # may have only itself as a bootstrap server, and the voters left know the new leader.
        own = self.address_of(self.node_id)
        targets = [-2 - i for i, server in enumerate(self.config.bootstrap_servers) if tuple(server) != own]
        targets += sorted(v for v in self.voters if v != self.node_id)
        if not targets:
            return
        target = targets[self._next_bootstrap % len(targets)]
        self._next_bootstrap += 1
        self._send(target, self._fetch_request(), Kind.FETCH, now)

    def _send_fetch(self, state: Follower, now: int) -> None:
        if self.outbox.busy(state.election.leader_id):
            return
        if state.download is not None:
            self._send(state.election.leader_id, rpc.fetch_snapshot_request(
                self.config.cluster_id, self.local_key, self.epoch, state.download.snapshot,
                len(state.download.data), self.config.fetch_max_bytes), Kind.FETCH_SNAPSHOT, now)
            return
        if not state.update_sent and state.has_fetched and self._maybe_update_voter(state, now):
            return  # the next fetch goes once the leader has answered it
        self._send(state.election.leader_id, self._fetch_request(), Kind.FETCH, now)

    def _fetch_request(self) -> FetchRequest:
        return rpc.fetch_request(
            self.config.cluster_id, self.local_key, self.epoch, self.log.end_offset, self.log.last_epoch,
            self.log.start_offset, self.config.fetch_max_wait_ms, self.config.fetch_max_bytes)

    def _maybe_update_voter(self, state: Follower, now: int) -> bool:
        """A voter whose entry in the voter set names other listeners than it has (it moved,
        or was added before it knew them) asks the leader to record its own, once an epoch."""
        node = self.voter_set.node(self.node_id)
        if node is None or not self.is_voter or not self.config.endpoints \
                or self.local_key.directory_id == ZERO_UUID:
            return False
        # Under kraft.version 1 only a change is said; under 0 the leader learns every voter's
        # key and listeners this way, which the upgrade to kraft.version 1 needs.
        if self.history.kraft_version >= KRAFT_VERSION_DYNAMIC and set(node.endpoints) == set(self.config.endpoints):
            return False
        state.update_sent = self._send(state.election.leader_id, UpdateRaftVoterRequest(
            cluster_id=self.config.cluster_id, current_leader_epoch=self.epoch, voter_id=self.node_id,
            voter_directory_id=self.local_key.directory_id,
            listeners=[UpdateListener(name=n, host=h, port=p) for n, h, p in self.config.endpoints],
            k_raft_version_feature=UpdateKRaftVersionFeature(min_supported_version=SUPPORTED_KRAFT_VERSIONS[0],
                                                             max_supported_version=SUPPORTED_KRAFT_VERSIONS[-1])),
                   Kind.UPDATE_VOTER, now)
        return state.update_sent

    def _on_fetch_response(self, source: int, response: FetchResponse, now: int) -> bool:
        for endpoint in response.node_endpoints:
            if endpoint.node_id != self.node_id:
                self._learnt[endpoint.node_id] = (endpoint.host, endpoint.port)
        if response.error_code == Error.INCONSISTENT_CLUSTER_ID:
            self.outputs.append(Refused(f"node {source} refuses this node's Fetch: this node's cluster id "
                                        f"{self.config.cluster_id!r} is not that node's (INCONSISTENT_CLUSTER_ID)"))
        part = rpc.only_partition(response.responses, "topic")
        handled = self._leader_answer(response.error_code, part, now)
        if handled is not None:
            return handled
        assert part is not None  # a missing one was refused
        state = self.state
        if not isinstance(state, Follower) or state.election.leader_id != source:
            return True
        if part.error_code != Error.NONE:
            return False
        if part.diverging_epoch.epoch >= 0:
            self._truncate_diverging(part.diverging_epoch.epoch, part.diverging_epoch.end_offset)
        elif part.snapshot_id.epoch >= 0 or part.snapshot_id.end_offset >= 0:
            if part.snapshot_id.epoch < 0 or part.snapshot_id.end_offset < 0:
                return False
            # The leader's log starts after this one ends: fetch its snapshot first.
            state.download = SnapshotDownload(OffsetAndEpoch(part.snapshot_id.end_offset, part.snapshot_id.epoch))
        else:
            batches = split_batches(part.records)
            if batches and not self._append_fetched(batches):
                return False
            if part.high_watermark >= 0:
                # The leader found this log matching its own up to the fetch offset and sent
                # what follows, so its high watermark holds here as far as this log reaches.
                # Not after a truncation: what is left may still differ from the leader's.
                offset = min(part.high_watermark, self.log.end_offset)
                if offset > self.high_watermark:
                    self._advance_high_watermark(offset)
        state.has_fetched = True
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        return True

    def _leader_answer(self, error_code: int, part: Any | None, now: int) -> bool | None:
        """A Fetch or FetchSnapshot answer's one partition through what every quorum response
        says of epochs and leaders: True or False when that settles it (False: back off), None
        when its handler goes on."""
        if error_code != Error.NONE or part is None:
            return False
        leader = part.current_leader
        return self._common_response(part.error_code, leader.leader_id, leader.leader_epoch, now)

    def _truncate_diverging(self, epoch: int, end_offset: int) -> None:
        offset = truncation_offset(self.log, epoch, end_offset)
        if offset < self.high_watermark:
            raise RuntimeError(f"node {self.node_id}: the leader asks to truncate to {offset}, "
                               f"below the high watermark {self.high_watermark}")
        self.log.truncate_to(offset)
        self.history.truncate(offset)

    def _append_fetched(self, batches: list[bytes]) -> bool:
        first = read_batch_header(batches[0])
        if first.base_offset != self.log.end_offset:
            return False  # not where this log stands: an answer to an older question
        for raw in batches:
            if read_batch_header(raw).partition_leader_epoch > self.epoch:
                return False
        self.append(batches)
        self._flush()
        return True

    def _on_fetch_snapshot_response(self, source: int, response: FetchSnapshotResponse, now: int) -> bool:
        part = rpc.only_partition(response.topics, "name")
        handled = self._leader_answer(response.error_code, part, now)
        if handled is not None:
            return handled
        assert part is not None  # a missing one was refused
        state = self.state
        if not isinstance(state, Follower) or state.election.leader_id != source or state.download is None:
            return True
        download = state.download
        if part.error_code == Error.SNAPSHOT_NOT_FOUND:
            # The leader took a newer snapshot meanwhile: fetch again to be sent to it.
            state.download = None
        elif part.error_code != Error.NONE:
            return False
        elif OffsetAndEpoch(part.snapshot_id.end_offset, part.snapshot_id.epoch) != download.snapshot \
                or part.position != len(download.data):
            return False
        else:
            download.data += part.unaligned_records
            if len(download.data) >= part.size:
                self._install_snapshot(state, download)
        state.has_fetched = True
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        return True

    def _install_snapshot(self, state: Follower, download: SnapshotDownload) -> None:
        end_offset, epoch = download.snapshot
        if end_offset < self.high_watermark:
            raise RuntimeError(f"node {self.node_id}: snapshot ending at {end_offset} is below "
                               f"the high watermark {self.high_watermark}")
        self.log.install_snapshot(download.snapshot, bytes(download.data))
        self.history.restart(snapshot_quorum_messages(bytes(download.data)))
        state.download = None
        self.outputs.append(SnapshotInstalled(end_offset, epoch))
        # A snapshot holds committed records only.
        if end_offset > self.high_watermark:
            self._advance_high_watermark(end_offset)
