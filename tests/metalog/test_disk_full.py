"""A write the disk refuses fails the request: the client gets an error, never a false success,
and the controller resigns, as a quorum's leader does (a single voter is a quorum of one).

The limit is real: the controller process runs with RLIMIT_FSIZE (and SIGXFSZ ignored), so the
kernel refuses with EFBIG any write that would grow the segment past the limit, exactly as a
full disk refuses with ENOSPC.
"""

from __future__ import annotations

import re
from datetime import datetime

from protocol.error_codes import Error
from tests.support.metalog import (
    CREATE_TOPICS_V, LimitedController, active_brokers, batch_positions, create_topic, create_topics_request,
    load_data_dir, metadata_topics, process_rlimit_fsize, segment_paths)
from tests.support.wire import HEARTBEAT_V, REGISTRATION_V, connect, heartbeat_request, registration_request

# No periodic NoOpRecord: the log must fill up with registrations alone, whose sizes the test knows.
# The election timeout keeps the resigned voter from standing again while the test looks at it.
PROPS = {"broker.session.timeout.ms": "120000", "metadata.max.idle.interval.ms": "0",
         "controller.quorum.election.timeout.ms": "600000"}
LIMIT = 48 * 1024  # bytes any one file of the process may reach
# A failed snapshot's log line: its time, and how long the controller says it will wait.
SNAPSHOT_FAILED = re.compile(r"^(\S+ \S+) ERROR .*snapshot \S+ failed: .*; trying again in (\d+) s$", re.M)


def test_writes_past_a_file_size_limit_fail_and_leave_nothing_behind(tmp_path):
    # The limit binds the controller's stderr file too: INFO lines for each registration would
    # fill it before the log, so only warnings and errors are written.
    controller = LimitedController(tmp_path / "controller", PROPS, server_args=["--log-level", "WARNING"])
    controller.file_size_limit = LIMIT
    try:
        controller.start()
        assert process_rlimit_fsize(controller.pid) == LIMIT
        with connect(controller) as client:
            epochs = active_brokers(client, controller.cluster_id, [1])
            create_topic(client, "before", 2)
            # Registrations of identical size, one at a time, until the log is full.
            acked: dict[int, int] = {}
            broker_id = 1000
            while True:
                response = client.request(registration_request(controller.cluster_id, broker_id), REGISTRATION_V)
                if response.error_code != Error.NONE:
                    break
                acked[broker_id] = response.broker_epoch
                broker_id += 1
                assert broker_id < 2000, "the file size limit never bit"
            assert response.error_code == Error.NOT_CONTROLLER
            first_failed = broker_id
            [segment] = segment_paths(controller.data_dir)
            size = segment.stat().st_size
            last_batch = batch_positions(segment.read_bytes())[-1][1]
            assert size <= LIMIT < size + last_batch + 16, (size, last_batch)

            # It has resigned: every write after the limit is refused the same way, one at a time ...
            failed = [first_failed]
            for broker_id in range(first_failed + 1, first_failed + 21):
                response = client.request(registration_request(controller.cluster_id, broker_id), REGISTRATION_V)
                assert response.error_code == Error.NOT_CONTROLLER, response
                failed.append(broker_id)
            # ... pipelined, so that they are committed as one group ...
            pipelined = list(range(first_failed + 21, first_failed + 61))
            ids = [client.send(registration_request(controller.cluster_id, b), REGISTRATION_V) for b in pipelined]
            for correlation_id in ids:
                response = client.receive(62, REGISTRATION_V, correlation_id)
                assert response.error_code == Error.NOT_CONTROLLER, response
            failed += pipelined
            # ... and for every kind of write: a topic creation reports it per topic.
            created = client.request(create_topics_request(("after", 3)), CREATE_TOPICS_V)
            assert [t.error_code for t in created.topics] == [Error.NOT_CONTROLLER]

            # What the controller now shows is what the log holds: none of the failed changes.
            assert set(metadata_topics(client)) == {"before"}
            # A standby serves no broker: the live one looks for the active controller.
            assert client.request(heartbeat_request(1, epochs[1]), HEARTBEAT_V).error_code == Error.NOT_CONTROLLER
            assert segment.stat().st_size == size, "a failed write was left in the segment"
        assert "File too large" in controller.stderr_text()
        assert "Traceback" not in controller.stderr_text()
        controller.stop()

        # Without the limit: exactly the answered changes, and the log takes writes again.
        controller.file_size_limit = None
        controller.start()
        assert process_rlimit_fsize(controller.pid) == -1
        assert "truncating" not in controller.stderr_text()
        with connect(controller) as client:
            assert set(metadata_topics(client)) == {"before"}
            response = client.request(registration_request(controller.cluster_id, first_failed), REGISTRATION_V)
            assert response.error_code == Error.NONE
            create_topic(client, "after", 3)
        controller.stop()
        qc = load_data_dir(controller.data_dir)
        registered = {b.broker_id: b.epoch for b in qc.cluster.brokers.values()}
        assert registered == {1: qc.cluster.brokers[1].epoch, **acked,
                              first_failed: qc.cluster.brokers[first_failed].epoch}
        assert not set(failed[1:]) & set(registered)
        assert set(qc.replication.names) == {"before", "after"}
    finally:
        controller.stop()



def test_a_snapshot_that_cannot_be_written_is_retried_with_backoff(tmp_path):
    # Segments roll long before the limit; a snapshot of the whole state is larger than it.
    controller = LimitedController(tmp_path / "controller", {
        "broker.session.timeout.ms": "120000", "metadata.max.idle.interval.ms": "100",
        "metadata.log.segment.bytes": "4096", "metadata.log.max.record.bytes.between.snapshots": "4096"})
    controller.file_size_limit = 16 * 1024
    try:
        controller.start()
        with connect(controller) as client:
            active_brokers(client, controller.cluster_id, [1])
            for i in range(16):
                create_topic(client, f"t{i}", 20)
        controller.wait_for_stderr(r"trying again in 4 s", timeout=120)
        # A no-op commits every 100 ms: without the backoff each commit would try again. The
        # log's own timestamps show each try waited at least the time announced before it (a
        # busy machine only stretches the gaps).
        failures = [(datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f"), int(m[2]))
                    for m in SNAPSHOT_FAILED.finditer(controller.stderr_text())]
        assert [backoff for _, backoff in failures[:3]] == [1, 2, 4], controller.stderr_text()[-2000:]
        for (before, backoff), (after, _) in zip(failures, failures[1:3]):
            assert (after - before).total_seconds() >= backoff - 0.01, failures
    finally:
        controller.stop()
