"""Partition leaders: the brokers of this process that lead partitions in the image.

Every tick each such leader compares the ISR in the image with what its simulated followers
(the lag model) say and, where they differ, asks the controller for the new ISR with
AlterPartition v3 (NewIsrWithEpochs, the leader and partition epochs of its image), one
request per leader as Kafka batches them. A leader elected uncleanly (recovery state
RECOVERING) first reports RECOVERED with itself as the only ISR member.

A partition with a request in flight, or whose last request the image has not caught up
with, is left alone until the image moves on or a retry delay passes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from protocol.constants import LeaderRecoveryState
from protocol.error_codes import Error, describe
from protocol.generated.messages.alter_partition_request import (
    AlterPartitionRequest, BrokerState, PartitionData, TopicData)
from protocol.generated.messages.alter_partition_response import AlterPartitionResponse
from protocol.message import Message
from tools.broker.channel import ControllerChannel, ControllerUnavailable
from server.image.image import MetadataImage
from tools.broker.lag import LagModel, ReplicaKey

log = logging.getLogger("kraftwire.broker.leader")

ALTER_PARTITION_VERSION = 3
TICK_S = 0.25
RETRY_S = 1.0
# How long an accepted change may take to show up in the image before it is asked again.
ACCEPTED_WAIT_S = 5.0


@dataclass
class IsrChange:
    topic_id: bytes
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    old_isr: list[int]
    isr: list[int]
    isr_epochs: list[int]
    old_recovery: int
    recovery: int

    def describe(self) -> str:
        if self.recovery != self.old_recovery:
            return "leader recovery state RECOVERED"
        return f"ISR {self.old_isr} -> {self.isr}"


@dataclass
class Hold:
    """Leave a partition alone while the image shows ``partition_epoch`` and before ``until``."""

    partition_epoch: int
    until: float


def plan(image: MetadataImage, leads_here: Callable[[int], bool], model: LagModel, now: float,
         holds: Mapping[tuple[bytes, int], Hold], unreachable: Callable[[int], bool] = lambda b: False
         ) -> dict[int, list[IsrChange]]:
    """The ISR changes wanted now by the leaders for which ``leads_here`` holds, by leader.

    Followers that are ``unreachable`` (brokers of this process that are killed or paused)
    cannot fetch, so they fall behind at once and do not catch up, whatever the image says.
    Both are asked per partition, so a fleet of thousands with few partitions costs little."""
    brokers = image.cluster.brokers
    changes: dict[int, list[IsrChange]] = {}
    seen: set[ReplicaKey] = set()
    for topic in image.replication.topics.values():
        for p in topic.partitions:
            if not leads_here(p.leader):
                continue
            followers = [r for r in p.replicas if r != p.leader]
            seen.update((p.topic_id, p.partition_id, r) for r in followers)
            hold = holds.get((p.topic_id, p.partition_id))
            if hold is not None and hold.partition_epoch == p.partition_epoch and now < hold.until:
                continue
            recovery: int
            if p.recovery == LeaderRecoveryState.RECOVERING:
                isr, recovery = [p.leader], LeaderRecoveryState.RECOVERED
            else:
                isr, recovery = [], p.recovery
                for r in p.replicas:
                    eligible = not unreachable(r) and image.is_usable(r)
                    if r == p.leader or model.in_sync((p.topic_id, p.partition_id, r), now, eligible, r in p.isr):
                        isr.append(r)
            if recovery == p.recovery and sorted(isr) == sorted(p.isr):
                continue
            changes.setdefault(p.leader, []).append(IsrChange(
                p.topic_id, topic.name, p.partition_id, p.leader_epoch, p.partition_epoch, list(p.isr), isr,
                [brokers[r].epoch if r in brokers else -1 for r in isr], p.recovery, recovery))
    model.retain(seen)
    return changes


class AlterPartitionStats(Protocol):
    alter_partition_sent: int
    alter_partition_errors: int
    isr_changes: int


class LeaderBroker(Protocol):
    """What a leader needs from its broker."""

    node_id: int
    channel: ControllerChannel

    @property
    def can_lead(self) -> bool: ...

    @property
    def epoch(self) -> int: ...


class PartitionLeaders:
    def __init__(self, image: Callable[[], MetadataImage], brokers: Mapping[int, LeaderBroker],
                 model: LagModel, stats: AlterPartitionStats, unreachable: Callable[[int], bool]) -> None:
        self.image = image
        self.unreachable = unreachable
        self.brokers = brokers
        self.model = model
        self.stats = stats
        self.holds: dict[tuple[bytes, int], Hold] = {}
        self._sending: set[asyncio.Task[None]] = set()  # referenced until done, or the loop may drop them

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.tick(loop.time())
            await asyncio.sleep(TICK_S)

    def tick(self, now: float) -> None:
        self.holds = {k: h for k, h in self.holds.items() if now < h.until}
        for leader, changes in plan(self.image(), self._leads_here, self.model, now, self.holds,
                                    self.unreachable).items():
            for c in changes:
                self.holds[(c.topic_id, c.partition)] = Hold(c.partition_epoch, float("inf"))
            task = asyncio.ensure_future(self._send(self.brokers[leader], changes))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    def _leads_here(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.can_lead

    async def _send(self, broker: LeaderBroker, changes: list[IsrChange]) -> None:
        loop = asyncio.get_running_loop()
        by_topic: dict[bytes, TopicData] = {}
        for c in changes:
            topic = by_topic.setdefault(c.topic_id, TopicData(topic_id=c.topic_id))
            topic.partitions.append(PartitionData(
                partition_index=c.partition, leader_epoch=c.leader_epoch, partition_epoch=c.partition_epoch,
                leader_recovery_state=c.recovery,
                new_isr_with_epochs=[BrokerState(broker_id=b, broker_epoch=e) for b, e in zip(c.isr, c.isr_epochs)]))
        request = AlterPartitionRequest(broker_id=broker.node_id, broker_epoch=broker.epoch,
                                        topics=list(by_topic.values()))
        self.stats.alter_partition_sent += 1
        try:
            response: Message | None = await broker.channel.call(request, ALTER_PARTITION_VERSION)
        except ControllerUnavailable:
            response = None
        assert response is None or isinstance(response, AlterPartitionResponse)
        now = loop.time()
        results = {} if response is None else {
            (t.topic_id, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        top = Error.UNKNOWN_SERVER_ERROR if response is None else response.error_code
        for c in changes:
            code = results.get((c.topic_id, c.partition), top if top != Error.NONE else Error.UNKNOWN_SERVER_ERROR)
            key = (c.topic_id, c.partition)
            if code == Error.NONE:
                self.stats.isr_changes += 1
                self.holds[key] = Hold(c.partition_epoch, now + ACCEPTED_WAIT_S)
                log.info("broker %d: %s-%d %s", broker.node_id, c.topic, c.partition, c.describe())
            else:
                self.stats.alter_partition_errors += 1
                self.holds[key] = Hold(c.partition_epoch, now + RETRY_S)
                if response is not None:
                    log.info("broker %d: %s-%d %s refused: %s",
                             broker.node_id, c.topic, c.partition, c.describe(), describe(code))

