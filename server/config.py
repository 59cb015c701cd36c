"""The controller's configuration: a Kafka server.properties file, read with Kafka's key names.

Key                                              Default      Rule
process.roles                                    (required)   exactly "controller"
node.id                                          (required)   int >= 0; one of the voters, if static
controller.quorum.voters                         (none)       id@host:port,...; [ipv6] hosts (a static quorum)
controller.quorum.bootstrap.servers              (none)       host:port,...: a dynamic quorum (KIP-853);
                                                              one of the two is required
listeners                                        (required)   one NAME://host:port; empty host = any
advertised.listeners                             listeners    NAME://host:port, NAME as in listeners
controller.listener.names                        (required)   the name of the listener
listener.security.protocol.map                   see below    NAME:PROTOCOL,...
metadata.log.dir                                 see below    else log.dirs[0], else log.dir
log.dirs, log.dir                                (none)       log.dir is read only without log.dirs
broker.session.timeout.ms                        9000         > 0
socket.request.max.bytes                         104857600    >= 1024
metadata.log.segment.bytes                       1073741824   >= 4096
metadata.log.max.record.bytes.between.snapshots  20971520     >= 1
metadata.max.idle.interval.ms                    500          >= 0 (0 disables no-op records)
num.partitions                                   1            >= 1
default.replication.factor                       1            >= 1
min.insync.replicas                              1            >= 1
unclean.leader.election.enable                   false        true or false
eligible.leader.replicas.enabled                 false        true or false
max.request.partition.size.limit                 2000         >= 1
kraftwire.metadata.nodes                         brokers      "brokers" or "controller" (Metadata names itself only)
controller.quorum.election.timeout.ms            1000         >= 1; elections start after [t, 2t)
controller.quorum.election.backoff.max.ms        1000         >= 0
controller.quorum.fetch.timeout.ms               2000         >= 1
controller.quorum.request.timeout.ms             2000         >= 1
controller.quorum.retry.backoff.ms               20           >= 0
controller.quorum.append.linger.ms               25           >= 0
kraftwire.metrics.port                           (off)        0..65535: Prometheus endpoint (0 = any free port)
kraftwire.log.format                             text         "text" or "json" (one JSON object a line)
sasl.mechanism.controller.protocol               GSSAPI       with several voters on a SASL listener: PLAIN,
                                                              SCRAM-SHA-256 or SCRAM-SHA-512, enabled on it
ssl.endpoint.identification.algorithm            https        https or empty: check the voters' host names
delegation.token.secret.key                      (none)       tokens are disabled without it (also read as
                                                              delegation.token.master.key)
delegation.token.max.lifetime.ms                 604800000    >= 1
delegation.token.expiry.time.ms                  86400000     >= 1

Without listener.security.protocol.map, a listener named after a protocol uses that protocol and
the controller listeners use PLAINTEXT. PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL
listeners are served; the security keys are described in server/security/settings.py. The voters
connect to each other over the controller listener's protocol: TLS with the listener's
truststore (and its keystore as client certificate), SASL with sasl.mechanism.controller.protocol
and the username and password of that mechanism's listener.name.<listener>.<mechanism>.sasl.jaas.config
(for SCRAM, the credential must be in the metadata the other voters hold).

The endpoint kraftwire reports for itself (DescribeCluster for controllers, Metadata, the node
endpoints of Fetch, FetchSnapshot and DescribeQuorum) is the advertised listener, else the
listener; an empty host there is reported as 127.0.0.1.

Keys Kafka has and kraftwire does not implement are refused with an error that names them:
listener.name.<listener>.<key> overrides other than the SASL JAAS configuration, a second
listener. Keys in
IGNORED_KEYS, settings of Kafka's broker or of machinery kraftwire does not have, are accepted
so that stock files work unchanged, and logged at start-up from ``ControllerConfig.ignored``;
any other key is an error, so that a typo never silently leaves a default in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from server.controller.delegation_tokens import TokenSettings
from server.raft.quorum_config import (
    DEFAULT_APPEND_LINGER_MS, DEFAULT_ELECTION_BACKOFF_MAX_MS, DEFAULT_ELECTION_TIMEOUT_MS, DEFAULT_FETCH_TIMEOUT_MS,
    DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_RETRY_BACKOFF_MS)
from server.security.acl import AuthorizerConfig
from server.security.client import ENDPOINT_IDENTIFICATION, ClientSecurity, jaas_credentials
from server.security.plain import PLAIN_LOGIN_MODULE, parse_jaas, plain_users
from server.security.settings import (
    SASL_PROTOCOLS, STANDARD_AUTHORIZER, SUPPORTED_MECHANISMS, TLS_PROTOCOLS, SecurityConfig)
from server.security.tls import TlsSettings, parse_mapping_rules

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
KAFKA_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
METADATA_NODES = ("controller", "brokers")
LOG_FORMATS = ("text", "json")

# The security of one listener (server/security/settings.py), besides its JAAS entries.
LISTENER_SECURITY_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.principal.mapping.rules", "sasl.enabled.mechanisms", "queued.max.request.bytes",
    "connections.max.idle.ms", "connections.max.reauth.ms", "sasl.server.max.receive.size",
})
AUTHORIZER_KEYS = frozenset({"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found"})
TOKEN_KEYS = frozenset({"delegation.token.secret.key", "delegation.token.master.key",
                        "delegation.token.max.lifetime.ms", "delegation.token.expiry.time.ms"})

# For tests only: the forked snapshot writer waits this long before it writes, so that a test
# can kill the controller while a writer is at work.
SNAPSHOT_WRITER_DELAY_KEY = "kraftwire.test.snapshot.writer.delay.ms"

_KNOWN_KEYS = frozenset({
    "process.roles", "node.id", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "listeners", "advertised.listeners", "controller.listener.names",
    "listener.security.protocol.map", "metadata.log.dir", "log.dirs", "log.dir",
    "broker.session.timeout.ms", "socket.request.max.bytes",
    "metadata.log.segment.bytes", "metadata.log.max.record.bytes.between.snapshots",
    "metadata.max.idle.interval.ms", "num.partitions", "default.replication.factor",
    "min.insync.replicas", "unclean.leader.election.enable", "eligible.leader.replicas.enabled",
    "max.request.partition.size.limit", "kraftwire.metadata.nodes",
    *(f"controller.quorum.{name}" for name in (
        "election.timeout.ms", "election.backoff.max.ms", "fetch.timeout.ms", "request.timeout.ms",
        "retry.backoff.ms", "append.linger.ms")),
    "kraftwire.metrics.port", "kraftwire.log.format", SNAPSHOT_WRITER_DELAY_KEY,
}) | LISTENER_SECURITY_KEYS | AUTHORIZER_KEYS | frozenset({
    # the voters' connections to each other (server/security/client.py)
    "sasl.mechanism.controller.protocol", "ssl.endpoint.identification.algorithm",
}) | TOKEN_KEYS  # delegation tokens (server/controller/delegation_tokens.py)

# Settings of Kafka's broker (or of threads and buffers kraftwire does not have) that appear in
# stock server.properties and controller.properties files; accepting them lets those files be
# used unchanged.
IGNORED_KEYS = frozenset({
    # A broker's own pace. Kafka's controller only derives a queueing deadline for heartbeats
    # from it; kraftwire answers each heartbeat as it arrives, with no queue to wait in.
    "broker.heartbeat.interval.ms",
    "num.network.threads",
    "num.io.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "background.threads",
    "queued.max.requests",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "log.retention.hours",
    "log.retention.minutes",
    "log.retention.ms",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "log.segment.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.cleaner.enable",
    "group.initial.rebalance.delay.ms",
    "offsets.topic.replication.factor",
    "offsets.topic.num.partitions",
    "offsets.retention.minutes",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions",
    "transaction.state.log.segment.bytes",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "inter.broker.listener.name",
    "auto.create.topics.enable",
})


class ConfigError(ValueError):
    """A configuration problem, attributed to the key (or file line) that causes it."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


