"""python -m server [--config server.properties]

Without --config it runs the embedded default: a single-voter controller on 127.0.0.1:9093
whose data lives in ./data/controller, formatted with a random cluster id on first start.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import resource
import signal
import socket
import sys
from dataclasses import replace
from pathlib import Path

from protocol.primitives import random_uuid, uuid_to_str
from server.config import ConfigError, ControllerConfig, embedded_config, load_config
from server.image.loader import LoadError
from server.log_setup import configure_logging
from server.metalog.lock import DirectoryLocks
from server.metalog.meta_properties import META_PROPERTIES, StorageError
from server.metalog.segments import LogCorruption
from server.network import bind

log = logging.getLogger("kraftwire")

EMBEDDED_DIR = Path("data/controller")


def _format_embedded(config: ControllerConfig) -> None:
    from server.metalog.formatting import format_dirs
    from server.metalog.bootstrap import DEFAULT_RELEASE

    data_dir = config.metadata_log_dir
    if not (data_dir / META_PROPERTIES).exists():
        cluster_id = uuid_to_str(random_uuid())
        format_dirs(config, cluster_id, DEFAULT_RELEASE)
        log.info("formatted %s for new cluster %s", data_dir, cluster_id)


def _with_flags(config: ControllerConfig, args: argparse.Namespace) -> ControllerConfig:
    """Flags given on the command line win over the config file's keys."""
    if args.metrics_port is not None:
        config = replace(config, metrics_port=args.metrics_port)
    if args.log_format is not None:
        config = replace(config, log_format=args.log_format)
    return config


def os_error_line(exc: OSError) -> str:
    """An operating-system failure at start-up as one line that says what to fix."""
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen: {exc.strerror or exc}; is another process using the port?"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full{where}: free space on the data directory's file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied{where}: the controller cannot read or write it"
    return f"{exc.strerror or exc}{where}"


def _raise_fd_limit() -> None:
    """Brokers and clients each hold a connection; the default 1024 descriptors is too few."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else 1 << 20
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def brokers_hint(config: ControllerConfig, host: str, port: int) -> str:
    """A static quorum's voters are not in its log, so a Kafka broker must be told them all
    (it finds the leader's endpoint among them); a dynamic quorum's are, and an address to
    start from is enough."""
    if config.voters:
        voters = {**config.voters, config.node_id: (host, port)} if config.node_id in config.voters else config.voters
        listed = ",".join(f"{node}@{h}:{p}" for node, (h, p) in sorted(voters.items()))
        return f"controller.quorum.voters={listed}"
    return f"controller.quorum.bootstrap.servers={','.join(f'{h}:{p}' for h, p in config.bootstrap_servers)}"


def clients_hint(config: ControllerConfig, host: str, port: int) -> str:
    if config.metadata_nodes == "controller":
        return f"bootstrap.servers={host}:{port} (every request is served here)"
    return (f"a broker, or bootstrap.servers={host}:{port}: Metadata names the live brokers, "
            f"so clients go on to them as from a Kafka broker")


async def serve(config: ControllerConfig, capture_file: Path | None = None, take_over_quorum: bool = False,
                sock: socket.socket | None = None) -> None:
    from server.app import ControllerServer

    server = ControllerServer(config, capture_file=capture_file, take_over_quorum=take_over_quorum)
    host, port = await server.start(sock)
    if not server.lone_voter:
        role = (f"a voter on {host}:{port} of the quorum {list(server.voters)}" if config.node_id in server.voters
                else f"an observer on {host}:{port} (not a voter yet: add it with python -m tools.metadata_quorum "
                     f"add-controller)")
        print(f"kraftwire controller {config.node_id} of cluster {server.cluster_id} is {role}\n  point brokers at: "
              f"{brokers_hint(config, host, port)}", flush=True)
    else:
        print(f"kraftwire controller {config.node_id} of cluster {server.cluster_id} is active on "
              f"{host}:{port}\n  point brokers at: {brokers_hint(config, host, port)}"
              f" (controller.listener.names={config.controller_listener.name})\n"
              f"  point clients at: {clients_hint(config, host, port)}", flush=True)
    if server.metrics_port is not None:
        print(f"  Prometheus metrics at: http://{host}:{server.metrics_port}/metrics", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, server.snapshots.request)
    await stop.wait()
    log.info("shutting down")
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description="kraftwire KRaft controller")
    parser.add_argument("--config", type=Path, help="a server.properties file with Kafka's config names")
    parser.add_argument("--data-dir", type=Path, default=EMBEDDED_DIR,
                        help="data directory of the embedded default (without --config)")
    parser.add_argument("--port", type=int, default=9093, help="port of the embedded default")
    parser.add_argument("--log-level", default="INFO", type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
    parser.add_argument("--log-format", choices=["text", "json"],
                        help="log lines as text or as JSON objects (default: kraftwire.log.format, else text)")
    parser.add_argument("--metrics-port", type=int,
                        help="serve Prometheus metrics on this port (default: kraftwire.metrics.port, else off)")
    parser.add_argument("--capture-file", type=Path,
                        help="write the server's own traffic to this pcapng file (read it with tools.replay)")
    parser.add_argument("--take-over-quorum", action="store_true",
                        help="start on a directory whose quorum had other voters, as its only voter "
                             "(stop the other voters first)")
    args = parser.parse_args(argv)
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        parser.error(f"--metrics-port must be 0..65535, got {args.metrics_port}")
    locks = DirectoryLocks()
    try:
        config = _with_flags(load_config(args.config) if args.config else embedded_config(args.data_dir, args.port),
                             args)
        configure_logging(args.log_level, config.log_format)
        # The ports first: a port in use stops start-up before anything is created or written.
        listener = config.controller_listener
        sock = bind(listener.host, listener.port)
        if config.metrics_port is not None:
            from server.metrics.controller_metrics import check_port

            check_port(listener.host, config.metrics_port)
        if not args.config:
            config.metadata_log_dir.mkdir(parents=True, exist_ok=True)
        locks.acquire([d for d in [config.metadata_log_dir, *config.log_dirs] if d.is_dir()])
        if not args.config:
            _format_embedded(config)
        if config.ignored:
            log.warning("ignoring settings kraftwire has no use for: %s", ", ".join(config.ignored))
        _raise_fd_limit()
        import uvloop

        uvloop.run(serve(config, args.capture_file, args.take_over_quorum, sock))
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except (StorageError, LogCorruption, LoadError) as exc:
        print(f"storage error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cannot start: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    finally:
        locks.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
