"""Asking the voters of a quorum on loopback who leads, and writing through the leader; and
building a quorum as an operator does (one voter, static voters, a dynamic quorum)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.client import ConnectionClosed
from protocol.generated.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.generated.messages.describe_quorum_request import (
    DescribeQuorumRequest, PartitionData, TopicData)
from protocol.generated.messages.metadata_request import MetadataRequest
from tests.support.wire import connect
from tools.controller_process import ROOT, ControllerProcess, QuorumProcesses
from tools.processes import free_port, poll

if TYPE_CHECKING:
    from tools.kafka_dist import Distribution

METADATA = "__cluster_metadata"
# A member that is down or not leading must not hold a test up: each request gives up after this.
TIMEOUT_S = 3.0


def describe_quorum(member: ControllerProcess):
    """The metadata partition's entry of DescribeQuorum (only the leader answers it whole)."""
    with connect(member, TIMEOUT_S) as c:
        response = c.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA, partitions=[PartitionData(partition_index=0)])]), 1)
    return response.topics[0].partitions[0]


def create_topic(member: ControllerProcess, name: str, partitions: int = 1) -> int:
    """The topic's error code in the CreateTopics answer; -1 if the connection failed."""
    try:
        with connect(member, TIMEOUT_S) as c:
            response = c.request(CreateTopicsRequest(
                topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1)],
                timeout_ms=int(TIMEOUT_S * 1000)), 7)
    except (OSError, ConnectionClosed):
        return -1
    return response.topics[0].error_code


def metadata(member: ControllerProcess):
    with connect(member, TIMEOUT_S) as c:
        return c.request(MetadataRequest(topics=None), 12)


def topic_names(member: ControllerProcess) -> set[str]:
    return {t.name for t in metadata(member).topics}


# --- kraftwire quorums built as an operator builds them ---------------------------------------

SINGLE, STATIC, DYNAMIC = "single", "static", "dynamic"
FIRST_CONTROLLER = 3000
LIFETIME_S = 1200
# Brokers fenced within seconds of their death, and elections within about a second.
CONTROLLER_DEFAULTS = {"broker.session.timeout.ms": "6000", "metadata.max.idle.interval.ms": "500",
                       "controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000"}


def metadata_quorum(dist: "Distribution | None", *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """kafka-metadata-quorum of a Kafka distribution, or kraftwire's own (same flags and output)."""
    if dist is not None:
        from tests.support.kafka import run_tool
        return run_tool(dist, "kafka-metadata-quorum", *args, check=check)
    done = subprocess.run([sys.executable, "-m", "tools.metadata_quorum", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"metadata_quorum {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


class ControllerQuorum(QuorumProcesses):
    """kraftwire controllers as a Kafka operator builds them: one voter, three static voters
    (``controller.quorum.voters``), or a dynamic quorum (``--standalone``, then two controllers
    formatted ``--no-initial-controllers`` and added with ``add-controller``), with Kafka's
    kafka-metadata-quorum when ``dist`` is given and kraftwire's otherwise; started, stopped
    and asked who leads as QuorumProcesses are."""

    def __init__(self, kind: str, workdir: Path, release: str | None = None, dist: "Distribution | None" = None,
                 properties: dict[str, str] | None = None) -> None:
        from protocol.primitives import random_uuid, uuid_to_str

        self.kind = kind
        self.dist = dist
        self.cluster_id = uuid_to_str(random_uuid())
        count = 1 if kind == SINGLE else 3
        self.ports = {FIRST_CONTROLLER + i: free_port() for i in range(count)}
        voters = ",".join(f"{node}@127.0.0.1:{port}" for node, port in self.ports.items())
        self.members: dict[int, ControllerProcess] = {}
        for i, (node, port) in enumerate(self.ports.items()):
            props = {"node.id": str(node), "listeners": f"CONTROLLER://127.0.0.1:{port}", **CONTROLLER_DEFAULTS,
                     **(properties or {})}
            if kind == DYNAMIC:
                props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{self.ports[FIRST_CONTROLLER]}"
            else:
                props["controller.quorum.voters"] = voters
            self.members[node] = ControllerProcess(
                workdir / f"controller-{node}", props, release, lifetime_s=LIFETIME_S, start_timeout_s=60.0,
                port=port, cluster_id=self.cluster_id,
                dynamic=None if kind != DYNAMIC else "standalone" if i == 0 else "observer")
        # How brokers find the controllers: a dynamic quorum's voters are in its log, so a broker
        # needs only addresses to start from; a static quorum's are not, so a broker lists them.
        self.for_brokers = (("controller.quorum.bootstrap.servers", self.bootstrap) if kind == DYNAMIC
                            else ("controller.quorum.voters", voters))

    def start(self) -> "ControllerQuorum":
        super().start()
        if self.kind == DYNAMIC:
            first = f"127.0.0.1:{self.ports[FIRST_CONTROLLER]}"
            for node, member in list(self.members.items())[1:]:
                assert member.config_path is not None
                # A controller that has not caught up yet is refused: the tool is run again.
                poll(lambda member=member: metadata_quorum(
                    self.dist, "--bootstrap-controller", first, "--command-config", str(member.config_path),
                    "add-controller", check=False).returncode == 0,
                    120.0, interval=1.0, message=f"controller {node} added")
        return self

    def status(self, address: str | None = None) -> dict[str, str]:
        """``describe --status``, asked of ``address`` or of every controller."""
        done = metadata_quorum(self.dist, "--bootstrap-controller", address or self.bootstrap, "describe", "--status")
        return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)}
