"""Every server.properties key kraftwire reads, each stated once: its Kafka name, how its text is
read, its default (Kafka's, where Kafka defines one), the values it accepts and what it does.

The table drives the reading (server/config.py builds the configuration with it), the check that
refuses unknown keys, the defaults of the configurations built from it (the quorum's included)
and the settings tables of the documentation (written by ``python -m tools.settings_doc``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# For tests only: so that a test can kill the controller while a forked snapshot writer is at work.
SNAPSHOT_WRITER_DELAY_KEY = "kraftwire.test.snapshot.writer.delay.ms"
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration problem, attributed to the key (or file line) that causes it."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


# --- how a value's text is read ------------------------------------------------------------------

_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Kind(Generic[T]):
    """How a setting's text becomes a value. A blank value is read as the setting left out
    where ``blank_is_unset``; elsewhere it is a value (an empty map, an empty string) or a
    malformed one (a number, a boolean), as Kafka reads it."""

    read: Callable[[str, str], T]  # (key, text) -> value; ConfigError when the text is no value
    words: str  # what the documentation calls the values
    blank_is_unset: bool


def _number(maximum: int | None) -> Callable[[str, str], int]:
    def read(key: str, text: str) -> int:
        if not _INT.fullmatch(text):
            raise ConfigError(key, f"expected an integer, got {text!r}")
        value = int(text)
        if maximum is not None and value > maximum:
            raise ConfigError(key, f"must be at most {maximum}, got {value}")
        return value
    return read


def _bool(key: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ConfigError(key, f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _items(key: str, text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


INT: Kind[int] = Kind(_number(INT32_MAX), "int", blank_is_unset=False)
LONG: Kind[int] = Kind(_number(INT64_MAX), "long", blank_is_unset=False)
# A number whose blank means "none"; its check bounds it.
OPTIONAL_INT: Kind[int] = Kind(_number(None), "int", blank_is_unset=True)
BOOL: Kind[bool] = Kind(_bool, "true or false", blank_is_unset=False)
TEXT: Kind[str] = Kind(lambda key, text: text, "text", blank_is_unset=True)
UPPER: Kind[str] = Kind(lambda key, text: text.upper(), "text, any case", blank_is_unset=True)
LOWER: Kind[str] = Kind(lambda key, text: text.lower(), "text, any case", blank_is_unset=True)
# Text where blank is a value of its own, as an empty ssl.endpoint.identification.algorithm is.
LOWER_OR_BLANK: Kind[str] = Kind(lambda key, text: text.lower(), "text, any case", blank_is_unset=False)
# File paths and PEM text, kept as written.
PATH: Kind[str] = Kind(lambda key, text: text, "text", blank_is_unset=False)
LIST: Kind[list[str]] = Kind(_items, "list", blank_is_unset=True)
# NAME:VALUE pairs, where blank is a map with no entries rather than the default one.
MAP: Kind[list[str]] = Kind(_items, "NAME:VALUE list", blank_is_unset=False)


# --- what values a setting accepts ---------------------------------------------------------------

@dataclass(frozen=True)
class AtLeast:
    minimum: int

    def problem(self, value: int) -> str | None:
        return None if value >= self.minimum else f"must be at least {self.minimum}, got {value}"

    def __str__(self) -> str:
        return f">= {self.minimum}"


@dataclass(frozen=True)
class Between:
    minimum: int
    maximum: int

    def problem(self, value: int) -> str | None:
        if value > self.maximum:
            return f"must be at most {self.maximum}, got {value}"
        return AtLeast(self.minimum).problem(value)

    def __str__(self) -> str:
        return f"{self.minimum}..{self.maximum}"


@dataclass(frozen=True)
class PositiveOrNoBound:
    """Kafka's -1 for "no bound"; 0 would refuse everything, so it is an error."""

    def problem(self, value: int) -> str | None:
        if value == 0:
            return "must be positive, or -1 for no bound"
        return AtLeast(-1).problem(value)

    def __str__(self) -> str:
        return ">= 1, or -1 (no bound)"


@dataclass(frozen=True)
class OneOf:
    choices: tuple[str, ...]
    expected: str = ""  # how an error names the choices, where not "one of a, b"

    def problem(self, value: str) -> str | None:
        if value in self.choices:
            return None
        return f"expected {self.expected or 'one of ' + ', '.join(self.choices)}, got {value!r}"

    def __str__(self) -> str:
        shown = [f"`{choice}`" if choice else "empty" for choice in self.choices]
        return f"{', '.join(shown[:-1])} or {shown[-1]}"


