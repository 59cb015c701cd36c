"""The controller's configuration: a Kafka server.properties file, read with Kafka's key names.

Every key, its default and the values it takes are in the table of server/settings.py (and in
docs/settings.md, written from it). Here the keys that depend on each other (the listeners, the
voters, the security protocol map, TLS, SASL and its JAAS entries, the authorizer, delegation
tokens) are checked together and built into a ControllerConfig.

Keys Kafka has and kraftwire does not implement are refused with an error that names them:
listener.name.<listener>.<key> overrides other than the SASL JAAS configuration, a second
listener. Keys in IGNORED_KEYS, settings of Kafka's broker or of machinery kraftwire does not
have, are accepted so that stock files work unchanged, and logged at start-up from
``ControllerConfig.ignored``; any other key is an error, so that a typo never silently leaves a
default in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from server.controller.delegation_tokens import TokenSettings
from server.properties import parse_properties
from server.security.acl import AuthorizerConfig
from server.security.client import PROTOCOLS, ClientSecurity, jaas_credentials
from server.security.plain import PLAIN_LOGIN_MODULE, parse_jaas, plain_users
from server.security.settings import SASL_PROTOCOLS, SUPPORTED_MECHANISMS, TLS_PROTOCOLS, SecurityConfig
from server.security.tls import TlsSettings, parse_mapping_rules
from server.settings import (
    AUTHORIZER, DELEGATION_TOKENS, IGNORED_KEYS, INT32_MAX, LISTENER_SECURITY, SETTINGS, SETTINGS_BY_NAME,
    SNAPSHOT_WRITER_DELAY_KEY, ConfigError, Reader, settings_field)

# The keys a test broker's client listener reads (listener_security_from_properties).
_LISTENER_KEYS = frozenset(s.name for s in SETTINGS if s.group in (LISTENER_SECURITY, AUTHORIZER, DELEGATION_TOKENS))

# Refused rather than ignored: each changes what a Kafka controller does, and kraftwire lacks it.
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
    broker_session_timeout_ms: int = settings_field("broker.session.timeout.ms")
    socket_request_max_bytes: int = settings_field("socket.request.max.bytes")
    metadata_log_segment_bytes: int = settings_field("metadata.log.segment.bytes")
    metadata_log_max_record_bytes_between_snapshots: int = settings_field(
        "metadata.log.max.record.bytes.between.snapshots")
    metadata_max_idle_interval_ms: int = settings_field("metadata.max.idle.interval.ms")
    num_partitions: int = settings_field("num.partitions")
    default_replication_factor: int = settings_field("default.replication.factor")
    min_insync_replicas: int = settings_field("min.insync.replicas")
    unclean_leader_election_enable: bool = settings_field("unclean.leader.election.enable")
    eligible_leader_replicas_enabled: bool = settings_field("eligible.leader.replicas.enabled")
    max_request_partition_size_limit: int = settings_field("max.request.partition.size.limit")
    metadata_nodes: str = settings_field("kraftwire.metadata.nodes")
    # The Raft core's timing; QuorumConfig.from_controller hands them on.
    quorum_election_timeout_ms: int = settings_field("controller.quorum.election.timeout.ms")
    quorum_election_backoff_max_ms: int = settings_field("controller.quorum.election.backoff.max.ms")
    quorum_fetch_timeout_ms: int = settings_field("controller.quorum.fetch.timeout.ms")
    quorum_request_timeout_ms: int = settings_field("controller.quorum.request.timeout.ms")
    quorum_retry_backoff_ms: int = settings_field("controller.quorum.retry.backoff.ms")
    quorum_append_linger_ms: int = settings_field("controller.quorum.append.linger.ms")
    security: SecurityConfig = field(default_factory=SecurityConfig)
    # How this voter connects to the others: the controller listener's protocol, client side.
    controller_client: ClientSecurity = field(default_factory=ClientSecurity)
    metrics_port: int | None = settings_field("kraftwire.metrics.port")  # None: no metrics endpoint
    log_format: str = settings_field("kraftwire.log.format")
    snapshot_writer_delay_ms: int = settings_field(SNAPSHOT_WRITER_DELAY_KEY)
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


# --- the keys that depend on each other ---------------------------------------------------------

_HOST_PORT = re.compile(r"(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]\s]*)):(?P<port>[0-9]{1,5})")
_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_-]+)://(?P<endpoint>.*)")
_VOTER = re.compile(r"(?P<id>[0-9]+)@(?P<endpoint>.*)")


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


def _bootstrap_servers(reader: Reader) -> list[tuple[str, int]]:
    key = "controller.quorum.bootstrap.servers"
    return [_host_port(key, item, item, "host:port") for item in reader.value(key)]


def _voters(reader: Reader) -> dict[int, tuple[str, int]]:
    key = "controller.quorum.voters"
    voters: dict[int, tuple[str, int]] = {}
    for item in reader.value(key):
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


def _process_roles(reader: Reader) -> list[str]:
    key = "process.roles"
    roles: list[str] = reader.value(key)
    if roles != ["controller"]:
        raise ConfigError(key, f"kraftwire runs as a dedicated KRaft controller, so this must be "
                               f"exactly 'controller' (got {reader.raw[key]!r}); run brokers as "
                               f"separate processes")
    return roles


def _controller_listener(reader: Reader) -> tuple[list[Listener], list[str]]:
    """listeners and controller.listener.names: one listener, the controller's, as kraftwire
    serves a single socket (Kafka's controller may serve several)."""
    listeners = _listeners("listeners", reader.value("listeners"))
    controller_names = [name.upper() for name in reader.value("controller.listener.names")]
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


def _security_map(reader: Reader, listeners: list[Listener],
                  controller_names: list[str]) -> dict[str, str]:
    key = "listener.security.protocol.map"
    items: list[str] | None = reader.value(key)
    if items is None:
        given = {p: p for p in PROTOCOLS} | {n: "PLAINTEXT" for n in controller_names if n not in PROTOCOLS}
    else:
        given = {}
        for item in items:
            name, sep, protocol = item.partition(":")
            protocol = protocol.strip().upper()
            if not sep or protocol not in PROTOCOLS:
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


def _log_dirs(reader: Reader) -> tuple[Path, list[Path]]:
    data_dirs: list[str] = reader.value("log.dirs") or reader.value("log.dir")
    metadata_dir: str | None = reader.value("metadata.log.dir") or (data_dirs[0] if data_dirs else None)
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
    reader = Reader(props)
    for key in sorted(props):
        prefix = next((p for p in _UNSUPPORTED_PREFIXES if key.startswith(p)), None)
        if prefix is not None and not _JAAS_KEY.fullmatch(key):
            raise ConfigError(key, _UNSUPPORTED_PREFIXES[prefix])
        if key not in SETTINGS_BY_NAME and key not in IGNORED_KEYS and not _JAAS_KEY.fullmatch(key):
            raise ConfigError(key, "unknown configuration key")

    roles = _process_roles(reader)
    node_id: int = reader.value("node.id")

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
    given: list[str] | None = reader.value("advertised.listeners")
    if given is not None:
        advertised = _listeners("advertised.listeners", given)
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
        security=security,
        controller_client=_controller_client(reader, security, listeners[0].name, len(voters) or len(bootstrap) + 1),
        ignored=sorted(key for key in props if key in IGNORED_KEYS),
        **reader.field_values(ControllerConfig),
    )


