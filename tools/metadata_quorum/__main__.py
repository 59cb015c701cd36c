"""``python -m tools.metadata_quorum``: kafka-metadata-quorum.sh for kraftwire.

    --bootstrap-controller HOST:PORT[,...] | --bootstrap-server HOST:PORT[,...]
    [--command-config FILE]  describe --status | --replication [--human-readable]

With --bootstrap-controller the active controller is found among the addresses (a standby's
answer names it); with --bootstrap-server the first broker that answers is asked, and forwards
the request as a Kafka broker does. --command-config holds Kafka's client settings for TLS and
SASL (security.protocol, ssl.truststore.location, sasl.mechanism, sasl.jaas.config, ...).
add-controller (--command-config is then the new controller's properties: its node.id,
metadata.log.dir's directory.id and advertised controller listener are what it asks for) and
remove-controller --controller-id ID --controller-directory-id DIR change a dynamic quorum's
voters (KIP-853); a static quorum (controller.quorum.voters) answers UNSUPPORTED_VERSION.
Exit status 0 on success, 1 on any error, said on stderr in one line.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO

from protocol.client import parse_addresses
from protocol.error_codes import Error, describe
from protocol.generated.messages.describe_cluster_request import DescribeClusterRequest
from protocol.generated.messages.describe_cluster_response import DescribeClusterResponse
from protocol.generated.messages.describe_quorum_response import Node, PartitionData, ReplicaState
from protocol.api_keys import APIS
from protocol.generated.messages.add_raft_voter_request import AddRaftVoterRequest
from protocol.generated.messages.add_raft_voter_request import Listener as AddListener
from protocol.generated.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.message import Message, api_key_of
from protocol.primitives import uuid_from_str, uuid_to_str
from server.client_connection import PLAINTEXT, ConnectionLost, KafkaConnection
from server.config import ConfigError, load_config, parse_properties
from server.metalog.meta_properties import StorageError, read_meta_properties
from server.security.client import ClientSecurity, ClientSettingsError, client_security_from_properties
from tools.active_controller import (
    METADATA_TOPIC, NoActiveController, connect_active, describe_quorum, reason)

CLIENT_ID = "kraftwire-metadata-quorum"
DEFAULT_TIMEOUT_MS = 60000  # Kafka's default.api.timeout.ms
ZERO_UUID = bytes(16)
CONTROLLER_ENDPOINTS = 2  # DescribeCluster's EndpointType for controllers (KIP-919)
# The keys of --command-config that are read; Kafka's admin client takes many more.
USED_KEYS = frozenset({
    "security.protocol", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
    "default.api.timeout.ms", "request.timeout.ms", "client.id",
})


class ToolError(Exception):
    """Said on stderr; the tool exits 1."""


@dataclass
class Quorum:
    cluster_id: str
    partition: PartitionData
    nodes: list[Node]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-metadata-quorum",
                                     description="This tool describes kraft metadata quorum status.")
    connection = parser.add_mutually_exclusive_group(required=True)
    connection.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                            help="brokers to connect to; the request is forwarded to the active controller")
    connection.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                            help="controllers to connect to; the active one among them is used")
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="Kafka client properties: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config")
    commands = parser.add_subparsers(dest="command", required=True)
    describe_parser = commands.add_parser("describe", help="Describe the metadata quorum info")
    describe_parser.add_argument("--status", action="store_true",
                                 help="a short summary of the quorum status")
    describe_parser.add_argument("--replication", action="store_true",
                                 help="detailed information about the status of replication")
    describe_parser.add_argument("--human-readable", action="store_true", help="human-readable output")
    add = commands.add_parser("add-controller", help="Add a controller to the KRaft controller cluster (its "
                                                     "properties in --command-config)")
    add.add_argument("--dry-run", action="store_true")
    remove = commands.add_parser("remove-controller", help="Remove a controller from the KRaft controller cluster")
    remove.add_argument("--controller-id", "-i", type=int, required=True)
    remove.add_argument("--controller-directory-id", "-d", required=True)
    remove.add_argument("--dry-run", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        run(args, sys.stdout)
    except ToolError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace, out: TextIO) -> None:
    if args.command in ("add-controller", "remove-controller"):
        change_voters(args, out)
        return
    if args.status and args.replication:
        raise ToolError("Only one of --status or --replication should be specified with describe sub-command")
    if not args.status and not args.replication:
        raise ToolError("One of --status or --replication must be specified with describe sub-command")
    if args.status and args.human_readable:
        raise ToolError("The option --human-readable is only supported along with --replication")
    security, timeout_s = _command_config(args.command_config)
    controllers = args.bootstrap_controller is not None
    try:
        addresses = parse_addresses(args.bootstrap_controller if controllers else args.bootstrap_server)
    except ValueError as exc:
        raise ToolError(f"--bootstrap-{'controller' if controllers else 'server'}: {exc}") from None
    quorum = asyncio.run(_ask(addresses, controllers, security, timeout_s))
    if args.status:
        out.write(status(quorum) + "\n")
    else:
        out.write(replication(quorum, args.human_readable, int(time.time() * 1000)))


def change_voters(args: argparse.Namespace, out: TextIO) -> None:
    """add-controller or remove-controller, sent to the active controller as Kafka's Admin
    addRaftVoter and removeRaftVoter do."""
    if args.bootstrap_controller is None:
        raise ToolError(f"{args.command} needs --bootstrap-controller")
    request: AddRaftVoterRequest | RemoveRaftVoterRequest
    if args.command == "add-controller":
        if args.command_config is None:
            raise ToolError("add-controller needs --command-config with the new controller's properties")
        try:
            config = load_config(args.command_config)
            meta = read_meta_properties(config.metadata_log_dir)
        except (ConfigError, StorageError) as exc:
            raise ToolError(f"{args.command_config}: {exc}") from None
        if meta.directory_id is None:
            raise ToolError(f"{config.metadata_log_dir}: meta.properties has no directory.id; format it with "
                            f"python -m tools.storage format --no-initial-controllers")
        listener = config.advertised_controller_listener
        host = listener.host or "localhost"
        what = (f"controller {config.node_id} with directory id {meta.directory_id} and endpoints: "
                f"{listener.name}://{host}:{listener.port}")
        security, timeout_s = _command_config(args.command_config, quiet=True)
        request = AddRaftVoterRequest(cluster_id=meta.cluster_id, timeout_ms=int(timeout_s * 1000),
                                      voter_id=config.node_id, voter_directory_id=uuid_from_str(meta.directory_id),
                                      listeners=[AddListener(name=listener.name, host=host, port=listener.port)])
        done = f"Added {what}"
    else:
        try:
            directory_id = uuid_from_str(args.controller_directory_id)
        except ValueError:
            raise ToolError(f"--controller-directory-id: {args.controller_directory_id!r} is not a base64 "
                            f"UUID") from None
        security, timeout_s = _command_config(args.command_config)
        what = f"KRaft controller {args.controller_id} with directory id {args.controller_directory_id}"
        request = RemoveRaftVoterRequest(cluster_id=None, voter_id=args.controller_id, voter_directory_id=directory_id)
        done = f"Removed {what}"
    if args.dry_run:
        out.write(f"DRY RUN of {'adding' if args.command == 'add-controller' else 'removing'} {what}\n")
        return
    try:
        addresses = parse_addresses(args.bootstrap_controller)
    except ValueError as exc:
        raise ToolError(f"--bootstrap-controller: {exc}") from None
    response = asyncio.run(_send_to_active(addresses, request, security, timeout_s))
    code = getattr(response, "error_code")
    if code != Error.NONE:
        text = getattr(response, "error_message", None) or describe(code)
        raise ToolError(f"{args.command} failed: {Error(code).name}: {text}")
    out.write(done + "\n")


async def _send_to_active(addresses: list[tuple[str, int]], request: Message, security: ClientSecurity,
                          timeout_s: float) -> Message:
    try:
        active = await connect_active(addresses, security, timeout_s, CLIENT_ID)
        try:
            return await active.connection.request(request, APIS[api_key_of(request)].max_version, timeout_s)
        finally:
            active.connection.close()
    except NoActiveController as exc:
        raise ToolError(str(exc)) from None
    except (ConnectionLost, asyncio.TimeoutError) as exc:
        raise ToolError(reason(exc)) from None


def _command_config(path: Path | None, quiet: bool = False) -> tuple[ClientSecurity, float]:
    if path is None:
        return PLAINTEXT, DEFAULT_TIMEOUT_MS / 1000
    try:
        props = parse_properties(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolError(f"Properties file {path} cannot be read: {exc.strerror}") from None
    except ConfigError as exc:
        raise ToolError(f"{path}: {exc}") from None
    unused = sorted(set(props) - USED_KEYS)
    if unused and not quiet:
        print(f"{path}: not used by this tool: {', '.join(unused)}", file=sys.stderr)
    try:
        security = client_security_from_properties(props)
    except ClientSettingsError as exc:
        raise ToolError(f"{path}: {exc}") from None
    timeout_ms = props.get("default.api.timeout.ms", str(DEFAULT_TIMEOUT_MS)).strip()
    if not timeout_ms.isdigit() or int(timeout_ms) == 0:
        raise ToolError(f"{path}: default.api.timeout.ms: expected a positive integer, got {timeout_ms!r}")
    return security, int(timeout_ms) / 1000


async def _ask(addresses: list[tuple[str, int]], controllers: bool, security: ClientSecurity,
               timeout_s: float) -> Quorum:
    try:
        if controllers:
            active = await connect_active(addresses, security, timeout_s, CLIENT_ID)
            conn, partition, nodes = active.connection, active.quorum, active.nodes
        else:
            conn = await _first_broker(addresses, security, timeout_s)
            response = await describe_quorum(conn, timeout_s)
            parts = [p for t in response.topics if t.topic_name == METADATA_TOPIC for p in t.partitions]
            code = response.error_code or (parts[0].error_code if len(parts) == 1 else Error.UNKNOWN_SERVER_ERROR)
            if code != Error.NONE:
                conn.close()
                raise ToolError(f"DescribeQuorum failed: {response.error_message or describe(code)}")
            partition, nodes = parts[0], response.nodes
        try:
            cluster = await conn.request(DescribeClusterRequest(
                endpoint_type=CONTROLLER_ENDPOINTS if controllers else 1), 1, timeout_s)
        finally:
            conn.close()
    except NoActiveController as exc:
        raise ToolError(str(exc)) from None
    except ConnectionLost as exc:  # AuthenticationError among them
        raise ToolError(str(exc)) from None
    assert isinstance(cluster, DescribeClusterResponse)
    if cluster.error_code != Error.NONE:
        raise ToolError(f"DescribeCluster failed: {cluster.error_message or describe(cluster.error_code)}")
    return Quorum(cluster.cluster_id, partition, nodes)


async def _first_broker(addresses: list[tuple[str, int]], security: ClientSecurity,
                        timeout_s: float) -> KafkaConnection:
    problems = []
    for host, port in addresses:
        try:
            return await KafkaConnection.open(host, port, CLIENT_ID, timeout_s, security)
        except (OSError, ConnectionLost, asyncio.TimeoutError) as exc:
            problems.append(f"{host}:{port}: {reason(exc)}")
    raise ToolError("no broker answered: " + "; ".join(problems))


# --- Kafka's output ----------------------------------------------------------------------------

def status(quorum: Quorum) -> str:
    p = quorum.partition
    leader = _leader(p)
    # The voter furthest behind; the first of equals, as Kafka's stream min picks it.
    behind = min(p.current_voters, key=lambda v: v.log_end_offset)
    if behind is leader:
        lag_ms = 0
    elif leader.last_caught_up_timestamp >= 0 and behind.last_caught_up_timestamp >= 0:
        lag_ms = leader.last_caught_up_timestamp - behind.last_caught_up_timestamp
    else:
        lag_ms = -1
    return "\n".join([
        f"ClusterId:              {quorum.cluster_id}",
        f"LeaderId:               {p.leader_id}",
        f"LeaderEpoch:            {p.leader_epoch}",
        f"HighWatermark:          {p.high_watermark}",
        f"MaxFollowerLag:         {leader.log_end_offset - behind.log_end_offset}",
        f"MaxFollowerLagTimeMs:   {lag_ms}",
        f"CurrentVoters:          {_replicas(p.current_voters, quorum.nodes)}",
        f"CurrentObservers:       {_replicas(p.observers, quorum.nodes)}",
    ])


def _leader(p: PartitionData) -> ReplicaState:
    for voter in p.current_voters:
        if voter.replica_id == p.leader_id:
            return voter
    raise ToolError(f"the leader {p.leader_id} is not among the voters the quorum reports")


def _replicas(replicas: list[ReplicaState], nodes: list[Node]) -> str:
    endpoints = {n.node_id: [f"{lsn.name}://{_host(lsn.host)}:{lsn.port}" for lsn in n.listeners] for n in nodes}
    items = []
    for r in replicas:
        directory = "null" if r.replica_directory_id == ZERO_UUID else f'"{uuid_to_str(r.replica_directory_id)}"'
        item = f'{{"id": {r.replica_id}, "directoryId": {directory}'
        if endpoints.get(r.replica_id):
            item += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints[r.replica_id]) + "]"
        items.append(item + "}")
    return "[" + ", ".join(items) + "]"


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def replication(quorum: Quorum, human_readable: bool, now_ms: int) -> str:
    p = quorum.partition
    leader = _leader(p)

    def timestamp(ms: int) -> str:
        if ms < 0:
            return "-1"
        return f"{max(0, now_ms - ms)} ms ago" if human_readable else str(ms)

    rows = [[str(r.replica_id), uuid_to_str(r.replica_directory_id), str(r.log_end_offset),
             str(leader.log_end_offset - r.log_end_offset), timestamp(r.last_fetch_timestamp),
             timestamp(r.last_caught_up_timestamp), role]
            for group, role in (([leader], "Leader"),
                                ([v for v in p.current_voters if v.replica_id != p.leader_id], "Follower"),
                                (p.observers, "Observer"))
            for r in group]
    headers = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
               "Status"]
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    # Kafka pads every cell to its column and ends each with a tab, the last one too.
    return "".join("".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths)) + "\n"
                   for row in [headers, *rows])


if __name__ == "__main__":
    sys.exit(main())