@dataclass(frozen=True)
class Only:
    """The one value of several Kafka accepts that kraftwire implements."""

    value: str
    supported: str = ""  # how an error says it, where not "only <value> is supported"

    def problem(self, value: str) -> str | None:
        if value == self.value:
            return None
        return f"{self.supported or f'only {self.value} is supported'}, got {value}"

    def __str__(self) -> str:
        return f"only `{self.value}`"


Check = AtLeast | Between | PositiveOrNoBound | OneOf | Only


# --- the table ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting(Generic[T]):
    name: str
    kind: Kind[T]
    default: T | None  # None: unset, unless ``required``
    check: Check | None
    doc: str
    group: str
    required: bool = False
    shown_default: str = ""  # the default as the documentation says it, where it is no value

    @property
    def default_text(self) -> str | None:
        """The default as a properties file would write it; None where there is none to write."""
        if self.default is None or self.default == []:
            return None
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, list):
            return ",".join(self.default)
        return str(self.default)


# The groups, in the order the documentation lists them.
NODE = "the node"
QUORUM = "the quorum"
VOTER_CONNECTIONS = "the voters' connections to each other"
CONTROLLER = "the controller"
LISTENER_SECURITY = "the listener's security"
AUTHORIZER = "the authorizer"
DELEGATION_TOKENS = "delegation tokens"
KRAFTWIRE = "kraftwire's own"
GROUPS = (NODE, QUORUM, VOTER_CONNECTIONS, CONTROLLER, LISTENER_SECURITY, AUTHORIZER, DELEGATION_TOKENS,
          KRAFTWIRE)