# --- security -------------------------------------------------------------------------------

def _security(reader: Reader, listener: str, protocol: str) -> SecurityConfig:
    """TLS, SASL, authorization and connection limits."""
    return replace(_listener_security(reader, listener, protocol), authorizer=_authorizer(reader),
                   delegation_tokens=_delegation_tokens(reader))


def _listener_security(reader: Reader, listener: str, protocol: str) -> SecurityConfig:
    """TLS, SASL and connection limits of one listener."""
    reader.value("ssl.keystore.type")
    reader.value("ssl.truststore.type")
    client_auth: str = reader.value("ssl.client.auth")
    tls = TlsSettings(reader.value("ssl.keystore.location"), reader.value("ssl.keystore.key"),
                      reader.value("ssl.keystore.certificate.chain"), reader.value("ssl.key.password"),
                      reader.value("ssl.truststore.location"), reader.value("ssl.truststore.certificates"),
                      client_auth)
    if protocol in TLS_PROTOCOLS and tls.keystore_location is None and (
            tls.keystore_key is None or tls.keystore_certificate_chain is None):
        raise ConfigError("ssl.keystore.location", f"listener {listener} uses {protocol} and needs a keystore "
                                                   f"(or ssl.keystore.key and ssl.keystore.certificate.chain)")
    try:
        rules = tuple(parse_mapping_rules(reader.value("ssl.principal.mapping.rules")))
    except ValueError as exc:
        raise ConfigError("ssl.principal.mapping.rules", str(exc)) from None

    mechanisms: tuple[str, ...] = ()
    users: dict[str, str] = {}
    if protocol in SASL_PROTOCOLS:
        mechanisms = tuple(m.upper() for m in reader.value("sasl.enabled.mechanisms"))
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
    return SecurityConfig(
        protocol=protocol, tls=tls, principal_rules=rules, sasl_mechanisms=mechanisms, plain_users=users,
        queued_max_request_bytes=reader.value("queued.max.request.bytes"),
        connections_max_idle_ms=reader.value("connections.max.idle.ms"),
        connections_max_reauth_ms=reader.value("connections.max.reauth.ms"),
        sasl_server_max_receive_size=reader.value("sasl.server.max.receive.size"))


