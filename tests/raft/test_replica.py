"""A standby replays what the quorum commits in slices of bounded work, and an elected one
that has caught up activates without replaying anything again."""

from __future__ import annotations

from typing import Callable

import pytest

from protocol.generated.metadata.config_record import ConfigRecord
from server.controller.lifecycle import ControllerLifecycle, Stage
from server.controller.quorum_controller import Applied
from server.controller.replica import ControllerReplica
from server.metalog.commit_path import encode_batches
from server.raft.replication import control_batch
from server.raft.voters import VoterNode, VoterSet
from server.raft.types import ReplicaKey
from tests.support.raft_log import InMemoryLog
from tests.raft.simulation import BOOTSTRAP, controller_state, new_controller

TOPICS = 2_000


def committed_log() -> InMemoryLog:
    """The bootstrap, then one config record per batch."""
    log = InMemoryLog()
    log.append(encode_batches(BOOTSTRAP, 0, 1, 0))
    for offset in range(1, TOPICS + 1):
        log.append(encode_batches([(ConfigRecord(resource_type=4, resource_name="", name=f"c.{offset}",
                                                 value=str(offset)), 0)], offset, 1, 0))
    log.flush()
    return log


def test_a_standby_replays_the_committed_log_a_slice_at_a_time() -> None:
    log = committed_log()
    replica = ControllerReplica(new_controller(1), log, "the log")
    replica.committed(TOPICS // 2)
    slices = 1
    while replica.replay_slice(max_bytes=4096):
        slices += 1
        assert replica.controller.next_offset <= TOPICS // 2 + 1  # never past what is committed
    assert replica.caught_up and replica.controller.next_offset == TOPICS // 2 + 1
    assert slices > 10  # bounded: 4 KiB at a time, not the whole log in one go

    replica.committed(TOPICS)
    while replica.replay_slice():
        pass
    whole = new_controller(2)
    other = ControllerReplica(whole, log, "the log")
    other.committed(TOPICS)
    while other.replay_slice(max_bytes=1 << 30):
        pass
    assert controller_state(replica.controller) == controller_state(whole)


def test_activating_a_caught_up_standby_replays_nothing_and_bootstraps_only_a_new_log() -> None:
    log = committed_log()
    replica = ControllerReplica(new_controller(1), log, "the log")
    replica.committed(TOPICS)
    while replica.replay_slice():
        pass
    before = replica.controller.next_offset
    assert replica.activate(lambda: BOOTSTRAP) == []  # metadata.version is there already
    assert replica.active and replica.controller.next_offset == before


def voters_record(*ids: int):
    return VoterSet.of(VoterNode(ReplicaKey(i, bytes([i]) * 16), (("CONTROLLER", "127.0.0.1", 9000 + i),), (0, 1))
                       for i in ids).to_record()


def caught_up_replica() -> tuple[InMemoryLog, ControllerReplica]:
    log = committed_log()
    replica = ControllerReplica(new_controller(1), log, "the log")
    replica.committed(TOPICS)
    while replica.replay_slice():
        pass
    return log, replica


def test_a_voter_change_the_leader_wrote_before_activation_is_in_the_state_before_the_first_write() -> None:
    log, replica = caught_up_replica()
    committed_voters = replica.controller.quorum.voter_ids
    # Elected, the Raft layer wrote a voter change past what is committed before the
    # controller activated.
    log.append([control_batch(TOPICS + 1, 1, [voters_record(1, 2)], 0)])
    replica.activate(lambda: BOOTSTRAP)
    assert replica.controller.quorum.voter_ids == [1, 2]
    assert replica.controller.next_offset == TOPICS + 2  # its first write goes after it
    replica.deactivate(TOPICS)  # never committed: undone with the leadership
    assert replica.controller.quorum.voter_ids == committed_voters != [1, 2] and replica.controller.next_offset == TOPICS + 1


def test_an_active_controller_replays_a_voter_change_where_the_leader_wrote_it() -> None:
    _, replica = caught_up_replica()
    replica.activate(lambda: BOOTSTRAP)
    replica.control_appended(TOPICS + 1, (voters_record(1, 3),))
    assert replica.controller.quorum.voter_ids == [1, 3] and replica.controller.next_offset == TOPICS + 2
    with pytest.raises(RuntimeError, match="goes on at"):
        replica.control_appended(TOPICS + 5, (voters_record(1),))


def test_a_standby_leaves_a_voter_change_to_its_replay() -> None:
    _, replica = caught_up_replica()
    replica.control_appended(TOPICS + 1, (voters_record(1, 3),))
    assert replica.controller.next_offset == TOPICS + 1


def test_the_lifecycle_activates_an_elected_replica_once_its_replay_and_any_snapshot_load_are_done() -> None:
    log = committed_log()
    queued: list[Callable[[], None]] = []
    activations: list[list[Applied]] = []
    lifecycle = ControllerLifecycle(ControllerReplica(new_controller(1), log, "the log"), queued.append,
                                    lambda: BOOTSTRAP, activations.append, slice_bytes=4096)
    lifecycle.committed(TOPICS)
    lifecycle.became_leader()
    assert lifecycle.stage is Stage.ELECTED and activations == []  # committed records are still to replay
    steps = iter([None])
    lifecycle.install(steps)  # a snapshot fetched before the election is still loading
    while queued:
        queued.pop(0)()
    assert lifecycle.stage is Stage.ELECTED and activations == []
    lifecycle.installed(lifecycle.replica.controller)
    while queued:
        queued.pop(0)()
    assert lifecycle.stage is Stage.ACTIVE and activations == [[]] and lifecycle.replica.active
    lifecycle.committed(TOPICS)  # an active controller replays nothing
    assert queued == []
    lifecycle.lost_leadership(TOPICS)
    assert lifecycle.stage is Stage.STANDBY and not lifecycle.replica.active
