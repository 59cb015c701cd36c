"""The quorum-state file KRaft keeps beside the log: the current leader epoch and vote.

It is JSON in Kafka's own shape (data_version 0), rewritten atomically on every change so a
restart never goes back to an epoch it already used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from protocol.primitives import ZERO_UUID, uuid_from_str, uuid_to_str
from server.metalog.durable import write_atomically
from server.metalog.meta_properties import StorageError
from server.metalog.segments import PARTITION_DIR

FILE_NAME = "quorum-state"


@dataclass
class QuorumState:
    leader_id: int = -1
    leader_epoch: int = 0
    voted_id: int = -1
    voted_directory_id: bytes = ZERO_UUID  # written from data_version 1 on
    voters: tuple[int, ...] = ()
    # 0: Kafka's static-quorum file, which lists the voters; 1 (kraft.version 1): the voters
    # are in the log, and the vote names a directory.
    data_version: int = 0


def read_quorum_state(log_dir: Path) -> QuorumState:
    path = Path(log_dir) / PARTITION_DIR / FILE_NAME
    if not path.exists():
        return QuorumState()
    try:
        data = json.loads(path.read_text())
        return QuorumState(leader_id=int(data.get("leaderId", -1)), leader_epoch=int(data["leaderEpoch"]),
                           voted_id=int(data.get("votedId", -1)),
                           voted_directory_id=uuid_from_str(data.get("votedDirectoryId") or uuid_to_str(ZERO_UUID)),
                           voters=tuple(int(v["voterId"]) for v in data.get("currentVoters") or []))
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"{path}: unreadable quorum state ({exc})") from None


def write_quorum_state(log_dir: Path, state: QuorumState) -> None:
    directory = Path(log_dir) / PARTITION_DIR
    directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, object]
    if state.data_version >= 1:
        data = {"leaderId": state.leader_id, "leaderEpoch": state.leader_epoch, "votedId": state.voted_id,
                "votedDirectoryId": uuid_to_str(state.voted_directory_id), "data_version": 1}
    else:
        data = {"clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.leader_epoch,
                "votedId": state.voted_id, "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in state.voters], "data_version": 0}
    write_atomically(directory / FILE_NAME, json.dumps(data).encode())
