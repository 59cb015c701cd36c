"""The network and disk shell around the Raft core, for every controller: one voter or several.

``QuorumReplication`` owns a ``RaftCore`` and is the I/O of the driver that carries out its
outputs in order (``server.quorum_driver``): it persists the election in quorum-state before
anything else goes out, sends requests to the other voters over one outbound connection each,
and answers every request about the metadata log (the voters' RPCs, and Fetch, FetchSnapshot
and DescribeQuorum from brokers and tools); the driver tells the controller shell what
happened. Time is the monotonic clock in milliseconds; the core is ticked at its next
deadline.

It is the controller's commit path: the active controller submits the records of each
command, and a response waiting for an offset is released once a majority of voters (the
voter itself, alone) has the offset on disk, or failed if leadership is lost first; the
waiting and the commit figures are ``server.commit_tracker``'s, the connections to the other
voters ``server.voter_channel``'s. A command's records that the log refuses
make the leader resign (``AppendFailed``); a write the core itself cannot make (its LeaderChange, a fetched
batch) stops the process, as Kafka's fault handler does, to recover from what is durable.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from pathlib import Path
from typing import Callable

from protocol.message import Message
from server.client_connection import PLAINTEXT, ConnectionLost
from server.controller.result import VersionedRecord
from server.metalog.commit_path import encode_batches
from server.metalog.quorum_state import QuorumState, read_quorum_state, write_quorum_state
from server.metalog.raft_log import DiskRaftLog
from server.raft import messages as rpc
from server.raft.core import NotLeader, RaftCore
from server.quorum_driver import QuorumDriver, QuorumEvents
from server.raft.outputs import SendRequest, SendResponse
from server.raft.voters import KRAFT_VERSION_DYNAMIC, VoterSet
from server.raft.quorum_config import QuorumConfig
from server.raft.state import Election
from server.security.client import ClientSecurity
from server.voter_channel import VoterChannel

log = logging.getLogger("kraftwire.quorum")

def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class QuorumReplication:
    def __init__(self, node_id: int, config: QuorumConfig, log_dir: Path, raft_log: DiskRaftLog,
                 events: QuorumEvents, wall_clock_ms: Callable[[], int],
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.node_id = node_id
        self.log_dir = log_dir
        self.raft_log = raft_log
        self.events = events
        self.wall_clock_ms = wall_clock_ms
        stored = read_quorum_state(log_dir)
        persisted = Election(stored.leader_epoch, stored.leader_id, stored.voted_id, stored.voted_directory_id)
        self.core = RaftCore(node_id, config, raft_log, persisted, random.Random(), monotonic_ms(),
                             lambda _now: wall_clock_ms())
        raft_log.on_flushed = self._poke
        self.request_timeout_s = config.request_timeout_ms / 1000
        self.driver = QuorumDriver(self, events)
        self.commits = self.driver.commits
        self._answers: dict[int, asyncio.Future[Message]] = {}  # inbound correlation -> response
        self._next_inbound = 0
        # How the other voters are reached: the controller listener's protocol.
        self.channel = VoterChannel(node_id, security, self.request_timeout_s)
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._deadline = -1  # when the timer is set to tick
        self._appending = False  # an append of what was submitted is scheduled
        self._closed = False

    # --- the core's view of things -------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def leader_id(self) -> int:
        return self.core.leader_id

    @property
    def voter_set(self) -> VoterSet:
        return self.core.voter_set

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        """Where ``node_id`` listens, as this node knows it."""
        return self.core.address_of(node_id)

    def kraft_upgrade(self, level: int) -> tuple[int, str | None, list[Message]]:
        """The records that raise kraft.version to ``level`` as the leader, or why not."""
        return self.core.kraft_upgrade(level)

    # --- starting and stopping -----------------------------------------------------------------
    def start(self) -> None:
        """Let the core act on the election read back (a single voter elects itself now),
        then keep its timers running."""
        self._poke()

    def confirm_leadership(self) -> None:
        """A leader that a majority has not fetched from within the check-quorum time resigns
        now, before it answers as the leader: its timer may not have run yet (the process
        was frozen, or the loop busy)."""
        if self.core.leadership_lapsed(monotonic_ms()):
            self._poke()

    async def stop(self, grace_s: float) -> None:
        """Resign and tell the other voters (EndQuorumEpoch), waiting up to ``grace_s`` for
        another voter to take over, then close every connection."""
        self.core.begin_shutdown(monotonic_ms())
        self._run()
        deadline = time.monotonic() + grace_s
        while not self.core.shutdown_complete and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self.channel.close()
        for task in list(self._tasks):
            task.cancel()
        self.commits.fail_all("the controller is shutting down")

    # --- the commit path, for the active controller --------------------------------------------
    def submit(self, records: list[VersionedRecord], base_offset: int) -> None:
        """Hand a command's records to the leader (at ``base_offset``, the Raft layer's next
        offset); everything submitted in one turn of the event loop is appended together at
        the core's next step, so the followers fetch it (and fsync it) in one go."""
        if not records or self._closed:
            return
        self.commits.submitted(base_offset + len(records) - 1)
        try:
            last = self.core.prepare_append(
                encode_batches(records, base_offset, self.core.epoch, self.wall_clock_ms()), monotonic_ms())
        except NotLeader:
            # Leadership went between the command and its records: their waiters fail with
            # it, and the controller goes back to the committed state.
            log.info("%d records not written: this node no longer leads", len(records))
            return
        self.commits.proposed(last, self.wall_clock_ms())
        if not self._appending:
            self._appending = True
            asyncio.get_running_loop().call_soon(self._append_prepared)

    def _append_prepared(self) -> None:
        self._appending = False
        self._poke()

    @property
    def next_offset(self) -> int:
        """Where the active controller's next record goes."""
        return self.core.next_offset

    async def drain(self) -> None:
        """Wait for what the active controller submitted to commit."""
        await self.commits.drain(self.request_timeout_s)

    def close(self) -> None:
        self.raft_log.close()

    # --- requests from the other voters ----------------------------------------------------------
    def serve(self, message: Message, version: int) -> asyncio.Future[Message]:
        """Every request about the metadata log, at the ``version`` it came in at: the quorum's
        RPCs, and Fetch, FetchSnapshot and DescribeQuorum from anyone. The core answers now or
        later (a long-polling fetch)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Message] = loop.create_future()
        correlation_id = self._next_inbound
        self._next_inbound += 1
        self._answers[correlation_id] = answer
        # Answers go back by correlation id, on the connection the request came in on; the
        # source is the node the request names, as Kafka's handlers take it.
        source = rpc.requester_id(message)
        self._step(lambda: self.core.receive_request(source, correlation_id, message, monotonic_ms(), version))
        return answer

    # --- doing what the core asks ----------------------------------------------------------------
    def _run(self) -> None:
        for output in self.core.take_outputs():
            self.driver.perform(output)
        if self._closed:
            return
        deadline = self.core.next_deadline()
        if self._timer is not None:
            if deadline == self._deadline:
                return
            self._timer.cancel()
        self._deadline = deadline
        self._timer = asyncio.get_running_loop().call_later(max(0, deadline - monotonic_ms()) / 1000, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._poke()

    def _poke(self) -> None:
        """Let the core look at the time (and at its log, after a background flush)."""
        if self._closed:
            return
        self._step(lambda: self.core.tick(monotonic_ms()))

    def _step(self, action: Callable[[], None]) -> None:
        """One input to the core, then what it asks for."""
        try:
            action()
        except OSError as exc:
            log.critical("cannot write the metadata log; stopping: %s", exc)
            os._exit(3)
        self._run()

    # --- the I/O the driver asks for (QuorumIO) ---------------------------------------------------
    def persist(self, election: Election) -> None:
        e = election
        dynamic = self.core.history.kraft_version >= KRAFT_VERSION_DYNAMIC
        try:
            write_quorum_state(self.log_dir, QuorumState(
                leader_id=e.leader_id, leader_epoch=e.epoch, voted_id=e.voted_id,
                voted_directory_id=e.voted_directory_id,
                voters=() if dynamic else tuple(sorted(self.core.voters)), data_version=1 if dynamic else 0))
        except OSError as exc:
            # The node stops at once, before anything after this output goes out, as Kafka's
            # fault handler stops it.
            log.critical("cannot save the quorum state (epoch %d, vote %d, leader %d); stopping: %s",
                         e.epoch, e.voted_id, e.leader_id, exc)
            os._exit(3)

    def send(self, request: SendRequest) -> None:
        task = asyncio.get_running_loop().create_task(self._send(request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def answer(self, response: SendResponse) -> None:
        answer = self._answers.pop(response.correlation_id, None)
        if answer is not None and not answer.done():
            answer.set_result(response.message)

    # --- the other voters --------------------------------------------------------------------------
    async def _send(self, request: SendRequest) -> None:
        destination = request.destination
        try:
            response = await self.channel.exchange(destination, request.address, request.message)
        except (ConnectionLost, OSError, asyncio.TimeoutError) as exc:
            log.debug("%s to voter %d failed: %s", request.message.NAME, destination, exc)
            if not self._closed:
                self._step(lambda: self.core.request_failed(request.correlation_id, monotonic_ms()))
            return
        if not self._closed:
            self._step(lambda: self.core.receive_response(destination, request.correlation_id, response,
                                                          monotonic_ms()))
