"""Driving one RaftCore by hand: building its inputs and picking out its outputs."""

from __future__ import annotations

import random
from typing import Any

from protocol.error_codes import Error
from protocol.generated.messages.vote_request import VoteRequest
from protocol.message import Message
from protocol.records import Record, RecordBatch, encode_batch
from server.raft import messages as rpc
from server.raft.core import RaftCore
from tests.support.raft_log import InMemoryLog
from server.raft.outputs import Output, SendRequest, SendResponse
from server.raft.quorum_config import QuorumConfig
from server.raft.state import Election

CLUSTER = "cluster"
CONFIG = QuorumConfig(voters=(1, 2, 3), cluster_id=CLUSTER, election_timeout_ms=1000, fetch_timeout_ms=2000)


def batch(base_offset: int, epoch: int, count: int = 1) -> bytes:
    return encode_batch(RecordBatch(base_offset=base_offset, partition_leader_epoch=epoch,
                                    records=[Record(f"{base_offset + i}@{epoch}".encode()) for i in range(count)]))


def log_with(*epochs: int) -> InMemoryLog:
    """A flushed log with one single-record batch per epoch given."""
    log = InMemoryLog()
    for offset, epoch in enumerate(epochs):
        log.append([batch(offset, epoch)])
    log.flush()
    return log


def new_core(node_id: int = 1, persisted: Election | None = None, log: InMemoryLog | None = None,
             config: QuorumConfig = CONFIG, now: int = 0) -> RaftCore:
    core = RaftCore(node_id, config, log if log is not None else InMemoryLog(), persisted, random.Random(7), now)
    core.tick(now)
    return core


def of_type(outputs: list[Output], kind: type) -> list[Any]:
    return [o for o in outputs if isinstance(o, kind)]


def sent(outputs: list[Output], message_type: type[Message]) -> list[SendRequest]:
    return [o for o in outputs if isinstance(o, SendRequest) and isinstance(o.message, message_type)]


def partition_of(message: Message) -> Any:
    """The one partition a quorum RPC carries."""
    topics = getattr(message, "responses", None) or getattr(message, "topics")
    return topics[0].partitions[0]


def answer(outputs: list[Output]) -> Any:
    """The partition of the one response among the outputs."""
    [response] = of_type(outputs, SendResponse)
    return partition_of(response.message)


def vote(core: RaftCore, candidate: int, epoch: int, last_epoch: int = 0, last_offset: int = 0,
         now: int = 0, pre_vote: bool = False) -> Any:
    core.receive_request(candidate, 99, rpc.vote_request(CLUSTER, epoch, candidate, core.node_id, last_epoch,
                                                         last_offset, pre_vote), now)
    return answer(core.take_outputs())


def grant_votes(core: RaftCore, requests: list[SendRequest], now: int, granted: bool = True) -> None:
    for request in requests:
        core.receive_response(request.destination, request.correlation_id,
                              rpc.vote_response(Error.NONE, core.epoch, -1, granted), now)


def elect(core: RaftCore, now: int = 5_000) -> int:
    """Time out, win the pre-vote and the vote; returns the time it led from."""
    core.take_outputs()
    core.tick(now)
    grant_votes(core, sent(core.take_outputs(), VoteRequest), now)
    grant_votes(core, sent(core.take_outputs(), VoteRequest), now)
    assert core.is_leader
    return now


def fetch(core: RaftCore, replica: int, offset: int, last_epoch: int, now: int, epoch: int | None = None,
          max_wait_ms: int = 0, correlation_id: int = 50) -> list[Output]:
    core.receive_request(replica, correlation_id, rpc.fetch_request(
        CLUSTER, replica, core.epoch if epoch is None else epoch, offset, last_epoch, 0, max_wait_ms, 1 << 20), now)
    return core.take_outputs()
