"""A controller and five test broker processes on loopback, driven the way an operator would.

The controller runs with a 3 s session timeout and 500 ms heartbeats; the brokers heartbeat at
the same pace and their simulated followers catch up within about half a second, and never
fall behind by themselves, so every ISR change seen here comes from the lifecycle under test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.support.observe import partitions, unfenced_brokers, wait_until
from tests.support.wire import connect

SESSION = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}
BROKER_ARGS = ("--heartbeat-interval-ms", "500", "--mean-catch-up-s", "0.5", "--seed", "11")
IDS = (1, 2, 3, 4, 5)
TOPICS = {"orders": 6, "payments": 4}
ISR_CHANGE = re.compile(r"ISR \[([\d, ]*)\] -> \[([\d, ]*)\]")


def create_topics(controller, topics: dict[str, int]) -> None:
    """Through kafka-python's admin client, replication factor 3."""
    admin = KafkaAdminClient(bootstrap_servers=f"{controller.host}:{controller.port}",
                             client_id="kraftwire-broker-test", request_timeout_ms=10000)
    try:
        result = admin.create_topics([NewTopic(name, count, 3) for name, count in topics.items()])
    finally:
        admin.close()
    assert [t["error_code"] for t in result["topics"]] == [0] * len(topics), result


def layout(admin) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    return {(name, p): state for name in TOPICS for p, state in partitions(admin, name).items()}


def leaders(admin) -> dict[int, int]:
    """How many partitions each broker leads."""
    counts: dict[int, int] = {}
    for leader, _, _ in layout(admin).values():
        counts[leader] = counts.get(leader, 0) + 1
    return counts


def isr_full(admin) -> bool:
    return all(sorted(replicas) == isr for _, isr, replicas in layout(admin).values())


@pytest.mark.controller_properties(SESSION)
def test_kill_restart_and_controlled_shutdown(controller, broker_factory, tmp_path):
    state = {i: tmp_path / f"state-{i}" for i in IDS}
    brokers = {i: broker_factory("--node-id", str(i), "--state-dir", str(state[i]), *BROKER_ARGS) for i in IDS}
    for i, b in brokers.items():
        b.wait_for_state(i, "ACTIVE")
    admin = connect(controller)
    wait_until(lambda: unfenced_brokers(admin) == list(IDS), 10, "all five brokers unfenced")
    create_topics(controller, TOPICS)
    assert isr_full(admin)

    # --- SIGKILL a leader: after the session timeout its leaderships move ----------------------
    victim = max(IDS, key=lambda i: leaders(admin).get(i, 0))
    led = [key for key, (leader, _, _) in layout(admin).items() if leader == victim]
    assert led, "the victim must lead something"
    killed_at = time.monotonic()
    brokers[victim].kill9()
    wait_until(lambda: leaders(admin).get(victim, 0) == 0, 15, f"broker {victim}'s leaderships to move")
    moved_after = time.monotonic() - killed_at
    # Its last heartbeat was at most 500 ms before the kill; the lease lasts 3 s.
    assert moved_after >= 2.0, f"leadership moved {moved_after:.2f} s after the kill, before the lease expired"
    assert victim not in unfenced_brokers(admin)
    after_kill = layout(admin)
    for key in led:
        leader, isr, replicas = after_kill[key]
        assert leader in replicas and leader != victim and leader in isr, (key, after_kill[key])
    assert all(victim not in isr for _, isr, _ in after_kill.values())
    controller.wait_for_stderr(rf"fencing brokers \[{victim}\]")

    # --- restart it: unfenced again, and its leaders take it back into their ISRs -------------
    brokers[victim].start()
    wait_until(lambda: victim in unfenced_brokers(admin), 15, f"broker {victim} unfenced again")
    wait_until(lambda: isr_full(admin), 20, f"broker {victim} back in every ISR")
    moves = brokers[victim].transitions(victim)
    assert [(a, b) for _, a, b, _ in moves[-2:]] == [("INITIAL", "FENCED"), ("FENCED", "ACTIVE")]
    assert "no clean shutdown before" in moves[-2][3]  # killed: no clean-shutdown record
    grew = [m for i in IDS if i != victim for m in ISR_CHANGE.finditer(brokers[i].stderr())
            if str(victim) not in m[1].split(", ") and str(victim) in m[2].split(", ")]
    assert grew, "the leaders should have logged the ISRs growing back"

    # --- SIGTERM a leader: controlled shutdown, never a leaderless partition -------------------
    target = max((i for i in IDS if i != victim), key=lambda i: leaders(admin).get(i, 0))
    assert leaders(admin).get(target, 0) > 0
    proc = brokers[target]
    os.kill(proc.pid, signal.SIGTERM)
    samples = []
    deadline = time.monotonic() + 20
    while proc.running and time.monotonic() < deadline:
        samples.append(layout(admin))
    code = proc.signal_and_wait(signal.SIGTERM)
    for _ in range(5):
        samples.append(layout(admin))
    assert code == 0, proc.stderr()[-2000:]
    leaderless = [(key, s[key]) for s in samples for key in s if s[key][0] == -1]
    assert not leaderless, f"leaderless partitions during the controlled shutdown: {leaderless[:5]}"
    assert len(samples) > 5
    final = samples[-1]
    assert target not in unfenced_brokers(admin)
    assert all(leader != target and target not in isr for leader, isr, _ in final.values())
    moves = proc.transitions(target)
    assert [(a, b) for _, a, b, _ in moves[-2:]] == [("ACTIVE", "PENDING_SHUTDOWN"),
                                                     ("PENDING_SHUTDOWN", "SHUTDOWN")]
    recorded = json.loads((state[target] / ".kafka_cleanshutdown").read_text())["brokerEpoch"]
    assert f"registered with broker epoch {recorded} " in proc.stderr()
    assert "SHUTDOWN 1" in proc.stdout().splitlines()[-1]

    # --- and back: the next incarnation registers with the recorded epoch ---------------------
    proc.start()
    wait_until(lambda: target in unfenced_brokers(admin), 15, f"broker {target} unfenced again")
    assert f"after a clean shutdown at epoch {recorded}" in proc.transitions(target)[-2][3]
    assert not (state[target] / ".kafka_cleanshutdown").exists()
    wait_until(lambda: isr_full(admin), 20, "every ISR full again")
    admin.close()


