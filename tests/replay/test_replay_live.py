"""Real traffic on loopback, captured by the controller itself (--capture-file): kafka-python's
admin client and simulated brokers against a controller process, then the capture read by the
decoder, by tshark where installed, and by the Spark job in local mode; and re-sent."""
from __future__ import annotations

import collections
import re
import subprocess
import sys

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.replay import browser, tshark
from tests.support.envelope import create_topics, forward
from tests.support.wire import WireBroker, api_versions, connect, raw_socket
from tools.controller_process import ROOT, ControllerProcess
from tools.processes import free_port
from tools.replay import job, report, send
from tools.replay.decode import validate

TOPICS = {"orders": 3, "payments": 1, "audit": 2}
HEARTBEATS = 4
FORWARDED = "forwarded"
CREATE_TOPICS, DESCRIBE_CLUSTER, API_VERSIONS, METADATA, REGISTRATION, HEARTBEAT = 19, 60, 18, 3, 62, 63


class CapturingController(ControllerProcess):
    """A controller process started with --capture-file."""

    def __init__(self, workdir, capture_file, props: dict[str, str] | None = None) -> None:
        # By default its brokers are simulated and serve no clients: the admin client's
        # requests must all come back to the controller.
        super().__init__(workdir, {"kraftwire.metadata.nodes": "controller"} if props is None else props)
        self.capture_file = capture_file

    def _launch(self, args: list[str]) -> None:
        super()._launch([*args, "--capture-file", str(self.capture_file)])


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The controller (stopped, so its capture is complete) and the admin client's traffic."""
    workdir = tmp_path_factory.mktemp("live")
    controller = CapturingController(workdir, workdir / "controller.pcapng")
    controller.start()
    # Still connected when the controller stops: its capture must end that connection too.
    lingering = connect(controller)
    try:
        assert api_versions(lingering).error_code == 0
        brokers = [WireBroker(controller, broker_id) for broker_id in (1, 2)]
        for broker in brokers:
            assert broker.register().error_code == 0
        for _ in range(HEARTBEATS):
            for broker in brokers:
                assert broker.heartbeat().error_code == 0
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{controller.port}", client_id="replay-admin",
                                 request_timeout_ms=10000)
        try:
            for name, partitions in TOPICS.items():
                admin.create_topics([NewTopic(name, partitions, 1)])
            described = admin.describe_cluster()
            listed = admin.list_topics()
        finally:
            admin.close()
        # A broker forwards a client's CreateTopics in an Envelope: its answer carries a topic id.
        with raw_socket(controller) as forwarder:
            assert forward(forwarder, create_topics(FORWARDED, partitions=2), 77).topics[0].error_code == 0
        for broker in brokers:
            broker.close()
    finally:
        assert controller.stop() == 0
        lingering.close()
    assert described["cluster_id"] == controller.cluster_id and set(TOPICS) <= set(listed)
    return controller


def requests_per_api(frames) -> collections.Counter:
    return collections.Counter(f.api_key for f in frames if f.direction == "request")


def test_the_controller_capture_decodes_cleanly_with_the_counts_sent(live):
    result = validate(live.capture_file)
    assert result.violations == []
    assert {f.status for f in result.frames} == {"ok"}
    sent = requests_per_api(result.frames)
    assert sent[CREATE_TOPICS] == len(TOPICS)
    assert sent[REGISTRATION] == 2
    assert sent[HEARTBEAT] == 2 * HEARTBEATS
    assert sent[DESCRIBE_CLUSTER] == 1
    assert sent[API_VERSIONS] >= 1 and sent[METADATA] >= 1
    answered = collections.Counter(f.api_key for f in result.frames if f.direction == "response")
    assert answered == sent
    assert all(flow.kafka and flow.unanswered == 0 and flow.end_reason == "fin" for flow in result.flows)
    admin_flows = [flow for flow in result.flows if flow.client_ids == ["replay-admin"]]
    assert admin_flows and all(flow.server == f"127.0.0.1:{live.port}" for flow in result.flows)


