"""ACLs, client quotas, SCRAM credentials, delegation tokens, producer ids, the migration state
and the quorum's control records: replay, undo, and the snapshot that gives the same state."""

from __future__ import annotations

import pytest

from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.generated.metadata.producer_ids_record import ProducerIdsRecord
from protocol.generated.metadata.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from protocol.generated.metadata.remove_delegation_token_record import RemoveDelegationTokenRecord
from protocol.generated.metadata.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from protocol.generated.metadata.voters_record import VotersRecord
from server.controller.quorum_controller import QuorumController
from server.metalog.snapshot_file import read_snapshot_file, write_snapshot_file
from tests.support.record_families import ACL_ID, EVERY_FAMILY, VOTERS, replayed, token


def state(qc: QuorumController) -> tuple:
    return (dict(qc.acls.acls.entries), qc.quotas.by_entity(), dict(qc.scram.credentials.entries),
            dict(qc.delegation_tokens.tokens.entries),
            (qc.producer_ids.next_producer_id, qc.producer_ids.broker_id, qc.producer_ids.broker_epoch),
            qc.quorum.zk_migration_state, qc.quorum.kraft_version, qc.quorum.voters)


def test_replay_keeps_what_stands() -> None:
    qc = replayed(EVERY_FAMILY)
    assert list(qc.acls.acls.entries) == [ACL_ID]
    assert qc.quotas.by_entity() == {(("user", "alice"),): {"producer_byte_rate": 1024.0},
                                     (("user", None),): {"consumer_byte_rate": 2048.0}}
    assert list(qc.scram.credentials.entries) == [("alice", 1)]
    assert qc.delegation_tokens.tokens.entries["t1"].expiration_timestamp == 90
    assert "t2" not in qc.delegation_tokens.tokens.entries
    assert (qc.producer_ids.next_producer_id, qc.producer_ids.broker_id) == (2000, 2)
    assert (qc.quorum.zk_migration_state, qc.quorum.kraft_version, qc.quorum.voter_ids) == (0, 1, [1])


def test_a_snapshot_file_gives_the_same_state(tmp_path) -> None:
    """Written to a snapshot file and read back: the voter set and kraft.version travel as
    control records in the header batch, the rest as metadata records."""
    qc = replayed(EVERY_FAMILY)
    path = tmp_path / "00000000000000000019-0000000001.checkpoint"
    write_snapshot_file(path, qc.snapshot_records(), epoch=1)
    records = read_snapshot_file(path)
    assert [r.NAME for r, _ in records[:2]] == ["KRaftVersionRecord", "VotersRecord"]
    assert state(replayed(r for r, _ in records)) == state(qc)


def test_every_change_is_undone() -> None:
    qc = replayed(EVERY_FAMILY[:3] + [EVERY_FAMILY[14]])
    before = state(qc)
    qc.activate()
    base = qc.next_offset
    for offset, record in enumerate(EVERY_FAMILY[3:14] + EVERY_FAMILY[15:], base):
        qc.replay(record, offset)
    assert state(qc) != before
    qc.offsets.revert_to(base)
    assert state(qc) == before


@pytest.mark.parametrize("record, what", [
    (RemoveAccessControlEntryRecord(id=ACL_ID), "ACL"),
    (RemoveUserScramCredentialRecord(name="nobody", mechanism=1), "SCRAM credential"),
    (RemoveDelegationTokenRecord(token_id="none"), "delegation token"),
])
def test_removing_what_was_never_added_is_refused(record, what: str) -> None:
    with pytest.raises(ValueError, match=f"no {what}"):
        replayed([record])


def test_a_control_message_after_the_metadata_records_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="VotersRecord is a control message"):
        write_snapshot_file(tmp_path / "x.checkpoint", [(ProducerIdsRecord(next_producer_id=1), 0), (VOTERS, 0)])
    assert list(tmp_path.iterdir()) == []
