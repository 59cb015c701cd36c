"""python -m server [--config server.properties]

Without --config it runs the embedded default: a single-voter controller on 127.0.0.1:9093
whose data lives in ./data/controller, formatted with a random cluster id on first start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import signal
import sys
from pathlib import Path

from protocol.primitives import random_uuid, uuid_to_str
from server.config import ConfigError, ControllerConfig, embedded_config, load_config
from server.image.loader import LoadError
from server.metalog.meta_properties import META_PROPERTIES, StorageError
from server.metalog.segments import LogCorruption

log = logging.getLogger("kraftwire")

EMBEDDED_DIR = Path("data/controller")


def _embedded(data_dir: Path, port: int) -> ControllerConfig:
    from server.metalog.formatting import format_dirs
    from server.metalog.bootstrap import DEFAULT_RELEASE

    config = embedded_config(data_dir, port)
    if not (data_dir / META_PROPERTIES).exists():
        cluster_id = uuid_to_str(random_uuid())
        format_dirs(config, cluster_id, DEFAULT_RELEASE)
        log.info("formatted %s for new cluster %s", data_dir, cluster_id)
    return config


def _raise_fd_limit() -> None:
    """Brokers and clients each hold a connection; the default 1024 descriptors is too few."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else 1 << 20
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


async def serve(config: ControllerConfig, capture_file: Path | None = None, take_over_quorum: bool = False) -> None:
    from server.app import ControllerServer

    server = ControllerServer(config, capture_file=capture_file, take_over_quorum=take_over_quorum)
    host, port = await server.start()
    if len(server.voters) > 1:
        others = ",".join(f"{h}:{p}" for n, (h, p) in sorted(config.voters.items()))
        print(f"kraftwire controller {config.node_id} of cluster {server.cluster_id} is a voter on "
              f"{host}:{port} of the quorum {list(server.voters)}\n  point brokers at: "
              f"controller.quorum.bootstrap.servers={others}", flush=True)
    else:
        print(f"kraftwire controller {config.node_id} of cluster {server.cluster_id} is active on "
              f"{host}:{port}\n  point brokers at: controller.quorum.bootstrap.servers={host}:{port}"
              f" (controller.listener.names={config.controller_listener.name})\n"
              f"  point admin clients at: bootstrap_servers={host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, server.request_snapshot)
    await stop.wait()
    log.info("shutting down")
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description="kraftwire KRaft controller")
    parser.add_argument("--config", type=Path, help="a server.properties file with Kafka's config names")
    parser.add_argument("--data-dir", type=Path, default=EMBEDDED_DIR,
                        help="data directory of the embedded default (without --config)")
    parser.add_argument("--port", type=int, default=9093, help="port of the embedded default")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--capture-file", type=Path,
                        help="write the server's own traffic to this pcapng file (read it with tools.replay)")
    parser.add_argument("--take-over-quorum", action="store_true",
                        help="start on a directory whose quorum had other voters, as its only voter "
                             "(stop the other voters first)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config) if args.config else _embedded(args.data_dir, args.port)
        if config.ignored:
            log.warning("ignoring settings kraftwire has no use for: %s", ", ".join(config.ignored))
        _raise_fd_limit()
        import uvloop

        uvloop.run(serve(config, args.capture_file, args.take_over_quorum))
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except (StorageError, LogCorruption, LoadError) as exc:
        print(f"storage error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