# Refused rather than ignored: each changes what a Kafka controller does, and kraftwire lacks it.
_UNSUPPORTED_KEYS: dict[str, str] = {}
_UNSUPPORTED_PREFIXES = {
    "listener.name.":
        "is not supported: of the per-listener settings kraftwire reads only "
        "listener.name.<listener>.<mechanism>.sasl.jaas.config",
}
# The per-listener key that is read: a SASL mechanism's JAAS configuration.
_JAAS_KEY = re.compile(r"listener\.name\.([^.]+)\.([a-z0-9-]+)\.sasl\.jaas\.config")


class Listener(NamedTuple):
    name: str
    host: str  # "" binds every interface; IPv6 literals are kept without brackets
    port: int


@dataclass(frozen=True)
class ControllerConfig:
    process_roles: list[str]
    node_id: int
    voters: dict[int, tuple[str, int]]  # controller.quorum.voters; empty for a dynamic quorum
    listeners: list[Listener]
    controller_listener_names: list[str]
    listener_security_protocol_map: dict[str, str]
    metadata_log_dir: Path
    log_dirs: list[Path]
    advertised_listeners: list[Listener] = field(default_factory=list)
    broker_session_timeout_ms: int = 9000
    socket_request_max_bytes: int = 104857600
    metadata_log_segment_bytes: int = 1073741824
    metadata_log_max_record_bytes_between_snapshots: int = 20971520
    metadata_max_idle_interval_ms: int = 500
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    eligible_leader_replicas_enabled: bool = False
    max_request_partition_size_limit: int = 2000
    metadata_nodes: str = "brokers"
    # controller.quorum.* timing, Kafka's names and defaults (see server.raft.quorum_config).
    quorum_election_timeout_ms: int = DEFAULT_ELECTION_TIMEOUT_MS
    quorum_election_backoff_max_ms: int = DEFAULT_ELECTION_BACKOFF_MAX_MS
    quorum_fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS
    quorum_request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    quorum_retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS
    quorum_append_linger_ms: int = DEFAULT_APPEND_LINGER_MS
    security: SecurityConfig = field(default_factory=SecurityConfig)
    # How this voter connects to the others: the controller listener's protocol, client side.
    controller_client: ClientSecurity = field(default_factory=ClientSecurity)
    metrics_port: int | None = None  # None: no metrics endpoint
    log_format: str = "text"
    snapshot_writer_delay_ms: int = 0  # SNAPSHOT_WRITER_DELAY_KEY
    ignored: list[str] = field(default_factory=list)

    # controller.quorum.bootstrap.servers: where a controller of a dynamic quorum asks for the leader.
    bootstrap_servers: list[tuple[str, int]] = field(default_factory=list)
    @property
    def controller_listener(self) -> Listener:
        """The listener named in controller.listener.names: where the quorum is served."""
        wanted = self.controller_listener_names[0]
        return next(lsn for lsn in self.listeners if lsn.name == wanted)

    @property
    def advertised_controller_listener(self) -> Listener:
        """Where others reach this controller: its advertised listener, else the listener, with
        an empty (any-interface) host reported as 127.0.0.1."""
        listener = self.controller_listener
        advertised = next((a for a in self.advertised_listeners if a.name == listener.name), listener)
        return advertised._replace(host=advertised.host or "127.0.0.1")


