"""One Fetch path for every fetcher of the metadata log: Raft replicas and readers meet the same
log, the same epochs and the same table of replicas, each answered by its policy."""

from __future__ import annotations

from protocol.error_codes import Error
from protocol.generated.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from protocol.generated.messages.describe_quorum_response import DescribeQuorumResponse
from protocol.generated.messages.fetch_response import FetchResponse
from protocol.primitives import ZERO_UUID
from protocol.records import decode_batch
from server.raft import messages as rpc
from server.raft.leader import MAX_OBSERVERS, OBSERVER_TIMEOUT_MS
from server.raft.outputs import SendResponse
from server.raft.state import Election, Leader
from server.raft.types import ReplicaKey
from tests.raft.helpers import CLUSTER, answer, elect, fetch, log_with, new_core, of_type
from tests.support.raft_writes import propose

READER = 7  # a broker or tool: no voter, no directory id
DIRECTORY = bytes(range(1, 17))


def read(core, offset: int, last_epoch: int, now: int, version: int | None = None, max_wait_ms: int = 0,
         replica: int | ReplicaKey = READER, correlation_id: int = 70):
    core.receive_request(-1, correlation_id, rpc.fetch_request(
        CLUSTER, replica, core.epoch, offset, last_epoch, 0, max_wait_ms, 1 << 20), now, version)
    return core.take_outputs()


def describe(core, now: int, version: int) -> DescribeQuorumResponse:
    request = DescribeQuorumRequest(topics=[TopicData(topic_name=rpc.METADATA_TOPIC,
                                                      partitions=[PartitionData(partition_index=0)])])
    core.receive_request(-1, 80, request, now, version)
    [response] = of_type(core.take_outputs(), SendResponse)
    response.message.encode(version)  # what the wire would carry at that version
    return response.message


def test_a_reader_whose_log_parts_from_the_leaders_is_told_where() -> None:
    # The leader's log holds epochs 2 and 3 only; a reader that last fetched epoch 1 holds
    # batches the leader never had, and must cut its log at 0.
    core = new_core(persisted=Election(2), log=log_with(2, 2))
    now = elect(core)
    part = answer(read(core, 1, 1, now + 10))
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (0, 0)
    assert not part.records


def test_a_reader_gets_committed_records_only_and_waits_for_the_next_commit() -> None:
    core = new_core()
    now = elect(core)
    answer(fetch(core, 2, 1, 1, now + 10))  # voter 2 has the LeaderChange: offset 1 commits
    assert core.high_watermark == 1
    propose(core, [b"x"], now + 20)
    core.take_outputs()
    assert not of_type(read(core, 1, 1, now + 30, max_wait_ms=500), SendResponse)
    propose(core, [b"y"], now + 40)
    assert not of_type(core.take_outputs(), SendResponse), "nothing new is committed yet"
    outputs = fetch(core, 2, 2, 1, now + 50)  # offset 1 is now on a majority
    reader = [o for o in of_type(outputs, SendResponse) if o.correlation_id == 70]
    [part] = [p for t in reader[0].message.responses for p in t.partitions]
    assert [r.value for b in [decode_batch(part.records)] for r in b[0].records] == [b"x"]
    assert part.high_watermark == 2


def test_a_replica_naming_its_directory_reads_past_the_high_watermark() -> None:
    core = new_core()
    now = elect(core)
    propose(core, [b"x"], now + 10)
    core.take_outputs()
    part = answer(read(core, 1, 1, now + 20, replica=ReplicaKey(READER, DIRECTORY)))
    assert part.records and part.high_watermark == -1  # the epoch's first batch is not committed yet
    assert answer(read(core, 1, 1, now + 20, max_wait_ms=0)).records == b""


def test_answers_fit_the_version_each_reader_speaks() -> None:
    core = new_core(persisted=Election(2, leader_id=2))
    for version in (4, 11, 12, 16):
        [response] = of_type(read(core, 0, -1, 10, version=version), SendResponse)
        assert isinstance(response.message, FetchResponse)
        response.message.encode(version)
        part = response.message.responses[0].partitions[0]
        assert part.error_code == Error.NOT_LEADER_OR_FOLLOWER
        assert part.current_leader.leader_id == (2 if version >= 12 else -1)
        if version < 16:
            assert not response.message.node_endpoints


def test_readers_and_replicas_share_one_table_and_silent_observers_are_forgotten() -> None:
    core = new_core()
    now = elect(core)
    fetch(core, 2, 1, 1, now + 10)
    read(core, 0, -1, now + 10)
    read(core, 0, 0, now + 10, replica=ReplicaKey(8, DIRECTORY))
    quorum = describe(core, now + 20, 2).topics[0].partitions[0]
    assert [v.replica_id for v in quorum.current_voters] == [1, 2, 3]
    assert [(o.replica_id, o.replica_directory_id) for o in quorum.observers] == [(READER, ZERO_UUID), (8, DIRECTORY)]
    # Voter 2 keeps fetching, so the leader stays the leader all along.
    fetch(core, 2, 1, 1, now + OBSERVER_TIMEOUT_MS)
    read(core, 0, 0, now + OBSERVER_TIMEOUT_MS, replica=ReplicaKey(8, DIRECTORY))
    later = now + OBSERVER_TIMEOUT_MS + 20
    fetch(core, 2, 1, 1, later)
    quorum = describe(core, later, 2).topics[0].partitions[0]
    assert [o.replica_id for o in quorum.observers] == [8]
    # A voter that stopped fetching stays: it counts for commits whatever it does.
    assert [v.replica_id for v in quorum.current_voters] == [1, 2, 3]


def test_made_up_replica_ids_cannot_grow_the_table_past_its_cap() -> None:
    core = new_core()
    now = elect(core)
    for replica in range(100, 100 + MAX_OBSERVERS + 50):
        read(core, 0, -1, now + 10, replica=replica)
    state = core.state
    assert isinstance(state, Leader)
    assert len(state.replicas) <= MAX_OBSERVERS
    assert 100 + MAX_OBSERVERS + 49 in state.replicas  # the newest is kept, the longest silent went


def test_describe_quorum_before_v2_names_no_directories_and_no_nodes() -> None:
    core = new_core()
    now = elect(core)
    read(core, 0, 0, now + 10, replica=ReplicaKey(8, DIRECTORY))
    old = describe(core, now + 20, 1)
    assert not old.nodes
    assert {o.replica_directory_id for o in old.topics[0].partitions[0].observers} == {ZERO_UUID}
    new = describe(core, now + 20, 2)
    assert {o.replica_directory_id for o in new.topics[0].partitions[0].observers} == {DIRECTORY}


def test_only_the_leader_describes_the_quorum() -> None:
    core = new_core(persisted=Election(2, leader_id=2))
    part = describe(core, 10, 2).topics[0].partitions[0]
    assert (part.error_code, part.leader_id, part.leader_epoch) == (Error.NOT_LEADER_OR_FOLLOWER, 2, 2)
