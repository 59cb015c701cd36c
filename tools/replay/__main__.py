"""python -m tools.replay {validate,send} ...

    validate CAPTURES... --out DIR [--master URL] [--ports 9092,9093]
        Decode every Kafka frame of the captures with Spark and judge it by the rules
        (tools.replay.rules); writes Parquet tables frames/, violations/, flows/ and
        report.html under DIR, and prints a summary and the report's path; Spark's own log
        goes to DIR/spark.log. Exit status: 0 when no rule of severity "error" was broken,
        1 when one was, 2 for a capture that does not exist or is not pcap or pcapng, and for
        a missing PySpark or Java runtime (all checked before Spark starts), 3 when no Kafka
        flow was found. --figures FILE also writes the summary as JSON.
    send CAPTURE --target HOST:PORT[,HOST:PORT...] [--ports ...] [--ignore FIELD ...] [--clean] [--verbose]
        Re-send each flow's requests, in order, on a fresh connection per flow (to the active
        controller when several addresses of a quorum are given), and report the responses
        that differ from the captured ones, counted by API and field (each one with --verbose;
        forwarded answers inside Envelopes field by field); --clean replays against another
        cluster: time order across flows, the target's cluster id and broker epochs mapped
        in, and the fields a fresh cluster answers differently not compared. Exit status 0
        without differences, 1 with some, 2 when the capture is not one or the target cannot
        be reached.

On a cluster, the same job through spark-submit (the packages are shipped to the executors;
the capture paths must be readable by them):

    PYTHONPATH=. spark-submit --master URL tools/replay/__main__.py validate CAPTURES... --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import sys

NO_KAFKA = 3


def _ports(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p]
    except ValueError:
        raise argparse.ArgumentTypeError(f"ports must be comma-separated numbers, not {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.replay", description="validate and replay Kafka captures")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="validate captures with Spark")
    validate.add_argument("captures", nargs="+", help="pcap or pcapng files")
    validate.add_argument("--out", required=True, help="directory for the tables and report.html")
    validate.add_argument("--master", help="Spark master URL (default: local[*], or spark-submit's)")
    validate.add_argument("--ports", type=_ports, default=[],
                          help="Kafka server ports; without them any flow with a frame that parses as a request")
    validate.add_argument("--figures", help="also write the summary's figures to this file, as JSON")
    validate.add_argument("--quiet", action="store_true", help="no progress line while the job runs")
    send = commands.add_parser("send", help="re-send captured requests and compare the responses")
    send.add_argument("capture")
    send.add_argument("--target", required=True,
                      help="HOST:PORT of the server to send to, or of several controllers: the active one is used")
    send.add_argument("--ports", type=_ports, default=[])
    send.add_argument("--ignore", action="append", default=[],
                      help="a field name whose values may differ (repeatable); throttle_time_ms always may")
    send.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each response")
    send.add_argument("--clean", action="store_true",
                      help="compare against another cluster: map cluster id and broker epochs, skip fields that differ")
    send.add_argument("--verbose", action="store_true",
                      help="list every difference, not only their counts by API and field")
    args = parser.parse_args(argv)

    if args.command == "validate":
        problem = _unusable(args.captures, args.out) or _no_spark()
        if problem:
            print(f"python -m tools.replay validate: {problem}", file=sys.stderr)
            return 2
        from tools.replay import job

        figures = job.validate(args.captures, args.out, args.master, args.ports, quiet=args.quiet)
        print(f"report: {os.path.join(args.out, 'report.html')}")
        if args.figures:
            with open(args.figures, "w", encoding="utf-8") as out:
                json.dump(figures, out)
        if not figures["totals"]["kafka_flows"]:
            print("no Kafka flow found: is the server's port among --ports, and is the capture of its traffic?",
                  file=sys.stderr)
            return NO_KAFKA
        return 1 if figures["totals"].get("error") else 0
    from server.client_connection import ConnectionLost
    from tools.active_controller import NoActiveController, locate
    from tools.replay import send as resend

    problem = _unusable([args.capture], None)
    if problem:
        print(f"python -m tools.replay send: {problem}", file=sys.stderr)
        return 2
    try:
        host, port = locate(args.target, args.timeout)
    except ValueError:
        print(f"python -m tools.replay send: --target must be HOST:PORT[,HOST:PORT...], not {args.target!r}",
              file=sys.stderr)
        return 2
    except (NoActiveController, ConnectionLost) as exc:
        print(f"python -m tools.replay send: {args.target}: {exc}", file=sys.stderr)
        return 2
    try:
        report = resend.send(args.capture, host, port, args.ports, args.ignore, args.timeout, args.clean)
    except OSError as exc:  # the target itself: refused, unreachable, closed while asked its cluster id
        print(f"python -m tools.replay send: {args.target}: {exc}", file=sys.stderr)
        return 2
    print(resend.render(report, args.verbose))
    return 1 if report.differences or report.failures else 0


def _no_spark() -> str | None:
    """What the validation needs that is not installed, found before Spark starts: PySpark
    (the ``replay`` extra, which ``make run`` leaves out) and the Java runtime Spark runs on."""
    import importlib.util
    import shutil

    try:
        found = importlib.util.find_spec("pyspark") is not None
    except ImportError:  # a finder that refuses the name rather than not finding it
        found = False
    if not found:
        return "PySpark is not installed; install the replay extra: pip install -e '.[replay]'"
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if java is None or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no java on PATH and JAVA_HOME unset"
        return f"Spark needs a Java runtime ({where}); install a JDK 17, e.g. apt-get install openjdk-17-jre-headless"
    return None


def _unusable(captures: list[str], out: str | None) -> str | None:
    """Why the job cannot start, found before Spark does: a missing capture or output folder
    in the way. Paths with another scheme than file: are the executors' filesystem's business."""
    from tools.replay.capture import format_problem
    from tools.replay.paths import local_path

    if out is not None and os.path.exists(out) and not os.path.isdir(out):
        return f"--out {out} is a file, not a folder"
    for path in captures:
        local = local_path(path)
        if "://" in local:
            continue
        if not os.path.exists(local):
            return f"no such capture file: {path}"
        if not os.path.isfile(local):
            return f"not a capture file: {path}"
        try:
            with open(local, "rb") as capture:
                bad = format_problem(capture.read(4))
        except OSError as exc:
            return f"cannot read the capture file: {path}: {exc.strerror}"
        if bad is not None:
            return f"not a capture file: {path}: {bad.detail}"
    return None


if __name__ == "__main__":
    sys.exit(main())