# --- Java .properties syntax --------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text; a key given twice keeps its last value, as in Java."""
    lines = _LINE_BREAK.split(text)
    result: dict[str, str] = {}
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].lstrip(_BLANK)
        i += 1
        # Comment lines never continue, even when they end in a backslash.
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_BLANK)
                i += 1
        key, value = _split_entry(line, lineno)
        result[key] = value
    return result


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_entry(line: str, lineno: int) -> tuple[str, str]:
    end = 0
    while end < len(line) and line[end] not in "=: \t\f":
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    pos = end
    while pos < len(line) and line[pos] in _BLANK:
        pos += 1
    if pos < len(line) and line[pos] in "=:":
        pos += 1
        while pos < len(line) and line[pos] in _BLANK:
            pos += 1
    return _unescape(line[:end], lineno), _unescape(line[pos:], lineno)


def _unescape(raw: str, lineno: int) -> str:
    if "\\" not in raw:
        return raw
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 == len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2:i + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise ConfigError(f"line {lineno}", f"malformed \\u escape {raw[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


# --- typed reading -----------------------------------------------------------------------------

_INT = re.compile(r"[+-]?[0-9]+")
_HOST_PORT = re.compile(r"(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]\s]*)):(?P<port>[0-9]{1,5})")
_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_-]+)://(?P<endpoint>.*)")
_VOTER = re.compile(r"(?P<id>[0-9]+)@(?P<endpoint>.*)")