def test_tshark_counts_the_same_frames(live):
    tshark.require()
    result = validate(live.capture_file)
    theirs = tshark.read(live.capture_file, live.port)
    assert sum(theirs.messages.values()) == len(result.frames)
    assert theirs.requests_per_api == requests_per_api(result.frames)


def test_the_spark_job_on_real_and_broken_captures(live, spark, tmp_path):
    good = str(live.capture_file)
    data = live.capture_file.read_bytes()
    empty, truncated, garbage = tmp_path / "empty.pcapng", tmp_path / "truncated.pcapng", tmp_path / "garbage.pcap"
    empty.write_bytes(b"")
    truncated.write_bytes(data[: len(data) // 2])
    garbage.write_bytes(b"\x00" * 1000)
    out = tmp_path / "out"

    figures = job.validate([good, str(empty), str(truncated), str(garbage)], str(out), context=spark.sparkContext)

    frames = spark.read.parquet(str(out / "frames"))
    violations = spark.read.parquet(str(out / "violations"))
    flows = spark.read.parquet(str(out / "flows"))
    expected = requests_per_api(validate(good).frames)
    ours = {r.api_key: r["count"] for r in frames.where(f"capture = '{good}' and direction = 'request'")
            .groupBy("api_key").count().collect()}
    assert ours == dict(expected)
    assert violations.where(f"capture = '{good}'").count() == 0
    assert frames.where(f"capture = '{good}' and size(violations) > 0").count() == 0
    assert flows.where(f"capture = '{good}'").count() == len(validate(good).flows)
    by_capture = {(r.capture, r.rule) for r in violations.select("capture", "rule").distinct().collect()}
    assert (str(empty), "empty_file") in by_capture
    assert (str(truncated), "truncated_file") in by_capture
    assert (str(garbage), "corrupt_capture") in by_capture
    # The half of the capture before the cut was still read.
    assert frames.where(f"capture = '{truncated}'").count() > 0
    assert figures["totals"]["captures"] == 4
    assert {a["api_name"] for a in figures["apis"]} >= {"CreateTopics", "BrokerHeartbeat", "ApiVersions"}
    assert {r["api_name"] for r in figures["latency"]} >= {"CreateTopics", "BrokerHeartbeat"}
    assert figures["captures"][0] | {"bytes": None} == dict(
        capture=good, bytes=None, flows=len(validate(good).flows), kafka_flows=len(validate(good).flows),
        frames=frames.where(f"capture = '{good}'").count(), requests=sum(expected.values()), unanswered=0, errors=0,
        warnings=0)
    assert figures["captures"][1]["warnings"] == 1 and figures["captures"][1]["frames"] == 0  # the empty file
    # The cut capture lost answers to requests it still holds.
    assert sum(a["unanswered"] for a in figures["apis"]) > 0
    # Brokers heartbeat every 2 s: the timeline's bins are whole multiples of that.
    assert figures["timeline"]["bin_ns"] % 2_000_000_000 == 0
    page = (out / "report.html").read_text()
    assert "Requests per second per API" in page and "Latency distribution per API" in page
    # Self-contained: Plotly's script is inline, and no script or style is fetched from anywhere.
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", page)


def test_the_report_renders_every_chart_in_chromium(live, spark, tmp_path):
    browser.require()
    out = tmp_path / "out"
    job.validate([str(live.capture_file)], str(out), context=spark.sparkContext)
    rendered = browser.render(out / "report.html", report.CHARTS)
    assert rendered.console == []
    # One trace per API that the capture holds requests (rates) or answers (latency) of.
    assert rendered.charts["rates"] >= 5 and rendered.charts["latency"] >= 5


def test_send_replays_the_capture_and_reports_what_changed(live, tmp_path):
    # The same controller again, on the same data: the topics exist now.
    captured = live.capture_file
    live.capture_file = tmp_path / "second.pcapng"
    live.start()
    try:
        report = send.send(str(captured), live.host, live.port)
    finally:
        live.stop()
        live.capture_file = captured
    assert report.failures == []
    assert report.flows > 0 and report.sent == report.compared
    changed = {(d.api, d.path) for d in report.differences}
    assert ("CreateTopics v7", "topics[0].error_code") in changed  # TOPIC_ALREADY_EXISTS now
    # The same server advertises the same versions; only state (the features' epoch) moved on.
    assert {path for api, path in changed if api.startswith("ApiVersions")} <= {"finalized_features_epoch"}
    # The forwarded CreateTopics is compared inside its Envelope, field by field.
    assert ("Envelope v0", "response_data.topics[0].error_code") in changed
    summary = send.render(report)
    assert "Envelope v0" in summary and "response_data.topics[].error_code" in summary
    assert "(--verbose lists every difference)" in summary
    assert len(send.render(report, verbose=True).splitlines()) > len(report.differences)


def test_clean_send_to_a_fresh_cluster_finds_no_difference(live, tmp_path):
    # Another controller, another data directory: another cluster id, other broker epochs.
    fresh = ControllerProcess(tmp_path / "fresh", {"kraftwire.metadata.nodes": "controller"})
    fresh.start()
    try:
        assert fresh.cluster_id != live.cluster_id
        result = subprocess.run([sys.executable, "-m", "tools.replay", "send", str(live.capture_file),
                                 "--target", f"{fresh.host}:{fresh.port}", "--clean"],
                                cwd=ROOT, capture_output=True, timeout=120)
    finally:
        assert fresh.stop() == 0
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    assert re.match(r"\d+ flows, (\d+) requests sent, \1 answers compared, 0 differences, 0 failed flows", out), out


def test_send_to_nothing_says_so_in_one_line(live):
    result = subprocess.run([sys.executable, "-m", "tools.replay", "send", str(live.capture_file),
                             "--target", f"127.0.0.1:{free_port()}", "--clean"], cwd=ROOT, capture_output=True,
                            timeout=60)
    assert result.returncode == 2
    assert result.stdout == b"" and len(result.stderr.decode().strip().splitlines()) == 1
    assert "Traceback" not in result.stderr.decode()


def test_clean_send_of_the_walkthroughs_capture_finds_no_difference(tmp_path):
    """The README's walkthrough: a test broker fetches the metadata log and forwards a
    client's CreateTopics. Re-sent to a fresh controller, the broker's Fetches land in another
    log (other epochs and offsets): where they diverge is the fresh log's, not a difference."""
    from tests.support.processes import BrokerProcess

    capture = tmp_path / "walkthrough.pcapng"
    controller = CapturingController(tmp_path / "controller", capture, props={})
    controller.start()
    port = free_port()
    broker = BrokerProcess(tmp_path / "broker", ["--controller", f"{controller.host}:{controller.port}",
                                                 "--node-id", "1", "--port", str(port),
                                                 "--state-dir", str(tmp_path / "state"),
                                                 "--heartbeat-interval-ms", "500"])
    try:
        broker.start().wait_for_state(1, "ACTIVE", timeout=60)
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=15000)
        try:
            assert admin.create_topics([NewTopic("orders", 2, 1)])["topics"][0]["error_code"] == 0
        finally:
            admin.close()
    finally:
        broker.kill9()
        assert controller.stop() == 0
    fresh = ControllerProcess(tmp_path / "fresh")
    fresh.start()
    try:
        result = subprocess.run([sys.executable, "-m", "tools.replay", "send", str(capture),
                                 "--target", f"{fresh.host}:{fresh.port}", "--clean", "--verbose"],
                                cwd=ROOT, capture_output=True, timeout=120)
    finally:
        assert fresh.stop() == 0
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    assert re.match(r"\d+ flows, (\d+) requests sent, \d+ answers compared, 0 differences, 0 failed flows", out), out
