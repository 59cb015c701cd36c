"""A standby replays what the quorum commits in slices of bounded work, and an elected one
that has caught up activates without replaying anything again."""

from __future__ import annotations

from protocol.generated.metadata.config_record import ConfigRecord
from server.controller.replica import ControllerReplica
from server.metalog.commit_path import encode_batches
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
