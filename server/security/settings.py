"""The security part of a controller's configuration, once validated, with the settings table's
defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.controller.delegation_tokens import TokenSettings
from server.security.acl import AuthorizerConfig
from server.security.tls import MappingRule, TlsSettings
from server.settings import default

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityProtocol:
    """What a Kafka security protocol name (a listener's or a client's) asks for."""
    protocol: str

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


@dataclass(frozen=True)
class SecurityConfig(SecurityProtocol):
    protocol: str = "PLAINTEXT"  # of the controller listener
    tls: TlsSettings = field(default_factory=TlsSettings)
    principal_rules: tuple[MappingRule, ...] = (MappingRule(None),)
    sasl_mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)  # from the listener's PLAIN JAAS
    authorizer: AuthorizerConfig | None = None  # None: no authorizer, every request is allowed
    # -1: no bound on the bytes buffered in total
    queued_max_request_bytes: int = default("queued.max.request.bytes")
    connections_max_idle_ms: int = default("connections.max.idle.ms")
    connections_max_reauth_ms: int = default("connections.max.reauth.ms")
    # The largest frame before SASL authentication (Kafka's sasl.server.max.receive.size); -1: none.
    sasl_server_max_receive_size: int = default("sasl.server.max.receive.size")
    delegation_tokens: TokenSettings = field(default_factory=TokenSettings)


# Kafka's SecurityProtocol ids, as a broker's registration names its listeners' protocols.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
