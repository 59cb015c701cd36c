"""python -m tools.broker: a test broker, or a fleet of them, against a kraftwire controller.

    python -m tools.broker --controller 127.0.0.1:9093 --node-id 1
    python -m tools.broker --controller 127.0.0.1:9093 --fleet 1000 --base-id 100 --faults 0.2 --seed 7
    python -m tools.broker --controller 127.0.0.1:9093 --node-id 1 \
        --controller-config broker-client.properties --listener-config broker-listener.properties

--controller-config takes Kafka client properties for reaching a secured controller;
--listener-config takes Kafka broker properties that secure the brokers' own client listener
(TLS, SASL PLAIN with the JAAS entry's users, SCRAM with the credentials in the metadata). The
principal a client logs in as goes with each request the broker forwards, so the controller's
authorizer judges the client.

SIGTERM or SIGINT: controlled shutdown of every broker, then exit 0 (1 if the controller did
not grant it in time; a second signal stops at once). SIGUSR1: print the summary line. Each
state transition is logged in one line on stderr; a line when the brokers start (the signal
handlers are in place by then) and the summaries go to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import signal
import sys
from pathlib import Path
from typing import Callable

from tools.broker.broker import default_client_port
from tools.broker.fleet import Fleet, FleetOptions, default_ramp_s
from tools.broker.state_dir import default_state_root
from protocol.client import parse_addresses
from server.client_connection import PLAINTEXT
from server.config import ConfigError, listener_security_from_properties, parse_properties
from server.security.client import ClientSecurity, ClientSettingsError, client_security_from_properties
from server.security.settings import SecurityConfig
from server.security.tls import server_context

FORCE_AFTER_S = 0.5


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.broker", description="kraftwire test broker")
    p.add_argument("--controller", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                   help="bootstrap controllers; the active one is found among them")
    p.add_argument("--node-id", type=int, help="the broker id (one broker)")
    p.add_argument("--fleet", type=int, metavar="N", help="run N brokers in this process")
    p.add_argument("--base-id", type=int, default=1, help="id of the first broker of a fleet (default 1)")
    p.add_argument("--rack", help="rack, or a comma-separated list given out round robin in a fleet")
    p.add_argument("--cluster-id", help="expected cluster id (default: asked of the controller)")
    p.add_argument("--state-dir", type=Path,
                   help="where the clean-shutdown epoch is kept (default $XDG_STATE_HOME/kraftwire/broker-ID, "
                        "else ~/.local/state/kraftwire/broker-ID; "
                        "a fleet uses DIR/broker-ID)")
    p.add_argument("--heartbeat-interval-ms", type=int, default=2000)
    p.add_argument("--request-timeout-ms", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0, help="seeds the lag model and the faults")
    p.add_argument("--mean-in-sync-s", type=float, default=0.0,
                   help="mean time a simulated follower stays in sync before falling behind "
                        "(default 0: it never falls behind by itself)")
    p.add_argument("--mean-catch-up-s", type=float, default=2.0,
                   help="mean time a simulated follower needs to catch up (default 2)")
    p.add_argument("--faults", type=float, default=0.0, metavar="RATE",
                   help="kill, pause or restart a random broker RATE times per second on average")
    p.add_argument("--fault-max-s", type=float, default=20.0,
                   help="longest down or paused time of a fault (default 20)")
    p.add_argument("--ramp-ms", type=int,
                   help="spread the brokers' start over this long (default for a fleet: one heartbeat "
                        "interval, or N ms if longer, to start at most 1000 a second)")
    p.add_argument("--shutdown-timeout-ms", type=int, default=60000)
    p.add_argument("--advertised-host", default="127.0.0.1",
                   help="where clients reach the brokers (their listeners bind to it)")
    p.add_argument("--port", type=int,
                   help="client port of the broker, or of a fleet's first broker (the others count up "
                        "from it); 0: any free port; default 20000 + node id")
    p.add_argument("--no-clients", action="store_true",
                   help="serve no clients: no listening socket per broker (for fleets larger than the "
                        "process's descriptor limit allows twice over)")
    p.add_argument("--controller-config", type=Path, metavar="FILE",
                   help="Kafka client properties for the connections to the controllers, as their listener "
                        "wants them: security.protocol, ssl.truststore.location, sasl.mechanism, sasl.jaas.config")
    p.add_argument("--listener-config", type=Path, metavar="FILE",
                   help="Kafka broker properties securing the brokers' client listener: "
                        "listener.security.protocol.map (one NAME:PROTOCOL), ssl.keystore.location, "
                        "ssl.truststore.location, ssl.client.auth, sasl.enabled.mechanisms, "
                        "listener.name.NAME.plain.sasl.jaas.config (default: PLAINTEXT)")
    p.add_argument("--log-level", default="INFO")
    return p


def options_from_args(argv: list[str] | None = None) -> tuple[FleetOptions, str]:
    """The fleet's options and the log level."""
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.node_id is None) == (args.fleet is None):
        parser.error("give either --node-id (one broker) or --fleet N")
    if args.fleet is not None and args.fleet < 1:
        parser.error("--fleet must be at least 1")
    if args.heartbeat_interval_ms <= 0 or args.request_timeout_ms <= 0:
        parser.error("intervals and timeouts must be positive")
    if args.faults < 0 or args.mean_in_sync_s < 0 or args.mean_catch_up_s < 0:
        parser.error("rates and mean times must not be negative")
    try:
        bootstrap = parse_addresses(args.controller)
    except ValueError as exc:
        parser.error(f"--controller: {exc}")
    single = args.fleet is None
    ids = [args.node_id] if single else list(range(args.base_id, args.base_id + args.fleet))
    if ids[0] < 0:
        parser.error("broker ids must not be negative")
    if args.port is not None and not 0 <= args.port <= 65535 - (len(ids) - 1 if args.port else 0):
        parser.error(f"--port: {args.port} leaves no valid port for every broker")
    interval_s = args.heartbeat_interval_ms / 1000
    listener_name, client_security = _listener_security(parser, args.listener_config)
    ramp_s = args.ramp_ms / 1000 if args.ramp_ms is not None else default_ramp_s(len(ids), interval_s)
    return FleetOptions(
        bootstrap=bootstrap, node_ids=ids, state_dir=_state_dirs(args.state_dir, single),
        racks=args.rack.split(",") if args.rack else None, cluster_id=args.cluster_id,
        heartbeat_interval_s=interval_s, request_timeout_s=args.request_timeout_ms / 1000, seed=args.seed,
        mean_in_sync_s=args.mean_in_sync_s, mean_catch_up_s=args.mean_catch_up_s, fault_rate=args.faults,
        fault_max_s=args.fault_max_s, ramp_s=ramp_s,
        shutdown_timeout_s=args.shutdown_timeout_ms / 1000, advertised_host=args.advertised_host,
        client_port=_client_ports(args.port, ids[0]), serve_clients=not args.no_clients,
        controller_security=_controller_security(parser, args.controller_config),
        listener_name=listener_name, client_security=client_security), args.log_level