class _Reader:
    """Typed access to the raw values; Kafka trims surrounding whitespace, so this does too."""

    def __init__(self, raw: dict[str, str]) -> None:
        self.raw = {key: value.strip() for key, value in raw.items()}

    def get(self, key: str) -> str | None:
        return self.raw.get(key)

    def required(self, key: str) -> str:
        value = self.raw.get(key)
        if value is None or value == "":
            raise ConfigError(key, "is required")
        return value

    def int(self, key: str, default: int | None, minimum: int, maximum: int = INT32_MAX) -> int:
        text = self.raw.get(key)
        if text is None or (text == "" and default is None):
            if default is None:
                raise ConfigError(key, "is required")
            return default
        if not _INT.fullmatch(text):
            raise ConfigError(key, f"expected an integer, got {text!r}")
        value = int(text)
        if value < minimum:
            raise ConfigError(key, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise ConfigError(key, f"must be at most {maximum}, got {value}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        text = self.raw.get(key)
        if text is None:
            return default
        if text.lower() not in ("true", "false"):
            raise ConfigError(key, f"expected true or false, got {text!r}")
        return text.lower() == "true"

    def list(self, key: str) -> list[str]:
        return [item.strip() for item in (self.raw.get(key) or "").split(",") if item.strip()]


def _host_port(key: str, endpoint: str, item: str, form: str,
               allow_empty_host: bool = False) -> tuple[str, int]:
    """Split ``endpoint``, the host:port part of ``item``, whose whole syntax is ``form``."""
    match = _HOST_PORT.fullmatch(endpoint)
    if match is None:
        raise ConfigError(key, f"expected {form}, got {item!r}")
    host = match["v6"] if match["v6"] is not None else match["host"]
    if not host and not allow_empty_host:
        raise ConfigError(key, f"missing host in {item!r}")
    port = int(match["port"])
    if port > 65535:
        raise ConfigError(key, f"port {port} is out of range in {item!r}")
    return host, port


def _listeners(key: str, items: list[str]) -> list[Listener]:
    listeners: list[Listener] = []
    for item in items:
        match = _LISTENER.fullmatch(item)
        if match is None:
            raise ConfigError(key, f"expected NAME://host:port, got {item!r}")
        # Kafka compares listener names upper-cased.
        name = match["name"].upper()
        if any(lsn.name == name for lsn in listeners):
            raise ConfigError(key, f"listener name {name} appears twice")
        listeners.append(Listener(name, *_host_port(key, match["endpoint"], item,
                                                    "NAME://host:port", allow_empty_host=True)))
    return listeners


def _bootstrap_servers(reader: _Reader) -> list[tuple[str, int]]:
    key = "controller.quorum.bootstrap.servers"
    return [_host_port(key, item, item, "host:port") for item in reader.list(key)]


def _voters(reader: _Reader) -> dict[int, tuple[str, int]]:
    key = "controller.quorum.voters"
    voters: dict[int, tuple[str, int]] = {}
    for item in reader.list(key):
        match = _VOTER.fullmatch(item)
        if match is None:
            raise ConfigError(key, f"expected id@host:port, got {item!r}")
        node = int(match["id"])
        if node > INT32_MAX:
            raise ConfigError(key, f"voter id {node} is out of range")
        if node in voters:
            raise ConfigError(key, f"voter {node} appears twice")
        voters[node] = _host_port(key, match["endpoint"], item, "id@host:port")
    return voters


def _process_roles(reader: _Reader) -> list[str]:
    key = "process.roles"
    reader.required(key)
    roles = reader.list(key)
    if roles != ["controller"]:
        raise ConfigError(key, f"kraftwire runs as a dedicated KRaft controller, so this must be "
                               f"exactly 'controller' (got {reader.get(key)!r}); run brokers as "
                               f"separate processes")
    return roles


def _controller_listener(reader: _Reader) -> tuple[list[Listener], list[str]]:
    """listeners and controller.listener.names: one listener, the controller's, as kraftwire
    serves a single socket (Kafka's controller may serve several)."""
    reader.required("listeners")
    listeners = _listeners("listeners", reader.list("listeners"))
    reader.required("controller.listener.names")
    controller_names = [name.upper() for name in reader.list("controller.listener.names")]
    names = {lsn.name for lsn in listeners}
    for name in controller_names:
        if name not in names:
            raise ConfigError("controller.listener.names",
                              f"{name} is not among the listeners {sorted(names)}")
    for lsn in listeners:
        if lsn.name not in controller_names:
            raise ConfigError("listeners",
                              f"{lsn.name} is not in controller.listener.names; a dedicated "
                              f"controller has only controller listeners")
    if len(listeners) > 1:
        raise ConfigError("listeners",
                          f"kraftwire serves a single controller listener, got "
                          f"{', '.join(lsn.name for lsn in listeners)}")
    return listeners, controller_names


def _security_map(reader: _Reader, listeners: list[Listener],
                  controller_names: list[str]) -> dict[str, str]:
    key = "listener.security.protocol.map"
    if reader.get(key) is None:
        given = {p: p for p in KAFKA_PROTOCOLS} | {n: "PLAINTEXT" for n in controller_names
                                                  if n not in KAFKA_PROTOCOLS}
    else:
        given = {}
        for item in reader.list(key):
            name, sep, protocol = item.partition(":")
            protocol = protocol.strip().upper()
            if not sep or protocol not in KAFKA_PROTOCOLS:
                raise ConfigError(key, f"expected NAME:PROTOCOL with a Kafka security protocol, "
                                       f"got {item!r}")
            given[name.strip().upper()] = protocol
    effective = {}
    for lsn in listeners:
        security = given.get(lsn.name)
        if security is None:
            raise ConfigError(key, f"no security protocol for listener {lsn.name}")
        effective[lsn.name] = security
    return effective


def _log_dirs(reader: _Reader) -> tuple[Path, list[Path]]:
    data_dirs = reader.list("log.dirs") or reader.list("log.dir")
    metadata_dir = reader.get("metadata.log.dir") or (data_dirs[0] if data_dirs else None)
    if metadata_dir is None:
        raise ConfigError("metadata.log.dir", "is required (or set log.dirs)")
    dirs: list[Path] = []
    for text in [metadata_dir, *data_dirs]:
        path = Path(text)
        if path not in dirs:
            dirs.append(path)
    return dirs[0], dirs


def config_from_properties(props: dict[str, str]) -> ControllerConfig:
    """Validate raw properties into a ControllerConfig; raises ConfigError naming the key."""
    reader = _Reader(props)
    for key in sorted(props):
        if key in _UNSUPPORTED_KEYS:
            raise ConfigError(key, _UNSUPPORTED_KEYS[key])
        prefix = next((p for p in _UNSUPPORTED_PREFIXES if key.startswith(p)), None)
        if prefix is not None and not _JAAS_KEY.fullmatch(key):
            raise ConfigError(key, _UNSUPPORTED_PREFIXES[prefix])
        if key not in _KNOWN_KEYS and key not in IGNORED_KEYS and not _JAAS_KEY.fullmatch(key):
            raise ConfigError(key, "unknown configuration key")

    roles = _process_roles(reader)
    node_id = reader.int("node.id", None, 0)

    voters = _voters(reader)
    bootstrap = _bootstrap_servers(reader)
    if voters and bootstrap:
        raise ConfigError("controller.quorum.bootstrap.servers",
                          "set either it (a dynamic quorum) or controller.quorum.voters (a static one), not both")
    if not voters and not bootstrap:
        raise ConfigError("controller.quorum.voters", "is required, or controller.quorum.bootstrap.servers for a "
                                                      "dynamic quorum")
    if voters and node_id not in voters:
        raise ConfigError("controller.quorum.voters",
                          f"node.id {node_id} is not among the voters {sorted(voters)}")

    listeners, controller_names = _controller_listener(reader)
    advertised = listeners
    if reader.get("advertised.listeners"):
        advertised = _listeners("advertised.listeners", reader.list("advertised.listeners"))
        names = {lsn.name for lsn in listeners}
        for lsn in advertised:
            if lsn.name not in names:
                raise ConfigError("advertised.listeners",
                                  f"{lsn.name} is not among the listeners {sorted(names)}")
    for lsn in advertised:
        # As Kafka: a client told to connect to 0.0.0.0 would connect to itself.
        if lsn.host in ("0.0.0.0", "::"):
            raise ConfigError("advertised.listeners",
                              f"{lsn.name} cannot be advertised at the non-routable address {lsn.host}; "
                              f"set advertised.listeners to a routable host")
    security_map = _security_map(reader, listeners, controller_names)
    metadata_dir, log_dirs = _log_dirs(reader)
    security = _security(reader, listeners[0].name, security_map[listeners[0].name])

    metadata_nodes = reader.get("kraftwire.metadata.nodes") or "brokers"
    if metadata_nodes not in METADATA_NODES:
        raise ConfigError("kraftwire.metadata.nodes",
                          f"expected one of {', '.join(METADATA_NODES)}, got {metadata_nodes!r}")

    log_format = reader.get("kraftwire.log.format") or "text"
    if log_format not in LOG_FORMATS:
        raise ConfigError("kraftwire.log.format",
                          f"expected one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    metrics_port = reader.int("kraftwire.metrics.port", None, 0, 65535) if reader.get("kraftwire.metrics.port") else None

    return ControllerConfig(
        process_roles=roles,
        node_id=node_id,
        voters=voters,
        bootstrap_servers=bootstrap,
        listeners=listeners,
        controller_listener_names=controller_names,
        listener_security_protocol_map=security_map,
        metadata_log_dir=metadata_dir,
        log_dirs=log_dirs,
        advertised_listeners=advertised,
        broker_session_timeout_ms=reader.int("broker.session.timeout.ms", 9000, 1),
        socket_request_max_bytes=reader.int("socket.request.max.bytes", 104857600, 1024),
        # Kafka insists on far larger segments; small ones let tests roll segments quickly.
        metadata_log_segment_bytes=reader.int("metadata.log.segment.bytes", 1073741824, 4096),
        metadata_log_max_record_bytes_between_snapshots=reader.int(
            "metadata.log.max.record.bytes.between.snapshots", 20971520, 1, INT64_MAX),
        metadata_max_idle_interval_ms=reader.int("metadata.max.idle.interval.ms", 500, 0),
        num_partitions=reader.int("num.partitions", 1, 1),
        default_replication_factor=reader.int("default.replication.factor", 1, 1),
        min_insync_replicas=reader.int("min.insync.replicas", 1, 1),
        unclean_leader_election_enable=reader.bool("unclean.leader.election.enable", False),
        eligible_leader_replicas_enabled=reader.bool("eligible.leader.replicas.enabled", False),
        max_request_partition_size_limit=reader.int("max.request.partition.size.limit", 2000, 1),
        metadata_nodes=metadata_nodes,
        quorum_election_timeout_ms=reader.int("controller.quorum.election.timeout.ms", DEFAULT_ELECTION_TIMEOUT_MS, 1),
        quorum_election_backoff_max_ms=reader.int("controller.quorum.election.backoff.max.ms", DEFAULT_ELECTION_BACKOFF_MAX_MS, 0),
        quorum_fetch_timeout_ms=reader.int("controller.quorum.fetch.timeout.ms", DEFAULT_FETCH_TIMEOUT_MS, 1),
        quorum_request_timeout_ms=reader.int("controller.quorum.request.timeout.ms", DEFAULT_REQUEST_TIMEOUT_MS, 1),
        quorum_retry_backoff_ms=reader.int("controller.quorum.retry.backoff.ms", DEFAULT_RETRY_BACKOFF_MS, 0),
        quorum_append_linger_ms=reader.int("controller.quorum.append.linger.ms", DEFAULT_APPEND_LINGER_MS, 0),
        security=security,
        controller_client=_controller_client(reader, security, listeners[0].name, len(voters) or len(bootstrap) + 1),
        metrics_port=metrics_port,
        log_format=log_format,
        snapshot_writer_delay_ms=reader.int(SNAPSHOT_WRITER_DELAY_KEY, 0, 0),
        ignored=sorted(key for key in props if key in IGNORED_KEYS),
    )


# --- security -------------------------------------------------------------------------------

def _security(reader: _Reader, listener: str, protocol: str) -> SecurityConfig:
    """TLS, SASL, authorization and connection limits, with Kafka's keys and defaults."""
    return replace(_listener_security(reader, listener, protocol), authorizer=_authorizer(reader),
                   delegation_tokens=_delegation_tokens(reader))


def _listener_security(reader: _Reader, listener: str, protocol: str) -> SecurityConfig:
    """TLS, SASL and connection limits of one listener, with Kafka's keys and defaults."""
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = (reader.get(key) or "PEM").upper()
        if kind != "PEM":
            raise ConfigError(key, f"only PEM stores are supported, got {kind}")
    client_auth = (reader.get("ssl.client.auth") or "none").lower()
    if client_auth not in ("required", "requested", "none"):
        raise ConfigError("ssl.client.auth", f"expected required, requested or none, got {client_auth!r}")
    tls = TlsSettings(reader.get("ssl.keystore.location"), reader.get("ssl.keystore.key"),
                      reader.get("ssl.keystore.certificate.chain"), reader.get("ssl.key.password"),
                      reader.get("ssl.truststore.location"), reader.get("ssl.truststore.certificates"),
                      client_auth)
    if protocol in TLS_PROTOCOLS and tls.keystore_location is None and (
            tls.keystore_key is None or tls.keystore_certificate_chain is None):
        raise ConfigError("ssl.keystore.location", f"listener {listener} uses {protocol} and needs a keystore "
                                                   f"(or ssl.keystore.key and ssl.keystore.certificate.chain)")
    try:
        rules = tuple(parse_mapping_rules(reader.get("ssl.principal.mapping.rules") or "DEFAULT"))
    except ValueError as exc:
        raise ConfigError("ssl.principal.mapping.rules", str(exc)) from None

    mechanisms: tuple[str, ...] = ()
    users: dict[str, str] = {}
    if protocol in SASL_PROTOCOLS:
        mechanisms = tuple(m.upper() for m in reader.list("sasl.enabled.mechanisms")) or ("GSSAPI",)
        for mechanism in mechanisms:
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigError("sasl.enabled.mechanisms", f"{mechanism} is not supported; "
                                  f"kraftwire offers {', '.join(SUPPORTED_MECHANISMS)}")
    for key in reader.raw:
        match = _JAAS_KEY.fullmatch(key)
        if match is None:
            continue
        if match[1].upper() != listener or match[2].upper() not in mechanisms:
            raise ConfigError(key, f"names no SASL mechanism enabled on listener {listener}")
        try:
            module, options = parse_jaas(reader.raw[key])
        except ValueError as exc:
            raise ConfigError(key, str(exc)) from None
        if match[2].upper() == "PLAIN":
            if module != PLAIN_LOGIN_MODULE:
                raise ConfigError(key, f"expected {PLAIN_LOGIN_MODULE}, got {module}")
            users = plain_users(options)
    if "PLAIN" in mechanisms and not users:
        raise ConfigError(f"listener.name.{listener.lower()}.plain.sasl.jaas.config",
                          'is required for PLAIN: it lists the users as user_<name>="<password>"')

    queued = reader.int("queued.max.request.bytes", -1, -1)
    if queued == 0:
        raise ConfigError("queued.max.request.bytes", "must be positive, or -1 for no bound")
    return SecurityConfig(
        protocol=protocol, tls=tls, principal_rules=rules, sasl_mechanisms=mechanisms, plain_users=users,
        queued_max_request_bytes=queued,
        connections_max_idle_ms=reader.int("connections.max.idle.ms", 600000, -1),
        connections_max_reauth_ms=reader.int("connections.max.reauth.ms", 0, 0, 2**63 - 1),
        sasl_server_max_receive_size=_receive_size(reader))


def _authorizer(reader: _Reader) -> AuthorizerConfig | None:
    name = reader.get("authorizer.class.name") or ""
    if not name:
        return None
    if name != STANDARD_AUTHORIZER:
        raise ConfigError("authorizer.class.name", f"only {STANDARD_AUTHORIZER} is supported, got {name}")
    super_users = frozenset(u.strip() for u in (reader.get("super.users") or "").split(";") if u.strip())
    for user in super_users:
        if ":" not in user:
            raise ConfigError("super.users", f"expected principals as Type:name separated by ';', got {user!r}")
    return AuthorizerConfig(super_users, reader.bool("allow.everyone.if.no.acl.found", False))


def listener_security_from_properties(props: dict[str, str]) -> tuple[str, SecurityConfig]:
    """The name and security of one listener from Kafka broker properties, as a test broker's
    client listener reads them: listener.security.protocol.map naming that listener alone, its
    TLS, SASL and connection keys as the controller reads them, and the SASL users in
    listener.name.<listener>.<mechanism>.sasl.jaas.config. As on a Kafka broker, the authorizer
    keys judge what the broker answers from its image (the controller judges what it forwards)
    and the delegation token keys let token holders log in. ConfigError names the offending key."""
    reader = _Reader(props)
    key = "listener.security.protocol.map"
    for name in sorted(props):
        if name not in LISTENER_SECURITY_KEYS | AUTHORIZER_KEYS | TOKEN_KEYS and name != key \
                and not _JAAS_KEY.fullmatch(name):
            raise ConfigError(name, "unknown listener configuration key")
    entries = reader.list(key)
    if len(entries) != 1:
        raise ConfigError(key, f"expected the one listener as NAME:PROTOCOL, got {reader.get(key) or 'nothing'!r}")
    name, sep, protocol = entries[0].partition(":")
    name, protocol = name.strip().upper(), protocol.strip().upper()
    if not sep or not re.fullmatch(r"[A-Z0-9_-]+", name) or protocol not in KAFKA_PROTOCOLS:
        raise ConfigError(key, f"expected NAME:PROTOCOL with a Kafka security protocol, got {entries[0]!r}")
    return name, _security(reader, name, protocol)


def _controller_client(reader: _Reader, security: SecurityConfig, listener: str, voters: int) -> ClientSecurity:
    """The client side of the controller listener, as Kafka's voters connect to each other: its
    protocol, its stores (the keystore is the client certificate where ssl.client.auth asks for
    one), and for SASL the mechanism sasl.mechanism.controller.protocol names with the username
    and password of that mechanism's JAAS configuration on the listener."""
    key = "ssl.endpoint.identification.algorithm"
    given = reader.get(key)
    algorithm = "https" if given is None else given.lower()
    if algorithm not in ENDPOINT_IDENTIFICATION:
        raise ConfigError(key, f"expected https or empty (no host name check), got {algorithm!r}")
    key = "sasl.mechanism.controller.protocol"
    mechanism = (reader.get(key) or "GSSAPI").upper()
    if voters == 1 or not security.uses_sasl:
        # A single voter connects to nobody: nothing here is used.
        return ClientSecurity(security.protocol, security.tls, algorithm == "https")
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(key, f"the voters connect to each other with this mechanism; {mechanism} is not "
                               f"supported, set one of {', '.join(SUPPORTED_MECHANISMS)}")
    if mechanism not in security.sasl_mechanisms:
        raise ConfigError(key, f"{mechanism} is not in sasl.enabled.mechanisms "
                               f"({', '.join(security.sasl_mechanisms)}), so the other voters would refuse it")
    jaas_key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = reader.get(jaas_key)
    if not jaas:
        raise ConfigError(jaas_key, f"is required: it holds the username and password this voter uses "
                                    f"to reach the others with {mechanism}")
    try:
        username, password = jaas_credentials(jaas, mechanism)
    except ValueError as exc:
        raise ConfigError(jaas_key, str(exc)) from None
    return ClientSecurity(security.protocol, security.tls, algorithm == "https", mechanism, username, password)


def _delegation_tokens(reader: _Reader) -> TokenSettings:
    return TokenSettings(
        # delegation.token.master.key is the name Kafka still reads when the new one is unset.
        reader.get("delegation.token.secret.key") or reader.get("delegation.token.master.key") or None,
        reader.int("delegation.token.max.lifetime.ms", 7 * 24 * 3600 * 1000, 1, 2**63 - 1),
        reader.int("delegation.token.expiry.time.ms", 24 * 3600 * 1000, 1, 2**63 - 1))


def _receive_size(reader: _Reader) -> int:
    """sasl.server.max.receive.size: an int, as Kafka reads it; -1 means no bound, as for
    Kafka's NetworkReceive. Any other value below 1 would refuse every client, so it is an
    error here."""
    key = "sasl.server.max.receive.size"
    size = reader.int(key, 524288, -1)
    if size == 0:
        raise ConfigError(key, "must be positive, or -1 for no bound")
    return size


def load_config(path: str | Path) -> ControllerConfig:
    """Read and validate a server.properties file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read the config file: {exc.strerror}") from None
    return config_from_properties(parse_properties(text))


# Node ids are shared by brokers and controllers and must be unique; brokers usually count
# from 1, so the embedded controller takes an id out of their way.
EMBEDDED_NODE_ID = 3000


def embedded_config(data_dir: Path, port: int = 9093) -> ControllerConfig:
    """The single-node controller: node 3000, sole voter, listening on 127.0.0.1:``port``."""
    return config_from_properties({
        "process.roles": "controller",
        "node.id": str(EMBEDDED_NODE_ID),
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"{EMBEDDED_NODE_ID}@127.0.0.1:{port}",
        "metadata.log.dir": str(data_dir),
    })
