"""Kill -9 during a burst of writes: what was answered survives, nothing is half applied."""

from __future__ import annotations

import threading

from protocol.client import ConnectionClosed
from protocol.error_codes import Error
from tests.support.metalog import (
    CREATE_TOPICS_V, active_brokers, create_topics_request, load_data_dir, metadata_topics, metadata_view,
    state_of)
from tests.support.wire import REGISTRATION_V, connect, registration_request
from tools.processes import poll

TOPIC_THREADS = 3
TOPICS_PER_THREAD = 250
REGISTRATIONS = 250  # 3 x 250 topic creations + 250 registrations = 1,000 writes
WINDOW = 16  # requests each client keeps in flight
KILL_AFTER = 300  # answered writes before the kill


def partitions_of(thread: int, i: int) -> int:
    return 1 + (thread * 7 + i) % 6


class Burst:
    def __init__(self, controller) -> None:
        self.controller = controller
        self.lock = threading.Lock()
        self.answered = 0
        self.kill_now = threading.Event()
        self.sent_topics: dict[str, int] = {}  # name -> partitions asked for
        self.acked_topics: dict[str, bytes] = {}  # name -> topic id answered
        self.failed_topics: set[str] = set()  # answered with an error
        self.sent_brokers: set[int] = set()
        self.acked_brokers: dict[int, tuple[bytes, int]] = {}  # id -> (incarnation, epoch)
        self.errors: list[BaseException] = []

    def _count(self) -> None:
        with self.lock:
            self.answered += 1
            if self.answered >= KILL_AFTER:
                self.kill_now.set()

    def _pipeline(self, requests: list, on_answer) -> None:
        """Send ``requests`` keeping WINDOW in flight; stop quietly when the server dies."""
        try:
            with connect(self.controller) as client:
                pending = []
                it = iter(requests)
                done = False
                while not done or pending:
                    while not done and len(pending) < WINDOW:
                        item = next(it, None)
                        if item is None:
                            done = True
                            break
                        request, version, key = item
                        pending.append((client.send(request, version), request, version, key))
                    if pending:
                        correlation_id, request, version, key = pending.pop(0)
                        response = client.receive(request.API_KEY, version, correlation_id)
                        on_answer(key, response)
                        self._count()
        except (ConnectionClosed, ConnectionError, OSError):
            pass  # the kill: every request still pending stays unanswered
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def topics(self, thread: int) -> None:
        requests = []
        for i in range(TOPICS_PER_THREAD):
            name = f"burst-{thread}-{i:03d}"
            count = partitions_of(thread, i)
            self.sent_topics[name] = count
            requests.append((create_topics_request((name, count)), CREATE_TOPICS_V, name))

        def answer(name, response) -> None:
            [result] = response.topics
            if result.error_code == Error.NONE:
                self.acked_topics[name] = result.topic_id
            else:
                self.failed_topics.add(name)

        self._pipeline(requests, answer)

    def registrations(self) -> None:
        incarnations = {}
        requests = []
        for broker_id in range(100, 100 + REGISTRATIONS):
            self.sent_brokers.add(broker_id)
            request = registration_request(self.controller.cluster_id, broker_id)
            incarnations[broker_id] = request.incarnation_id
            requests.append((request, REGISTRATION_V, broker_id))

        def answer(broker_id, response) -> None:
            if response.error_code == Error.NONE:
                self.acked_brokers[broker_id] = (incarnations[broker_id], response.broker_epoch)

        self._pipeline(requests, answer)


def test_kill_9_during_a_burst_of_1000_writes(controller_factory):
    controller = controller_factory({"broker.session.timeout.ms": "120000"})
    with connect(controller) as admin:
        active_brokers(admin, controller.cluster_id, [1, 2, 3])

    burst = Burst(controller)
    threads = [threading.Thread(target=burst.topics, args=(t,)) for t in range(TOPIC_THREADS)]
    threads.append(threading.Thread(target=burst.registrations))
    for t in threads:
        t.start()
    assert burst.kill_now.wait(60), "the burst never got going"
    controller.kill9()
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    assert not burst.errors, burst.errors
    assert not burst.failed_topics, f"topic creations answered with an error: {sorted(burst.failed_topics)[:5]}"
    answered = len(burst.acked_topics) + len(burst.acked_brokers)
    sent = len(burst.sent_topics) + len(burst.sent_brokers)
    assert sent == 1000
    assert KILL_AFTER <= answered < sent, "the kill must land in the middle of the burst"

    controller.start()
    assert controller.stderr_text().count("Traceback") == 0
    with connect(controller) as admin:
        seen = metadata_topics(admin)
        topics = {name: parts for name, parts in seen.items() if name.startswith("burst-")}
        # Every answered creation is there, with the id it was answered with ...
        missing = sorted(set(burst.acked_topics) - set(topics))
        assert not missing, f"{len(missing)} answered topics lost, e.g. {missing[:5]}"
        # ... and every topic there is whole: exactly the partitions asked for, 0..n-1.
        for name, parts in topics.items():
            assert name in burst.sent_topics
            assert [p[0] for p in parts] == list(range(burst.sent_topics[name])), (name, parts)
            assert all(len(p[2]) == 1 and p[1] == p[2][0] for p in parts), (name, parts)
    controller.stop()

    # The log itself, replayed: the same topics, ids as answered, and the registrations.
    qc = load_data_dir(controller.data_dir)
    assert {n: p for n, p in metadata_view(qc).items() if n.startswith("burst-")} == topics
    names = qc.replication.names
    for name, topic_id in burst.acked_topics.items():
        assert names[name] == topic_id
    brokers = qc.cluster.brokers
    for broker_id, (incarnation, epoch) in burst.acked_brokers.items():
        assert broker_id in brokers, f"answered registration of broker {broker_id} lost"
        assert (brokers[broker_id].incarnation_id, brokers[broker_id].epoch) == (incarnation, epoch)
    assert set(brokers) - {1, 2, 3} <= burst.sent_brokers
    # The restarted controller served the same state it had logged: restart once more and
    # compare a fresh replay with itself after a clean shutdown.
    controller.start()
    controller.stop()
    assert state_of(load_data_dir(controller.data_dir)) == state_of(qc)
    poll(lambda: not controller.running, 60, message="the controller to stop")