def _authorizer(reader: Reader) -> AuthorizerConfig | None:
    if reader.value("authorizer.class.name") is None:
        return None
    given: str = reader.value("super.users") or ""
    super_users = frozenset(u.strip() for u in given.split(";") if u.strip())
    for user in super_users:
        if ":" not in user:
            raise ConfigError("super.users", f"expected principals as Type:name separated by ';', got {user!r}")
    return AuthorizerConfig(super_users, reader.value("allow.everyone.if.no.acl.found"))


def listener_security_from_properties(props: dict[str, str]) -> tuple[str, SecurityConfig]:
    """The name and security of one listener from Kafka broker properties, as a test broker's
    client listener reads them: listener.security.protocol.map naming that listener alone, its
    TLS, SASL and connection keys as the controller reads them, and the SASL users in
    listener.name.<listener>.<mechanism>.sasl.jaas.config. As on a Kafka broker, the authorizer
    keys judge what the broker answers from its image (the controller judges what it forwards)
    and the delegation token keys let token holders log in. ConfigError names the offending key."""
    reader = Reader(props)
    key = "listener.security.protocol.map"
    for name in sorted(props):
        if name not in _LISTENER_KEYS and name != key and not _JAAS_KEY.fullmatch(name):
            raise ConfigError(name, "unknown listener configuration key")
    entries: list[str] = reader.value(key) or []
    if len(entries) != 1:
        raise ConfigError(key, f"expected the one listener as NAME:PROTOCOL, got {reader.raw.get(key) or 'nothing'!r}")
    name, sep, protocol = entries[0].partition(":")
    name, protocol = name.strip().upper(), protocol.strip().upper()
    if not sep or not re.fullmatch(r"[A-Z0-9_-]+", name) or protocol not in PROTOCOLS:
        raise ConfigError(key, f"expected NAME:PROTOCOL with a Kafka security protocol, got {entries[0]!r}")
    return name, _security(reader, name, protocol)


def _controller_client(reader: Reader, security: SecurityConfig, listener: str, voters: int) -> ClientSecurity:
    """The client side of the controller listener, as Kafka's voters connect to each other: its
    protocol, its stores (the keystore is the client certificate where ssl.client.auth asks for
    one), and for SASL the mechanism sasl.mechanism.controller.protocol names with the username
    and password of that mechanism's JAAS configuration on the listener."""
    check_hostname = reader.value("ssl.endpoint.identification.algorithm") == "https"
    key = "sasl.mechanism.controller.protocol"
    mechanism: str = reader.value(key)
    if voters == 1 or not security.uses_sasl:
        # A single voter connects to nobody: nothing here is used.
        return ClientSecurity(security.protocol, security.tls, check_hostname)
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(key, f"the voters connect to each other with this mechanism; {mechanism} is not "
                               f"supported, set one of {', '.join(SUPPORTED_MECHANISMS)}")
    if mechanism not in security.sasl_mechanisms:
        raise ConfigError(key, f"{mechanism} is not in sasl.enabled.mechanisms "
                               f"({', '.join(security.sasl_mechanisms)}), so the other voters would refuse it")
    jaas_key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = reader.raw.get(jaas_key)
    if not jaas:
        raise ConfigError(jaas_key, f"is required: it holds the username and password this voter uses "
                                    f"to reach the others with {mechanism}")
    try:
        username, password = jaas_credentials(jaas, mechanism)
    except ValueError as exc:
        raise ConfigError(jaas_key, str(exc)) from None
    return ClientSecurity(security.protocol, security.tls, check_hostname, mechanism, username, password)


def _delegation_tokens(reader: Reader) -> TokenSettings:
    return TokenSettings(
        reader.value("delegation.token.secret.key") or reader.value("delegation.token.master.key"),
        reader.value("delegation.token.max.lifetime.ms"), reader.value("delegation.token.expiry.time.ms"))


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