def _controller_security(parser: argparse.ArgumentParser, path: Path | None) -> ClientSecurity:
    if path is None:
        return PLAINTEXT
    try:
        return client_security_from_properties(parse_properties(path.read_text(encoding="utf-8")))
    except OSError as exc:
        parser.error(f"--controller-config: cannot read {path}: {exc.strerror}")
    except (ConfigError, ClientSettingsError) as exc:
        parser.error(f"--controller-config {path}: {exc}")


def _listener_security(parser: argparse.ArgumentParser, path: Path | None) -> tuple[str, SecurityConfig]:
    if path is None:
        return "PLAINTEXT", SecurityConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        parser.error(f"--listener-config: cannot read {path}: {exc.strerror}")
    try:
        name, security = listener_security_from_properties(parse_properties(text))
    except ConfigError as exc:
        parser.error(f"--listener-config {path}: {exc}")
    if security.uses_tls:
        # A store that cannot be used fails here, once, rather than at each broker's start.
        try:
            server_context(security.tls)
        except (OSError, ValueError) as exc:
            stores = ", ".join(f"{store}={where}" for store, where in (
                ("ssl.keystore.location", security.tls.keystore_location),
                ("ssl.truststore.location", security.tls.truststore_location)) if where)
            parser.error(f"--listener-config {path}: the TLS stores cannot be used ({stores or 'PEM text'}): "
                         f"{getattr(exc, 'strerror', None) or exc}")
    return name, security


def _client_ports(first: int | None, first_id: int) -> Callable[[int], int]:
    if first is None:
        return default_client_port
    return lambda node_id: first + node_id - first_id if first else 0


def _state_dirs(given: Path | None, single: bool) -> Callable[[int], Path]:
    def state_dir(node_id: int) -> Path:
        if given is None:
            return default_state_root() / f"broker-{node_id}"
        return given if single else given / f"broker-{node_id}"
    return state_dir


async def _start(fleet: Fleet) -> None:
    await fleet.start()
    assert fleet.config is not None, "a started fleet has its configuration"
    ids = fleet.options.node_ids
    who = f"broker {ids[0]}" if len(ids) == 1 else f"{len(ids)} brokers ({ids[0]}-{ids[-1]})"
    controllers = ",".join(f"{h}:{p}" for h, p in fleet.options.bootstrap)
    print(f"kraftwire test {who} of cluster {fleet.config.cluster_id} starting against {controllers}",
          flush=True)


async def serve(options: FleetOptions) -> int:
    """Run until a signal; the exit code."""
    fleet = Fleet(options)
    loop = asyncio.get_running_loop()
    stop, force = asyncio.Event(), asyncio.Event()
    stop_asked = [0.0]  # when the first stop signal came

    def on_signal() -> None:
        now = loop.time()
        if not stop.is_set():
            stop_asked[0] = now
            stop.set()
        elif now - stop_asked[0] >= FORCE_AFTER_S:
            # A second signal stops at once; one that comes with the first (a signal sent to
            # the process and to its group, as `timeout` does) is the same request.
            force.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    loop.add_signal_handler(signal.SIGUSR1, lambda: print(fleet.summary(), flush=True))
    starting = asyncio.ensure_future(_start(fleet))
    starting.add_done_callback(fleet.report_crash)
    stopped, failed = asyncio.ensure_future(stop.wait()), asyncio.ensure_future(fleet.failed.wait())
    await asyncio.wait([stopped, failed], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    failed.cancel()
    if not starting.done():
        starting.cancel()
    shutdown = asyncio.ensure_future(fleet.shutdown())
    forced = asyncio.ensure_future(force.wait())
    await asyncio.wait([shutdown, forced], return_when=asyncio.FIRST_COMPLETED)
    if shutdown.done():
        clean = shutdown.result()
        forced.cancel()
    else:
        shutdown.cancel()
        fleet.close()
        clean = False
    print(fleet.summary(), flush=True)
    return 0 if clean and not fleet.failed.is_set() else 1


def raise_fd_limit() -> None:
    """A fleet holds a connection per broker; the default 1024 descriptors is too few."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


def main(argv: list[str] | None = None) -> int:
    options, level = options_from_args(argv)
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raise_fd_limit()
    import uvloop

    return uvloop.run(serve(options))


if __name__ == "__main__":
    sys.exit(main())
