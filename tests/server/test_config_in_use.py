"""Settings that change what a running controller does, checked on a real process: the periodic
NoOpRecord (metadata.max.idle.interval.ms, KIP-835), the endpoint it reports for itself
(advertised.listeners), and start-up refusing what kraftwire does not implement."""

from __future__ import annotations

import subprocess
import time

import pytest

from protocol.generated.messages.describe_quorum_request import (
    DescribeQuorumRequest, PartitionData as QuorumPartitionRequest, TopicData as QuorumTopicRequest)
from protocol.generated.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from protocol.generated.messages.metadata_request import MetadataRequest
from protocol.generated.metadata.no_op_record import NoOpRecord
from protocol.primitives import METADATA_TOPIC_ID
from protocol.records import parse_metadata_record
from server.config import EMBEDDED_NODE_ID
from server.controller.clock import ManualClock
from server.controller.quorum_controller import QuorumController
from server.metalog.segments import MetadataLog
from tests.support.processes import PYTHON
from tests.support.wire import connect, describe_cluster
from tools.controller_process import ROOT
from tools.processes import poll

METADATA_TOPIC = "__cluster_metadata"


def high_watermark(client) -> int:
    response = client.request(DescribeQuorumRequest(topics=[QuorumTopicRequest(
        topic_name=METADATA_TOPIC, partitions=[QuorumPartitionRequest(partition_index=0)])]), 2)
    return response.topics[0].partitions[0].high_watermark


def logged_records(data_dir) -> list[tuple[str, int]]:
    """(record name, batch timestamp) of every metadata record in a stopped controller's log."""
    log = MetadataLog.open(data_dir)
    try:
        return [(parse_metadata_record(value)[0].NAME, header.base_timestamp)
                for header, values in log.record_values(0) if not header.is_control
                for _, value in values]
    finally:
        log.close()


# --- the NoOpRecord -------------------------------------------------------------------------------

def test_write_no_op_appends_one_record_that_changes_nothing_else() -> None:
    qc = QuorumController("MkU3OEVBNTcwNTJENDM2Qg", 1, ManualClock())
    qc.activate()
    before = list(qc.snapshot_records())
    applied = qc.write_no_op()
    assert [(type(r), v) for r, v in applied.records] == [(NoOpRecord, 0)]
    assert (applied.base_offset, qc.last_applied_offset, applied.response) == (0, 0, None)
    assert qc.write_no_op().base_offset == 1
    assert list(qc.snapshot_records()) == before


def past_start_up(client) -> int:
    """The high watermark once the LeaderChange and the bootstrap records, which the start-up
    writes itself (in one batch, committed as one), are committed: the controller is active
    before they are."""
    return poll(lambda: (hw := high_watermark(client)) >= 2 and hw, 60, message="the start-up's records committed")


@pytest.mark.controller_properties({"metadata.max.idle.interval.ms": "100"})
def test_an_idle_controller_appends_a_no_op_record_every_interval(controller) -> None:
    with connect(controller) as client:
        start = past_start_up(client)
        # Nothing but DescribeQuorum (which writes nothing) is sent, yet the log moves on.
        poll(lambda: high_watermark(client) >= start + 5, 60, message="five more committed offsets")
    assert controller.stop() == 0
    records = logged_records(controller.data_dir)
    no_ops = [stamp for name, stamp in records if name == "NoOpRecord"]
    assert len(no_ops) >= 5
    assert {name for name, _ in records[-len(no_ops):]} == {"NoOpRecord"}
    # A fixed period: each one is scheduled a whole interval after the previous one was written.
    assert min(b - a for a, b in zip(no_ops, no_ops[1:])) >= 90


@pytest.mark.controller_properties({"metadata.max.idle.interval.ms": "0"})
def test_zero_turns_the_no_op_record_off(controller) -> None:
    with connect(controller) as client:
        start = past_start_up(client)
        # The time passing is what is tested: ten of the 100 ms intervals the test above runs
        # with, in which a controller that writes no-ops would have committed some.
        time.sleep(1.0)
        assert high_watermark(client) == start
    assert controller.stop() == 0
    assert "NoOpRecord" not in {name for name, _ in logged_records(controller.data_dir)}


# --- the endpoint it reports for itself -------------------------------------------------------------

@pytest.mark.controller_properties({"advertised.listeners": "CONTROLLER://ctl-1.example:19093",
                                    "metadata.max.idle.interval.ms": "0"})
def test_the_advertised_listener_is_the_endpoint_reported_everywhere(controller) -> None:
    advertised = ("ctl-1.example", 19093)
    assert controller.port != 19093
    with connect(controller) as client:
        controllers = describe_cluster(client, endpoint_type=2)
        assert [(b.broker_id, b.host, b.port) for b in controllers.brokers] == [(EMBEDDED_NODE_ID, *advertised)]
        # With no broker live, Metadata names the controller as the only node.
        metadata = client.request(MetadataRequest(topics=[]), 12)
        assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(EMBEDDED_NODE_ID, *advertised)]
        quorum = client.request(DescribeQuorumRequest(topics=[QuorumTopicRequest(
            topic_name=METADATA_TOPIC, partitions=[QuorumPartitionRequest(partition_index=0)])]), 2)
        assert [(n.node_id, [(lsn.name, lsn.host, lsn.port) for lsn in n.listeners]) for n in quorum.nodes] \
            == [(EMBEDDED_NODE_ID, [("CONTROLLER", *advertised)])]
        fetched = client.request(FetchRequest(
            replica_state=ReplicaState(replica_id=-1), max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            topics=[FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[
                FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 17)
        assert [(n.node_id, n.host, n.port) for n in fetched.node_endpoints] == [(EMBEDDED_NODE_ID, *advertised)]


# --- refused at start-up --------------------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("listener.name.controller.ssl.keystore.location", "/etc/kafka/controller.jks"),
])
def test_an_unsupported_key_stops_start_up_naming_the_key(tmp_path, key, value) -> None:
    config = tmp_path / "server.properties"
    config.write_text("process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                      "listeners=CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n"
                      f"metadata.log.dir={tmp_path / 'data'}\n{key}={value}\n")
    done = subprocess.run([PYTHON, "-m", "server", "--config", str(config)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.startswith(f"configuration error: {key}: ")
    assert "not supported" in done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.controller_properties({"num.network.threads": "3", "log.retention.hours": "168"})
def test_ignored_keys_are_named_in_the_log_at_start_up(controller) -> None:
    controller.wait_for_stderr(r"ignoring settings kraftwire has no use for: log\.retention\.hours, "
                               r"num\.network\.threads")
