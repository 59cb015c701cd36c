"""Every controller of a dynamic quorum names the Raft leader as the active controller.

A dynamic quorum's voters and their endpoints are in its log (VotersRecord), not in
``controller.quorum.voters``: a standby finds the leader's endpoint there. Kafka's controllers
answer DescribeCluster with the Raft leader (ControllerApis), and an admin client bootstrapped
at several controllers (``--bootstrap-controller``) sends its writes to the one named.
"""

from __future__ import annotations

from pathlib import Path

from protocol.constants import EndpointType
from protocol.generated.messages.metadata_request import MetadataRequest
from tests.support.quorum import DYNAMIC, ControllerQuorum
from tests.support.wire import connect, describe_cluster
from tools.processes import poll

WAIT_S = 120.0


def named_leaders(quorum: ControllerQuorum) -> dict[int, tuple[int, int, list[tuple[int, int]]]]:
    """Each running controller's answer: (DescribeCluster's controller id, Metadata's, and
    where Metadata says that controller listens)."""
    answers = {}
    for node, member in quorum.members.items():
        if not member.running:
            continue
        with connect(member, 10.0) as client:
            described = describe_cluster(client, EndpointType.CONTROLLER)
            metadata = client.request(MetadataRequest(topics=None), 12)
        answers[node] = (described.controller_id, metadata.controller_id,
                         [(b.node_id, b.port) for b in metadata.brokers])
    return answers


def every_one_names(quorum: ControllerQuorum, leader: int) -> bool:
    expected = (leader, leader, [(leader, quorum.ports[leader])])
    return all(answer == expected for answer in named_leaders(quorum).values())


def test_standbys_of_a_dynamic_quorum_name_the_leader_across_failovers(tmp_path: Path) -> None:
    quorum = ControllerQuorum(DYNAMIC, tmp_path).start()
    try:
        first = quorum.wait_for_leader(timeout=WAIT_S)
        poll(lambda: every_one_names(quorum, first), WAIT_S, interval=0.2,
             message=f"every controller naming {first}: {named_leaders(quorum)}")
        # The leader dies: the others name whoever is elected, and the old leader, back as a
        # standby, names it too (it named -1 for good before).
        quorum.members[first].kill9()
        second = quorum.wait_for_leader(exclude=frozenset({first}), timeout=WAIT_S)
        quorum.members[first].start()
        poll(lambda: every_one_names(quorum, second), WAIT_S, interval=0.2,
             message=f"every controller naming {second}: {named_leaders(quorum)}")
    finally:
        quorum.stop()
