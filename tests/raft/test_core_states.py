"""State transitions of one Raft core, input by input (the scenarios of Kafka's QuorumStateTest
and KafkaRaftClientTest that apply here)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.generated.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.generated.messages.fetch_request import FetchRequest
from protocol.generated.messages.fetch_response import SnapshotId as FetchSnapshotId
from protocol.generated.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.generated.messages.vote_request import VoteRequest
from protocol.generated.messages.vote_response import VoteResponse
from protocol.records import decode_batch
from server.raft.types import OffsetAndEpoch, ReplicaKey
from server.raft import messages as rpc
from server.raft.core import NotLeader, RaftCore
from tests.support.raft_log import InMemoryLog
from server.raft.outputs import (
    AppendFailed, SendRequest, BecameLeader, Committed, LostLeadership, PersistElection, SendResponse,
    SnapshotInstalled)
from server.raft.quorum_config import QuorumConfig
from server.raft.state import (
    Candidate, Election, Follower, Leader, Prospective, ReplicaProgress, Resigned, Tally, Unattached)
from tests.raft.helpers import (
    CLUSTER, CONFIG, answer, batch, elect, fetch, grant_votes, log_with, new_core, of_type, partition_of, sent, vote)
from tests.support.raft_writes import propose


# --- starting from the quorum-state file --------------------------------------------------------

def test_a_fresh_node_is_unattached_in_epoch_0_and_persists_it() -> None:
    core = new_core()
    assert isinstance(core.state, Unattached) and core.epoch == 0
    assert of_type(core.take_outputs(), PersistElection) == [PersistElection(Election(0))]


def test_a_restarted_leader_comes_back_resigned_and_leaves_the_epoch_after_a_timeout() -> None:
    core = new_core(persisted=Election(4, leader_id=1, voted_id=1), log=log_with(4))
    assert isinstance(core.state, Resigned) and core.epoch == 4
    assert {r.destination for r in sent(core.take_outputs(), EndQuorumEpochRequest)} == {2, 3}
    # After the timeout it asks for pre-votes without raising the epoch (Kafka 4.0's resigned
    # leader): only the election that can win raises it, so a restart costs one epoch.
    core.tick(2_000)
    assert isinstance(core.state, Prospective) and core.epoch == 4
    pre_votes = sent(core.take_outputs(), VoteRequest)
    assert {r.destination for r in pre_votes} == {2, 3}
    for request in pre_votes:
        core.receive_response(request.destination, request.correlation_id,
                              rpc.vote_response(Error.NONE, 4, -1, False), 2_010)
    # Refused: it waits again as the resigned leader of epoch 4, never following itself.
    assert isinstance(core.state, Resigned) and core.epoch == 4 and core.leader_id == 1
    core.tick(10_000)
    pre_votes = sent(core.take_outputs(), VoteRequest)
    for request in pre_votes:
        core.receive_response(request.destination, request.correlation_id,
                              rpc.vote_response(Error.NONE, 4, -1, True), 10_010)
    assert isinstance(core.state, Candidate) and core.epoch == 5


def test_a_restarted_candidate_stays_a_candidate_of_its_epoch() -> None:
    core = new_core(persisted=Election(3, voted_id=1))
    assert isinstance(core.state, Candidate) and core.epoch == 3
    assert {r.destination for r in sent(core.take_outputs(), VoteRequest)} == {2, 3}


def test_a_restarted_follower_follows_its_leader_and_fetches() -> None:
    core = new_core(persisted=Election(3, leader_id=2))
    assert isinstance(core.state, Follower) and core.leader_id == 2
    [request] = sent(core.take_outputs(), FetchRequest)
    assert request.destination == 2


def test_a_log_ahead_of_the_quorum_state_file_wins_without_a_vote() -> None:
    core = new_core(persisted=Election(2, voted_id=3), log=log_with(1, 5))
    assert isinstance(core.state, Unattached) and core.state.election == Election(5)


def test_a_node_outside_the_voters_is_an_observer_that_never_stands() -> None:
    core = new_core(node_id=9)
    assert not core.is_voter
    for now in range(0, 20_000, 500):
        core.tick(now)
        assert isinstance(core.state, Unattached) and core.epoch == 0
    sent = [o for o in core.take_outputs() if isinstance(o, SendRequest)]
    # It only asks the voters, one at a time, which of them leads; it never asks for votes.
    assert sent and all(isinstance(o.message, FetchRequest) for o in sent)
    assert {o.destination for o in sent} <= {1, 2, 3}


# --- elections ------------------------------------------------------------------------------------

def test_election_timeout_starts_a_pre_vote_without_raising_or_persisting_the_epoch() -> None:
    core = new_core()
    core.take_outputs()
    core.tick(999)
    assert isinstance(core.state, Unattached)
    core.tick(2_000)
    outputs = core.take_outputs()
    assert isinstance(core.state, Prospective) and core.epoch == 0
    assert not of_type(outputs, PersistElection)
    requests = sent(outputs, VoteRequest)
    assert {r.destination for r in requests} == {2, 3} and all(partition_of(r.message).pre_vote for r in requests)
    part = partition_of(requests[0].message)
    assert part.candidate_epoch == 0 and part.candidate_id == 1


def test_winning_the_pre_vote_makes_a_candidate_that_persists_its_vote_before_asking() -> None:
    core = new_core()
    core.tick(2_000)
    grant_votes(core, sent(core.take_outputs(), VoteRequest)[:1], 2_000)
    outputs = core.take_outputs()
    assert isinstance(core.state, Candidate) and core.epoch == 1
    assert isinstance(outputs[0], PersistElection) and outputs[0].election == Election(1, voted_id=1)
    requests = sent(outputs, VoteRequest)
    assert {r.destination for r in requests} == {2, 3} and not any(partition_of(r.message).pre_vote for r in requests)


def test_losing_the_pre_vote_returns_to_the_known_leader_in_the_same_epoch() -> None:
    core = new_core(persisted=Election(3, leader_id=2))
    core.tick(2_000)  # no fetch answered: the fetch timeout passes
    assert isinstance(core.state, Prospective)
    grant_votes(core, sent(core.take_outputs(), VoteRequest), 2_000, granted=False)
    assert isinstance(core.state, Follower) and core.epoch == 3 and core.leader_id == 2


def test_a_candidate_that_times_out_goes_back_to_pre_voting() -> None:
    core = new_core(persisted=Election(3, voted_id=1))
    core.tick(2_000)
    assert isinstance(core.state, Prospective) and core.epoch == 3


def test_winning_the_vote_makes_a_leader_that_writes_leader_change_first() -> None:
    core = new_core(log=log_with(1, 1))
    elect(core)
    assert core.state.election == Election(2, leader_id=1, voted_id=1)
    assert isinstance(core.state, Leader) and core.state.epoch_start_offset == 2
    leader_change, _ = decode_batch(core.log.read(2, 1 << 20))
    assert leader_change.is_control and leader_change.partition_leader_epoch == 2
    assert {r.destination for r in sent(core.take_outputs(), BeginQuorumEpochRequest)} == {2, 3}


def test_a_single_voter_elects_itself_and_commits_alone() -> None:
    core = new_core(config=QuorumConfig(voters=(1,), cluster_id=CLUSTER))
    core.tick(2_000)
    assert core.is_leader
    assert of_type(core.take_outputs(), BecameLeader) == [BecameLeader(1, 0)]
    last = propose(core, [b"a", b"b"], 2_100)
    core.tick(2_200)
    assert of_type(core.take_outputs(), Committed) == [Committed(last)]


@pytest.mark.parametrize("persisted", [None, Election(4, leader_id=1, voted_id=1), Election(4, voted_id=1)])
def test_a_single_voter_stands_at_its_first_tick_above_every_epoch_it_saw(persisted: Election | None) -> None:
    core = new_core(persisted=persisted, log=log_with(1, 2), config=QuorumConfig(voters=(1,), cluster_id=CLUSTER),
                    now=50)
    assert core.is_leader and core.epoch == (persisted.epoch if persisted else 2) + 1
    core.tick(50)
    assert of_type(core.take_outputs(), BecameLeader) == [BecameLeader(core.epoch, 2)]


def refuse_appends(log: InMemoryLog) -> None:
    def append(batches: list[bytes]) -> None:
        raise OSError(28, "No space left on device")
    log.append = append  # type: ignore[method-assign]


def test_a_single_voter_whose_log_refuses_a_write_resigns_and_stands_again_after_its_election_timeout() -> None:
    log = InMemoryLog()
    core = new_core(config=QuorumConfig(voters=(1,), cluster_id=CLUSTER), log=log)
    refuse_appends(log)
    propose(core, [b"x"], 10)
    assert isinstance(core.state, Resigned) and core.epoch == 1
    outputs = core.take_outputs()
    assert of_type(outputs, LostLeadership) == [LostLeadership(1)]
    [failed] = of_type(outputs, AppendFailed)
    assert "No space left on device" in failed.reason
    log.append = InMemoryLog.append.__get__(log)  # type: ignore[method-assign]
    core.tick(core.next_deadline())
    assert core.is_leader and core.epoch == 2


def test_the_leader_change_batch_carries_the_wall_clock() -> None:
    core = RaftCore(1, QuorumConfig(voters=(1,), cluster_id=CLUSTER), InMemoryLog(), None, random.Random(1), 7,
                    wall_time=lambda now: 1_700_000_000_000 + now)
    core.tick(7)
    leader_change, _ = decode_batch(core.log.read(0, 1 << 20))
    assert leader_change.base_timestamp == leader_change.max_timestamp == 1_700_000_000_007


def test_a_candidate_that_lost_the_vote_stands_again_after_a_short_random_backoff() -> None:
    config = QuorumConfig(voters=(1, 2, 3, 4, 5), cluster_id=CLUSTER, election_timeout_ms=1000,
                          retry_backoff_ms=20, election_backoff_max_ms=1000)
    core = new_core(persisted=Election(3, voted_id=1), config=config)
    assert isinstance(core.state, Candidate)
    deadline = core.state.election_deadline
    grant_votes(core, sent(core.take_outputs(), VoteRequest)[:3], 10, granted=False)
    assert isinstance(core.state, Candidate) and core.state.tally.lost
    assert core.state.election_deadline < 10 + 20 <= deadline  # the first backoff is below retry.backoff
    core.tick(core.next_deadline())
    assert isinstance(core.state, Prospective)


# --- granting votes ---------------------------------------------------------------------------------

def test_a_vote_is_persisted_before_it_is_granted_and_given_once_per_epoch() -> None:
    core = new_core()
    core.take_outputs()
    core.receive_request(2, 7, rpc.vote_request(CLUSTER, 1, 2, 1, 0, 0), 10)
    outputs = core.take_outputs()
    persist = outputs.index(PersistElection(Election(1, voted_id=2)))
    response = next(i for i, o in enumerate(outputs) if isinstance(o, SendResponse))
    assert persist < response and answer(outputs).vote_granted
    assert not vote(core, 3, 1).vote_granted
    assert vote(core, 2, 1).vote_granted  # the same candidate asking again


def test_a_vote_survives_a_restart() -> None:
    first = new_core()
    vote(first, 2, 1)
    persisted = of_type(first.take_outputs(), PersistElection)
    restarted = new_core(persisted=first.state.election)
    assert not persisted and not vote(restarted, 3, 1).vote_granted


@pytest.mark.parametrize("last_epoch, last_offset", [(1, 1), (2, 0)])
def test_a_candidate_whose_log_is_behind_gets_no_vote(last_epoch: int, last_offset: int) -> None:
    core = new_core(log=log_with(1, 2))  # ends at offset 2 in epoch 2
    part = vote(core, 2, 3, last_epoch, last_offset)
    assert part.error_code == Error.NONE and not part.vote_granted
    assert core.epoch == 3 and core.state.election.voted_id == -1


def test_a_vote_from_an_older_epoch_is_fenced() -> None:
    core = new_core(persisted=Election(5))
    part = vote(core, 2, 4)
    assert part.error_code == Error.FENCED_LEADER_EPOCH and part.leader_epoch == 5


def test_a_candidate_must_have_raised_its_epoch_past_its_log() -> None:
    core = new_core()
    assert vote(core, 2, 3, last_epoch=3, last_offset=4).error_code == Error.INVALID_REQUEST
    assert vote(core, 2, 3, last_epoch=3, last_offset=4, pre_vote=True).error_code == Error.NONE


def test_a_pre_vote_leaves_no_vote_behind() -> None:
    core = new_core(persisted=Election(2))
    core.take_outputs()
    assert vote(core, 2, 2, pre_vote=True).vote_granted
    assert core.state.election == Election(2)
    assert vote(core, 3, 3).vote_granted  # free to vote for real


def test_a_follower_hearing_from_its_leader_refuses_pre_votes_and_votes() -> None:
    core = new_core(persisted=Election(2, leader_id=2))
    [request] = sent(core.take_outputs(), FetchRequest)
    assert vote(core, 3, 2, pre_vote=True).vote_granted  # has not fetched yet
    core.receive_response(2, request.correlation_id,
                          rpc.fetch_response(Error.NONE, 2, 2, 0, 0), 10)
    core.take_outputs()
    refused = vote(core, 3, 2, pre_vote=True, now=20)
    assert not refused.vote_granted and refused.leader_id == 2
    assert not vote(core, 3, 2, now=20).vote_granted


def test_a_higher_epoch_vote_deposes_the_leader() -> None:
    core = new_core()
    elect(core)
    core.take_outputs()
    core.receive_request(2, 8, rpc.vote_request(CLUSTER, 9, 2, 1, 8, 100), 6_000)
    outputs = core.take_outputs()
    assert LostLeadership(1) in outputs
    assert isinstance(core.state, Unattached) and core.state.election == Election(9, voted_id=2)


def test_duplicate_or_unasked_vote_responses_do_not_count() -> None:
    config = QuorumConfig(voters=(1, 2, 3, 4, 5), cluster_id=CLUSTER)
    core = new_core(config=config)
    core.tick(3_000)
    [first, *_] = sent(core.take_outputs(), VoteRequest)
    granted = rpc.vote_response(Error.NONE, 0, -1, True)
    core.receive_response(first.destination, first.correlation_id, granted, 3_000)
    core.receive_response(first.destination, first.correlation_id, granted, 3_000)
    core.receive_response(4, 12345, granted, 3_000)
    assert isinstance(core.state, Prospective) and core.state.tally.granted == {1, first.destination}


# --- BeginQuorumEpoch and EndQuorumEpoch ------------------------------------------------------------

def test_begin_quorum_epoch_makes_a_follower_of_the_new_leader() -> None:
    core = new_core()
    core.receive_request(3, 5, rpc.begin_epoch_request(CLUSTER, 4, 3, 1), 10)
    outputs = core.take_outputs()
    assert answer(outputs).error_code == Error.NONE
    assert isinstance(core.state, Follower) and core.state.election == Election(4, leader_id=3)
    assert [r.destination for r in sent(outputs, FetchRequest)] == [3]


def test_begin_quorum_epoch_of_an_older_epoch_is_fenced() -> None:
    core = new_core(persisted=Election(6))
    core.receive_request(3, 5, rpc.begin_epoch_request(CLUSTER, 4, 3, 1), 10)
    assert answer(core.take_outputs()).error_code == Error.FENCED_LEADER_EPOCH
    assert core.epoch == 6


@pytest.mark.parametrize("successors, wait", [([1, 3], 0), ([3, 1], 500), ([2, 3, 1], 500), ([], 0), ([3], 1000)])
def test_end_quorum_epoch_orders_the_successors(successors: list[int], wait: int) -> None:
    core = new_core(persisted=Election(2, leader_id=2))
    core.receive_request(2, 5, rpc.end_epoch_request(CLUSTER, 2, 2, successors), 100)
    core.take_outputs()
    core.tick(100 + wait - 1 if wait else 100)
    assert isinstance(core.state, Follower) == bool(wait)
    core.tick(100 + wait)
    assert isinstance(core.state, Prospective)


# --- the leader: Fetch, high watermark, check quorum ---------------------------------------------

def test_the_high_watermark_waits_for_a_majority_and_for_the_epochs_own_batch() -> None:
    core = new_core(log=log_with(1, 1))
    now = elect(core)
    core.tick(now + 100)  # the leader has flushed its LeaderChange
    outputs = fetch(core, 2, 2, 1, now + 100)
    part = answer(outputs)
    assert part.high_watermark == -1 and decode_batch(part.records)[0].is_control
    assert not of_type(outputs, Committed)
    outputs = fetch(core, 2, 3, 2, now + 200)
    assert of_type(outputs, Committed) == [Committed(2)]
    assert of_type(outputs, BecameLeader) == [BecameLeader(2, 2)]
    assert answer(outputs).high_watermark == 3


def test_a_fetch_from_a_diverging_log_is_told_where_to_truncate() -> None:
    core = new_core(log=log_with(1, 1, 3))
    elect(core)
    part = answer(fetch(core, 2, 4, 2, 5_000))  # offsets 2-3 in epoch 2, which this log never had
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (1, 2)
    assert part.records == b""
    part = answer(fetch(core, 2, 5, 3, 5_000))  # further than epoch 3 reaches here
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (3, 3)


@pytest.mark.parametrize("epoch, error", [(0, Error.FENCED_LEADER_EPOCH), (2, Error.UNKNOWN_LEADER_EPOCH)])
def test_fetches_for_other_epochs_are_refused(epoch: int, error: int) -> None:
    core = new_core()
    elect(core)
    assert answer(fetch(core, 2, 0, 0, 5_000, epoch=epoch)).error_code == error


def test_a_non_leader_refuses_fetches() -> None:
    core = new_core(persisted=Election(2, leader_id=2))
    part = answer(fetch(core, 3, 0, 0, 10))
    assert part.error_code == Error.NOT_LEADER_OR_FOLLOWER and part.current_leader.leader_id == 2


def test_an_empty_fetch_waits_for_new_records() -> None:
    core = new_core()
    now = elect(core)
    core.tick(now + 50)
    assert not of_type(fetch(core, 2, 1, 1, now + 50, max_wait_ms=500), SendResponse)
    propose(core, [b"x"], now + 60)
    part = answer(core.take_outputs())
    assert decode_batch(part.records)[0].records[0].value == b"x"


def test_a_parked_fetch_is_answered_at_its_max_wait_or_when_leadership_ends() -> None:
    core = new_core()
    now = elect(core)
    core.tick(now + 50)
    fetch(core, 2, 1, 1, now + 50, max_wait_ms=500)
    core.tick(now + 549)
    assert not of_type(core.take_outputs(), SendResponse)
    core.tick(now + 550)
    assert answer(core.take_outputs()).error_code == Error.NONE
    fetch(core, 2, 1, 1, now + 600, max_wait_ms=500, correlation_id=51)
    core.receive_request(3, 9, rpc.vote_request(CLUSTER, 7, 3, 1, 6, 50), now + 610)
    responses = of_type(core.take_outputs(), SendResponse)
    assert responses[0].correlation_id == 51
    assert partition_of(responses[0].message).error_code == Error.NOT_LEADER_OR_FOLLOWER


def test_a_leader_no_majority_fetches_from_resigns() -> None:
    core = new_core()
    now = elect(core)
    fetch(core, 2, 1, 1, now + 2_000)
    core.tick(now + 4_999)
    assert core.is_leader
    core.tick(now + 5_000)
    outputs = core.take_outputs()
    assert isinstance(core.state, Resigned) and LostLeadership(1) in outputs
    assert {r.destination for r in sent(outputs, EndQuorumEpochRequest)} == {2, 3}
    assert core.state.successors == [2, 3]  # 2 fetched furthest


def test_proposals_go_to_the_leader_only() -> None:
    with pytest.raises(NotLeader):
        propose(new_core(), [b"x"], 0)


def test_shutdown_resigns_and_completes_once_another_leader_is_known() -> None:
    core = new_core()
    now = elect(core)
    core.begin_shutdown(now + 10)
    assert isinstance(core.state, Resigned) and not core.shutdown_complete
    [end] = sent(core.take_outputs(), EndQuorumEpochRequest)[:1]
    core.receive_response(end.destination, end.correlation_id, rpc.end_epoch_response(Error.NONE, 2, 3), now + 20)
    assert core.shutdown_complete and core.leader_id == 3


# --- the follower ----------------------------------------------------------------------------------

def _follower_fetching(log_epochs: tuple[int, ...], epoch: int = 5) -> tuple:
    core = new_core(persisted=Election(epoch, leader_id=2), log=log_with(*log_epochs))
    [request] = sent(core.take_outputs(), FetchRequest)
    return core, request


def test_a_follower_appends_what_it_fetched_and_takes_the_high_watermark_its_log_reaches() -> None:
    core, request = _follower_fetching((1,))
    records = batch(1, 3) + batch(2, 5, count=2)
    core.receive_response(2, request.correlation_id, rpc.fetch_response(Error.NONE, 5, 2, 10, 0, records), 10)
    assert core.log.end_offset == 4 and core.log.flushed_offset == 4
    outputs = core.take_outputs()
    assert of_type(outputs, Committed) == [Committed(3)]
    [next_fetch] = sent(outputs, FetchRequest)
    part = partition_of(next_fetch.message)
    assert (part.fetch_offset, part.last_fetched_epoch) == (4, 5)


def test_a_follower_truncates_where_the_leader_says_its_log_diverged() -> None:
    core, request = _follower_fetching((1, 1, 2, 2))
    core.receive_response(2, request.correlation_id,
                          rpc.fetch_response(Error.NONE, 5, 2, -1, 0, diverging=OffsetAndEpoch(3, 2)), 10)
    assert core.log.end_offset == 3
    [again] = sent(core.take_outputs(), FetchRequest)
    assert partition_of(again.message).fetch_offset == 3


def test_a_follower_never_truncates_below_its_high_watermark() -> None:
    core, request = _follower_fetching((1, 1, 2, 2))
    core.receive_response(2, request.correlation_id, rpc.fetch_response(Error.NONE, 5, 2, 4, 0), 10)
    [again] = sent(core.take_outputs(), FetchRequest)
    with pytest.raises(RuntimeError):
        core.receive_response(2, again.correlation_id,
                              rpc.fetch_response(Error.NONE, 5, 2, 4, 0, diverging=OffsetAndEpoch(2, 1)), 20)


def test_a_fetch_response_of_a_newer_epoch_is_followed_and_its_records_left() -> None:
    core, request = _follower_fetching((1,))
    core.receive_response(2, request.correlation_id,
                          rpc.fetch_response(Error.FENCED_LEADER_EPOCH, 7, 3, 5, 0, batch(1, 7)), 10)
    assert core.state.election == Election(7, leader_id=3) and core.log.end_offset == 1


def test_a_follower_without_answers_starts_a_pre_vote_after_the_fetch_timeout() -> None:
    core, _ = _follower_fetching((1,))
    core.tick(1_999)
    assert isinstance(core.state, Follower)
    core.tick(2_000)
    assert isinstance(core.state, Prospective) and core.epoch == 5


def test_a_leader_whose_log_refuses_a_write_hands_over_like_at_shutdown() -> None:
    log = InMemoryLog()
    core = new_core(log=log)
    now = elect(core)
    refuse_appends(log)
    propose(core, [b"x"], now + 10)
    assert isinstance(core.state, Resigned) and not core.shutting_down
    core.tick(now + 3_000)
    assert isinstance(core.state, Prospective) and core.epoch == 1  # the next epoch only by election


def test_a_failed_request_is_retried_after_the_backoff() -> None:
    core = new_core(persisted=Election(2, leader_id=2))
    [request] = sent(core.take_outputs(), FetchRequest)
    core.request_failed(request.correlation_id, 10)
    assert not sent(core.take_outputs(), FetchRequest)
    core.tick(10 + CONFIG.retry_backoff_ms)
    [retry] = sent(core.take_outputs(), FetchRequest)
    assert retry.correlation_id != request.correlation_id


def _leader_after_snapshot() -> RaftCore:
    log = InMemoryLog(snapshot=(10, 3))
    log.append([batch(10, 4), batch(11, 4)])
    log.flush()
    core = new_core(persisted=Election(4), log=log)
    elect(core)
    return core


@pytest.mark.parametrize("offset, last_epoch", [(4, 2), (10, 2), (12, 2)])
def test_a_fetcher_behind_the_log_start_is_sent_to_the_snapshot(offset: int, last_epoch: int) -> None:
    part = answer(fetch(_leader_after_snapshot(), 2, offset, last_epoch, 5_000))
    assert (part.snapshot_id.end_offset, part.snapshot_id.epoch) == (10, 3) and part.records == b""


@pytest.mark.parametrize("offset, last_epoch", [(10, 3), (11, 4)])
def test_a_fetcher_from_the_snapshot_on_reads_the_log(offset: int, last_epoch: int) -> None:
    part = answer(fetch(_leader_after_snapshot(), 2, offset, last_epoch, 5_000))
    assert part.snapshot_id.epoch == -1 and part.diverging_epoch.epoch == -1
    assert decode_batch(part.records)[0].base_offset == offset


def test_a_follower_behind_the_leader_fetches_its_snapshot_in_chunks() -> None:
    core, request = _follower_fetching((1,))
    redirect = rpc.fetch_response(Error.NONE, 5, 2, 20, 10)
    partition_of(redirect).snapshot_id = FetchSnapshotId(end_offset=10, epoch=3)
    core.receive_response(2, request.correlation_id, redirect, 10)
    [first] = sent(core.take_outputs(), FetchSnapshotRequest)
    assert partition_of(first.message).position == 0
    snapshot = b"0123456789"
    core.receive_response(2, first.correlation_id,
                          rpc.fetch_snapshot_response(Error.NONE, 5, 2, OffsetAndEpoch(10, 3), 10, 0, snapshot[:6]), 20)
    [second] = sent(core.take_outputs(), FetchSnapshotRequest)
    assert partition_of(second.message).position == 6
    core.receive_response(2, second.correlation_id,
                          rpc.fetch_snapshot_response(Error.NONE, 5, 2, OffsetAndEpoch(10, 3), 10, 6, snapshot[6:]), 30)
    outputs = core.take_outputs()
    assert core.log.latest_snapshot == (10, 3) and core.log.start_offset == core.log.end_offset == 10
    assert core.log.read_snapshot(OffsetAndEpoch(10, 3), 0, 100) == (snapshot, 10)
    assert of_type(outputs, SnapshotInstalled) == [SnapshotInstalled(10, 3)]
    assert of_type(outputs, Committed) == [Committed(9)]
    [after] = sent(outputs, FetchRequest)
    assert (partition_of(after.message).fetch_offset, partition_of(after.message).last_fetched_epoch) == (10, 3)


def test_the_leader_serves_its_snapshot_by_position() -> None:
    log = log_with(1, 1, 2, 2)
    log.take_snapshot(3)
    core = new_core(persisted=Election(2), log=log)
    elect(core)

    def ask(position: int, snapshot: OffsetAndEpoch = OffsetAndEpoch(3, 2)) -> Any:
        core.receive_request(2, 60, rpc.fetch_snapshot_request(CLUSTER, 2, core.epoch, snapshot, position, 40),
                             6_000)
        return answer(core.take_outputs())

    whole = log.read_snapshot(OffsetAndEpoch(3, 2), 0, 1 << 20)
    assert whole is not None
    data, size = whole
    part = ask(0)
    assert part.error_code == Error.NONE and part.size == size and part.unaligned_records == data[:40]
    assert ask(40).unaligned_records == data[40:80]
    assert ask(size).error_code == Error.POSITION_OUT_OF_RANGE
    assert ask(0, OffsetAndEpoch(2, 1)).error_code == Error.SNAPSHOT_NOT_FOUND


def test_the_leader_reports_what_each_replica_fetched() -> None:
    core = new_core()
    now = elect(core)
    fetch(core, 2, 0, 0, now + 10)
    fetch(core, 7, 1, 1, now + 20)  # an observer (a broker) at the log end
    progress = core.replica_progress(now + 30)
    assert progress[2] == ReplicaProgress(0, now + 10, -1)
    assert progress[7] == ReplicaProgress(1, now + 20, now + 20)
    assert progress[1] == ReplicaProgress(1, now + 30, now + 30) and 3 not in progress
    with pytest.raises(NotLeader):
        new_core().replica_progress(0)


def test_a_truncated_follower_takes_no_high_watermark_until_its_log_is_confirmed() -> None:
    # Offsets 1-2 of epoch 2 here; the leader has epoch 3 there and ends epoch 3 at offset 3.
    # Truncating to 3 leaves the epoch-2 records, which the next fetch will find diverging.
    core, request = _follower_fetching((1, 2, 2, 4))
    core.receive_response(2, request.correlation_id,
                          rpc.fetch_response(Error.NONE, 5, 2, 10, 0, diverging=OffsetAndEpoch(3, 3)), 10)
    outputs = core.take_outputs()
    assert core.log.end_offset == 3 and core.high_watermark == 0 and not of_type(outputs, Committed)


def test_a_restarted_candidate_that_had_learnt_the_leader_follows_it() -> None:
    core = new_core(persisted=Election(3, leader_id=2, voted_id=1))
    assert isinstance(core.state, Follower) and core.state.election == Election(3, leader_id=2, voted_id=1)
    assert not vote(core, 3, 3).vote_granted


def test_a_voter_without_pre_vote_makes_the_prospective_stand_at_once() -> None:
    core = new_core()
    core.tick(2_000)
    [first, *_] = sent(core.take_outputs(), VoteRequest)
    core.receive_response(first.destination, first.correlation_id,
                          VoteResponse(error_code=Error.UNSUPPORTED_VERSION), 2_000)
    assert isinstance(core.state, Candidate) and core.epoch == 1


def test_each_epoch_state_answers_whether_it_may_grant_a_vote() -> None:
    """Kafka's EpochState.canGrantVote, state by state: a pre-vote asks about the log alone
    (except to a follower hearing from its leader), a vote goes once an epoch, and a leader
    or a resigned leader grants nothing."""
    a, b = ReplicaKey(1, b"\x01" * 16), ReplicaKey(2, b"\x02" * 16)
    fresh = Unattached(Election(3), 0)
    assert fresh.can_grant_vote(a, True, pre_vote=False)
    assert not fresh.can_grant_vote(a, False, pre_vote=False)
    voted = Unattached(Election(3, voted_id=1, voted_directory_id=a.directory_id), 0)
    assert voted.can_grant_vote(a, False, pre_vote=False)  # the same vote again
    assert not voted.can_grant_vote(b, True, pre_vote=False)
    assert voted.can_grant_vote(b, True, pre_vote=True)
    with_leader = Unattached(Election(3, leader_id=2), 0)
    assert not with_leader.can_grant_vote(a, True, pre_vote=False)
    follower = Follower(Election(3, leader_id=2), 0)
    assert follower.can_grant_vote(a, True, pre_vote=True)
    follower.has_fetched = True
    assert not follower.can_grant_vote(a, True, pre_vote=True)
    assert not follower.can_grant_vote(a, True, pre_vote=False)
    candidate = Candidate(Election(3, voted_id=0), 0, Tally(frozenset({0, 1, 2})))
    assert candidate.can_grant_vote(a, True, pre_vote=True)
    assert not candidate.can_grant_vote(a, True, pre_vote=False)
    leader = Leader(Election(3, leader_id=0), 0, frozenset({0}), 0, 0)
    resigned = Resigned(Election(3, leader_id=0), 0, set(), [])
    for state in (leader, resigned):
        assert not state.can_grant_vote(a, True, pre_vote=True)
        assert not state.can_grant_vote(a, True, pre_vote=False)