@pytest.mark.controller_properties({**SESSION, "unclean.leader.election.enable": "true"})
def test_a_leader_elected_uncleanly_reports_recovered(controller, broker_factory, tmp_path):
    brokers = {i: broker_factory("--node-id", str(i), "--state-dir", str(tmp_path / f"state-{i}"), *BROKER_ARGS)
               for i in (1, 2, 3)}
    for i, b in brokers.items():
        b.wait_for_state(i, "ACTIVE")
    admin = connect(controller)
    wait_until(lambda: unfenced_brokers(admin) == [1, 2, 3], 10, "three brokers unfenced")
    create_topics(controller, {"ledger": 1})
    leader, isr, replicas = partitions(admin, "ledger")[0]
    others = [r for r in replicas if r != leader]
    # Only the leader stays in sync, then it dies too: the partition waits for it, leaderless.
    for r in others:
        brokers[r].kill9()
    wait_until(lambda: partitions(admin, "ledger")[0][1] == [leader], 15, "the ISR to shrink to the leader")
    brokers[leader].kill9()
    wait_until(lambda: partitions(admin, "ledger")[0][0] == -1, 15, "the partition to go leaderless")
    # A replica that was out of the ISR comes back: with unclean election allowed it leads,
    # recovering, and tells the controller once it has recovered.
    comeback = others[0]
    brokers[comeback].start()
    wait_until(lambda: partitions(admin, "ledger")[0][0] == comeback, 15, f"broker {comeback} to lead")
    wait_until(lambda: "ledger-0 leader recovery state RECOVERED" in brokers[comeback].stderr(), 15,
               "the new leader to report RECOVERED")
    brokers[others[1]].start()
    wait_until(lambda: partitions(admin, "ledger")[0][1] == sorted(others), 20,
               "the ISR to grow once the leader has recovered")
    admin.close()
