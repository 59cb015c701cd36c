"""The vote names a replica, not just an id (KIP-853): a voter whose disk was replaced comes
back under its id with a new directory, and is not the replica that got this epoch's vote. As
Kafka's UnattachedState grants: a vote recorded without a directory matches any directory."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from protocol.generated.messages.vote_request import VoteRequest
from protocol.primitives import ZERO_UUID
from server.metalog.quorum_state import QuorumState, read_quorum_state, write_quorum_state
from server.metalog.segments import PARTITION_DIR
from server.raft import messages as rpc
from server.raft.outputs import PersistElection
from server.raft.state import Election
from server.raft.types import ReplicaKey
from tests.raft.helpers import CLUSTER, CONFIG, answer, grant_votes, new_core, of_type, sent

OLD_DISK = bytes(range(16))
NEW_DISK = bytes(range(16, 32))


def ask(core, candidate: ReplicaKey, epoch: int = 1) -> bool:
    core.receive_request(candidate.id, 7, rpc.vote_request(CLUSTER, epoch, candidate, core.node_id, 0, 0), 10)
    return bool(answer(core.take_outputs()).vote_granted)


def test_the_vote_is_persisted_with_the_candidates_directory() -> None:
    core = new_core()
    core.take_outputs()
    core.receive_request(2, 7, rpc.vote_request(CLUSTER, 1, ReplicaKey(2, OLD_DISK), 1, 0, 0), 10)
    # The epoch is raised (persisted without a vote) before the vote is persisted.
    persisted = of_type(core.take_outputs(), PersistElection)
    assert persisted[-1].election == Election(1, voted_id=2, voted_directory_id=OLD_DISK)


def test_the_same_id_with_another_directory_gets_no_second_vote_in_the_epoch() -> None:
    core = new_core()
    core.take_outputs()
    assert ask(core, ReplicaKey(2, OLD_DISK))
    assert not ask(core, ReplicaKey(2, NEW_DISK))
    assert ask(core, ReplicaKey(2, OLD_DISK))  # the replica that got it, asking again


def test_a_vote_restored_without_a_directory_holds_for_any_directory_of_that_id() -> None:
    core = new_core(persisted=Election(1, voted_id=2))
    core.take_outputs()
    assert ask(core, ReplicaKey(2, NEW_DISK))
    assert not ask(core, ReplicaKey(3, NEW_DISK))


def test_the_vote_survives_a_restart_with_its_directory() -> None:
    first = new_core()
    first.take_outputs()
    ask(first, ReplicaKey(2, OLD_DISK))
    restarted = new_core(persisted=first.state.election)
    restarted.take_outputs()
    assert not ask(restarted, ReplicaKey(2, NEW_DISK))
    assert ask(restarted, ReplicaKey(2, OLD_DISK))


def test_a_candidate_votes_for_itself_in_its_own_directory() -> None:
    core = new_core(config=replace(CONFIG, directory_id=OLD_DISK))
    core.tick(10_000)  # past the election timeout: the pre-vote
    grant_votes(core, sent(core.take_outputs(), VoteRequest), 10_001)
    persisted = of_type(core.take_outputs(), PersistElection)
    assert persisted[-1].election == Election(1, voted_id=1, voted_directory_id=OLD_DISK)


def test_quorum_state_version_1_keeps_the_voted_directory(tmp_path: Path) -> None:
    write_quorum_state(tmp_path, QuorumState(leader_epoch=4, voted_id=2, voted_directory_id=OLD_DISK,
                                             data_version=1))
    data = json.loads((tmp_path / PARTITION_DIR / "quorum-state").read_text())
    assert data["votedDirectoryId"] == "AAECAwQFBgcICQoLDA0ODw"
    assert read_quorum_state(tmp_path).voted_directory_id == OLD_DISK


def test_quorum_state_version_0_has_no_voted_directory(tmp_path: Path) -> None:
    write_quorum_state(tmp_path, QuorumState(leader_epoch=4, voted_id=2, voters=(1, 2, 3)))
    data = json.loads((tmp_path / PARTITION_DIR / "quorum-state").read_text())
    assert "votedDirectoryId" not in data
    assert read_quorum_state(tmp_path).voted_directory_id == ZERO_UUID
