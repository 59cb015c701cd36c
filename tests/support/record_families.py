"""One record of every family the controller replays besides topics and brokers, and a
controller that replayed a list of them."""

from __future__ import annotations

from protocol.generated.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.generated.metadata.client_quota_record import ClientQuotaRecord, EntityData
from protocol.generated.metadata.delegation_token_record import DelegationTokenRecord
from protocol.generated.metadata.k_raft_version_record import KRaftVersionRecord
from protocol.generated.metadata.producer_ids_record import ProducerIdsRecord
from protocol.generated.metadata.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from protocol.generated.metadata.remove_delegation_token_record import RemoveDelegationTokenRecord
from protocol.generated.metadata.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from protocol.generated.metadata.user_scram_credential_record import UserScramCredentialRecord
from protocol.generated.metadata.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from protocol.generated.metadata.zk_migration_record import ZkMigrationStateRecord
from server.controller.quorum_controller import QuorumController
from tests.support.metalog import new_controller

ACL_ID = bytes(range(16))


def acl(acl_id: bytes = ACL_ID, principal: str = "User:alice") -> AccessControlEntryRecord:
    return AccessControlEntryRecord(id=acl_id, resource_type=2, resource_name="orders", pattern_type=3,
                                    principal=principal, host="*", operation=3, permission_type=3)


def quota(user: str | None, key: str, value: float, remove: bool = False) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=[EntityData(entity_type="user", entity_name=user)], key=key, value=value,
                             remove=remove)


def scram(name: str, mechanism: int = 1) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(name=name, mechanism=mechanism, salt=b"s", stored_key=b"k", server_key=b"v",
                                     iterations=4096)


def token(token_id: str, expires: int) -> DelegationTokenRecord:
    return DelegationTokenRecord(owner="User:alice", requester="User:alice", renewers=["User:bob"],
                                 issue_timestamp=1, max_timestamp=100, expiration_timestamp=expires, token_id=token_id)
VOTERS = VotersRecord(version=0, voters=[Voter(
    voter_id=1, voter_directory_id=bytes(range(16, 32)),
    endpoints=[Endpoint(name="CONTROLLER", host="127.0.0.1", port=9093)],
    k_raft_version_feature=KRaftVersionFeature(min_supported_version=0, max_supported_version=1))])
EVERY_FAMILY = [
    acl(), acl(bytes(range(1, 17)), "User:bob"), RemoveAccessControlEntryRecord(id=bytes(range(1, 17))),
    quota("alice", "producer_byte_rate", 1024.0), quota(None, "consumer_byte_rate", 2048.0),
    quota("alice", "request_percentage", 50.0), quota("alice", "request_percentage", 0.0, remove=True),
    scram("alice"), scram("alice", 2), RemoveUserScramCredentialRecord(name="alice", mechanism=2),
    token("t1", 50), token("t2", 60), token("t1", 90), RemoveDelegationTokenRecord(token_id="t2"),
    ProducerIdsRecord(broker_id=1, broker_epoch=4, next_producer_id=1000),
    ProducerIdsRecord(broker_id=2, broker_epoch=7, next_producer_id=2000),
    ZkMigrationStateRecord(zk_migration_state=0),
    KRaftVersionRecord(version=0, k_raft_version=1), VOTERS,
]


def replayed(records) -> QuorumController:
    qc = new_controller()
    for offset, record in enumerate(records):
        qc.replay(record, offset)
    return qc