SETTINGS: tuple[Setting[Any], ...] = (
    Setting("process.roles", LIST, None, None,
            'exactly "controller": kraftwire is a dedicated KRaft controller', NODE, required=True),
    Setting("node.id", INT, None, AtLeast(0),
            "this node's id, unique among the cluster's brokers and controllers; one of the voters of a "
            "static quorum", NODE, required=True),
    Setting("listeners", LIST, None, None,
            "the one listener, `NAME://host:port`; an empty host binds every interface", NODE, required=True),
    Setting("advertised.listeners", LIST, None, None,
            "`NAME://host:port`, NAME as in listeners: where brokers and clients are told to reach this "
            "controller", NODE, shown_default="listeners"),
    Setting("controller.listener.names", LIST, None, None, "the name of the listener", NODE, required=True),
    Setting("listener.security.protocol.map", MAP, None, None,
            "`NAME:PROTOCOL,...`: each listener's security protocol", NODE, shown_default="see below"),
    Setting("metadata.log.dir", TEXT, None, None,
            "the directory of the metadata log, meta.properties and the snapshots", NODE,
            shown_default="log.dirs' first"),
    Setting("log.dirs", LIST, [], None, "the log directories; the first holds the metadata log without "
            "metadata.log.dir", NODE),
    Setting("log.dir", LIST, [], None, "read only without log.dirs", NODE),

    Setting("controller.quorum.voters", LIST, [], None,
            "a static quorum: every voter as `id@host:port` ([ipv6] hosts); one voter is a quorum of one",
            QUORUM),
    Setting("controller.quorum.bootstrap.servers", LIST, [], None,
            "a dynamic quorum (KIP-853): `host:port,...` where a controller asks for the leader (set this or "
            "the voters)", QUORUM),
    Setting("controller.quorum.election.timeout.ms", INT, 1000, AtLeast(1),
            "a voter that hears from no leader starts an election after a random wait of one to two of "
            "these", QUORUM),
    Setting("controller.quorum.fetch.timeout.ms", INT, 2000, AtLeast(1),
            "a follower that has not fetched from its leader this long starts a (pre-)vote; a leader not "
            "fetched from by a majority for 1.5 times this long resigns", QUORUM),
    Setting("controller.quorum.election.backoff.max.ms", INT, 1000, AtLeast(0),
            "after a leader resigns, how long the last of its named successors waits before standing",
            QUORUM),
    Setting("controller.quorum.request.timeout.ms", INT, 2000, AtLeast(1),
            "a quorum request not answered in this time is retried", QUORUM),
    Setting("controller.quorum.retry.backoff.ms", INT, 20, AtLeast(0),
            "the pause before asking a voter again after a failure", QUORUM),
    Setting("controller.quorum.append.linger.ms", INT, 25, AtLeast(0),
            "how long the leader gathers writes before one fsync (the followers' fsyncs usually commit "
            "them first)", QUORUM),

    Setting("sasl.mechanism.controller.protocol", UPPER, "GSSAPI", None,
            "with several voters on a SASL listener, the mechanism they log in to each other with: PLAIN, "
            "SCRAM-SHA-256 or SCRAM-SHA-512, enabled on the listener, with the username and password of its "
            "`listener.name.<listener>.<mechanism>.sasl.jaas.config`", VOTER_CONNECTIONS),
    Setting("ssl.endpoint.identification.algorithm", LOWER_OR_BLANK, "https",
            OneOf(("https", ""), "https or empty (no host name check)"),
            "https checks the other voters' host names against their certificates; empty does not",
            VOTER_CONNECTIONS),

    Setting("broker.session.timeout.ms", INT, 9000, AtLeast(1),
            "a broker that sends no heartbeat for this long is fenced", CONTROLLER),
    Setting("socket.request.max.bytes", INT, 104857600, AtLeast(1024),
            "the largest request frame read", CONTROLLER),
    # Kafka insists on far larger segments; small ones let tests roll segments quickly.
    Setting("metadata.log.segment.bytes", INT, 1073741824, AtLeast(4096),
            "the size at which a metadata log segment is rolled", CONTROLLER),
    Setting("metadata.log.max.record.bytes.between.snapshots", LONG, 20971520, AtLeast(1),
            "a snapshot is taken after this many bytes of log", CONTROLLER),
    Setting("metadata.max.idle.interval.ms", INT, 500, AtLeast(0),
            "the active controller appends a NoOpRecord this often (KIP-835); 0 turns it off", CONTROLLER),
    Setting("num.partitions", INT, 1, AtLeast(1), "partitions of a topic created without a count",
            CONTROLLER),
    Setting("default.replication.factor", INT, 1, AtLeast(1),
            "replicas of a topic created without a replication factor", CONTROLLER),
    Setting("min.insync.replicas", INT, 1, AtLeast(1), "the topics' default min.insync.replicas", CONTROLLER),
    Setting("unclean.leader.election.enable", BOOL, False, None,
            "elect a replica outside the ISR when no ISR member is left", CONTROLLER),
    Setting("eligible.leader.replicas.enabled", BOOL, False, None,
            "keep eligible leader replicas (KIP-966)", CONTROLLER),
    Setting("max.request.partition.size.limit", INT, 2000, AtLeast(1),
            "the most partitions one CreateTopics or CreatePartitions request may create", CONTROLLER),

    Setting("ssl.keystore.type", UPPER, "PEM", Only("PEM", "only PEM stores are supported"), "the keystore's format",
            LISTENER_SECURITY),
    Setting("ssl.keystore.location", PATH, None, None,
            "a PEM file: the private key, then the certificate chain", LISTENER_SECURITY),
    Setting("ssl.keystore.key", PATH, None, None, "the private key as PEM text, instead of a file",
            LISTENER_SECURITY),
    Setting("ssl.keystore.certificate.chain", PATH, None, None,
            "the certificate chain as PEM text, with ssl.keystore.key", LISTENER_SECURITY),
    Setting("ssl.key.password", PATH, None, None, "opens an encrypted private key", LISTENER_SECURITY),
    Setting("ssl.truststore.type", UPPER, "PEM", Only("PEM", "only PEM stores are supported"),
            "the truststore's format", LISTENER_SECURITY),
    Setting("ssl.truststore.location", PATH, None, None, "a PEM file of the trusted CA certificates",
            LISTENER_SECURITY),
    Setting("ssl.truststore.certificates", PATH, None, None,
            "the trusted CA certificates as PEM text, instead of a file", LISTENER_SECURITY),
    Setting("ssl.client.auth", LOWER, "none",
            OneOf(("required", "requested", "none"), "required, requested or none"),
            "whether TLS clients present a certificate from the truststore's CA", LISTENER_SECURITY),
    Setting("ssl.principal.mapping.rules", TEXT, "DEFAULT", None,
            "rewrites a certificate's subject into the principal's name", LISTENER_SECURITY),
    Setting("sasl.enabled.mechanisms", LIST, ["GSSAPI"], None,
            "on a SASL listener: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", LISTENER_SECURITY),
    Setting("queued.max.request.bytes", INT, -1, PositiveOrNoBound(),
            "the request bytes read but not yet handled, over all authenticated connections",
            LISTENER_SECURITY),
    Setting("connections.max.idle.ms", INT, 600000, AtLeast(-1), "closes a connection silent this long",
            LISTENER_SECURITY),
    Setting("connections.max.reauth.ms", LONG, 0, AtLeast(0),
            "how long a SASL login lasts before the client must log in again; 0: for ever",
            LISTENER_SECURITY),
    Setting("sasl.server.max.receive.size", INT, 524288, PositiveOrNoBound(),
            "the largest frame read before a SASL login", LISTENER_SECURITY),

    Setting("authorizer.class.name", TEXT, None, Only(STANDARD_AUTHORIZER),
            "Kafka's StandardAuthorizer checks every request against the ACLs; unset, every request is "
            "allowed", AUTHORIZER),
    Setting("super.users", TEXT, None, None, "`Type:name;...`: principals every ACL check allows", AUTHORIZER),
    Setting("allow.everyone.if.no.acl.found", BOOL, False, None,
            "allow requests on resources that no ACL names", AUTHORIZER),

    Setting("delegation.token.secret.key", TEXT, None, None,
            "the key tokens are signed with; tokens are disabled without it", DELEGATION_TOKENS),
    Setting("delegation.token.master.key", TEXT, None, None,
            "the older name of delegation.token.secret.key, read when that is unset", DELEGATION_TOKENS),
    Setting("delegation.token.max.lifetime.ms", LONG, 7 * 24 * 3600 * 1000, AtLeast(1),
            "no renewal extends a token beyond this age", DELEGATION_TOKENS),
    Setting("delegation.token.expiry.time.ms", LONG, 24 * 3600 * 1000, AtLeast(1),
            "a token not renewed for this long expires", DELEGATION_TOKENS),

    Setting("kraftwire.metadata.nodes", TEXT, "brokers", OneOf(("controller", "brokers")),
            "the nodes Metadata names: the brokers, or only the controller itself", KRAFTWIRE),
    Setting("kraftwire.metrics.port", OPTIONAL_INT, None, Between(0, 65535),
            "serve Prometheus metrics on this port (0: any free port); unset, none are served", KRAFTWIRE),
    Setting("kraftwire.log.format", TEXT, "text", OneOf(("text", "json")),
            "log lines as text or as one JSON object a line", KRAFTWIRE),
    Setting(SNAPSHOT_WRITER_DELAY_KEY, INT, 0, AtLeast(0),
            "for tests: the forked snapshot writer waits this long before it writes", KRAFTWIRE),
)

