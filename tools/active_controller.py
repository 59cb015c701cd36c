"""Finding the active controller of a quorum from a list of controller addresses, as Kafka's
admin client does with ``--bootstrap-controller``: whichever voter answers DescribeQuorum as
its leader is the active controller; a standby's answer names the leader and, from version 2,
where it listens, so an address left out of the list is still found.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

from protocol.client import parse_addresses
from protocol.error_codes import Error, describe
from protocol.generated.messages.describe_quorum_request import (
    DescribeQuorumRequest, PartitionData, TopicData)
from protocol.generated.messages.describe_quorum_response import (
    DescribeQuorumResponse, Node, PartitionData as QuorumPartition)
from server.client_connection import PLAINTEXT, AuthenticationError, ConnectionLost, KafkaConnection
from server.security.client import ClientSecurity

METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_QUORUM_VERSION = 2
RETRY_S = 0.2  # between rounds over the addresses, while an election is under way


class NoActiveController(Exception):
    """No address answered as the active controller in time; says what each one answered."""


@dataclass
class ActiveController:
    host: str
    port: int
    connection: KafkaConnection  # authenticated and open; the caller closes it
    quorum: QuorumPartition  # the leader's DescribeQuorum answer for the metadata partition
    nodes: list[Node]  # where each voter listens (DescribeQuorum v2)

    @property
    def node_id(self) -> int:
        return self.quorum.leader_id


async def describe_quorum(conn: KafkaConnection, timeout: float) -> DescribeQuorumResponse:
    response = await conn.request(DescribeQuorumRequest(topics=[TopicData(
        topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=0)])]), DESCRIBE_QUORUM_VERSION, timeout)
    assert isinstance(response, DescribeQuorumResponse)
    return response


async def connect_active(addresses: list[tuple[str, int]], security: ClientSecurity = PLAINTEXT,
                         timeout: float = 10.0, client_id: str = "kraftwire-tools") -> ActiveController:
    """A connection to the active controller, found within ``timeout`` seconds; raises
    NoActiveController (or AuthenticationError, which asking again would not cure)."""
    deadline = time.monotonic() + timeout
    problems: dict[str, str] = {}
    while True:
        queue = list(addresses)
        tried: set[tuple[str, int]] = set()
        while queue:
            host, port = queue.pop(0)
            if (host, port) in tried:
                continue
            tried.add((host, port))
            left = max(0.1, deadline - time.monotonic())
            try:
                conn = await KafkaConnection.open(host, port, client_id, left, security)
            except AuthenticationError:
                raise
            except (OSError, ConnectionLost, asyncio.TimeoutError) as exc:
                problems[f"{host}:{port}"] = reason(exc)
                continue
            try:
                response = await describe_quorum(conn, left)
            except ConnectionLost as exc:
                conn.close()
                problems[f"{host}:{port}"] = str(exc)
                continue
            part = _metadata_partition(response)
            code = response.error_code or (part.error_code if part is not None else Error.UNKNOWN_SERVER_ERROR)
            if part is not None and code == Error.NONE:
                return ActiveController(host, port, conn, part, response.nodes)
            conn.close()
            if code == Error.CLUSTER_AUTHORIZATION_FAILED:
                # As final as refused credentials: the principal needs DESCRIBE on the cluster.
                raise NoActiveController(f"{host}:{port} refused DescribeQuorum: {describe(code)}")
            problems[f"{host}:{port}"] = (response.error_message or describe(code)) + (
                f" (leader {part.leader_id})" if part is not None and part.leader_id >= 0 else "")
            if part is not None and part.leader_id >= 0:
                # Ask the leader it names next, at the address it listens on.
                queue[:0] = [(lsn.host, lsn.port) for node in response.nodes if node.node_id == part.leader_id
                             for lsn in node.listeners[:1]]
        if time.monotonic() + RETRY_S >= deadline:
            raise NoActiveController("no active controller answered: " + "; ".join(
                f"{address}: {problem}" for address, problem in problems.items()))
        await asyncio.sleep(RETRY_S)


def locate(spec: str, timeout: float = 10.0, security: ClientSecurity = PLAINTEXT) -> tuple[str, int]:
    """host:port of the active controller among ``spec`` (HOST:PORT[,HOST:PORT...]); a single
    address is taken as it is, without asking. ValueError for a bad spec, NoActiveController or
    AuthenticationError when none answers as active."""
    addresses = parse_addresses(spec)
    if len(addresses) == 1:
        return addresses[0]

    async def find() -> tuple[str, int]:
        active = await connect_active(addresses, security, timeout)
        active.connection.close()
        return active.host, active.port

    return asyncio.run(find())


def _metadata_partition(response: DescribeQuorumResponse) -> QuorumPartition | None:
    parts = [p for t in response.topics if t.topic_name == METADATA_TOPIC for p in t.partitions if p.partition_index == 0]
    return parts[0] if len(parts) == 1 else None


def reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.errno:
        # asyncio's own text for a refused connection repeats the address: say what errno says.
        return os.strerror(exc.errno)
    return str(exc)