SETTINGS_BY_NAME: dict[str, Setting[Any]] = {setting.name: setting for setting in SETTINGS}

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


_SETTING_KEY = "setting"  # the metadata key of a field made by settings_field


def default(name: str) -> Any:
    """The table's default of a setting, for a configuration's field."""
    return SETTINGS_BY_NAME[name].default


def settings_field(name: str) -> Any:
    """A configuration's field that holds one setting of the table as it is read, its default
    the table's; ``Reader.field_values`` reads every such field."""
    return field(default=default(name), metadata={_SETTING_KEY: name})


class Reader:
    """The settings of raw properties, read by the table. Kafka trims surrounding whitespace,
    so this does too."""

    def __init__(self, raw: dict[str, str]) -> None:
        self.raw = {key: value.strip() for key, value in raw.items()}

    def value(self, name: str) -> Any:
        """The value of setting ``name``, its default where it is unset; ConfigError names the
        key of a value that is malformed or out of bounds, or of a required one that is unset."""
        setting = SETTINGS_BY_NAME[name]
        text = self.raw.get(name)
        if text is None or (text == "" and (setting.required or setting.kind.blank_is_unset)):
            if setting.required:
                raise ConfigError(name, "is required")
            return setting.default
        value = setting.kind.read(name, text)
        if setting.check is not None and (problem := setting.check.problem(value)) is not None:
            raise ConfigError(name, problem)
        return value

    def field_values(self, cls: type) -> dict[str, Any]:
        """The values of ``cls``'s fields made with ``settings_field``, by field name."""
        return {f.name: self.value(f.metadata[_SETTING_KEY]) for f in fields(cls) if _SETTING_KEY in f.metadata}
