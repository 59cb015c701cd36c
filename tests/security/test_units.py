"""The security pieces on their own: the authorizer (StandardAuthorizerTest's scenarios), the
SCRAM and PLAIN servers against kafka-python's SCRAM client, JAAS entries, certificate names
and mapping rules, and the configuration errors."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Callable

import pytest

from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType
from server.config import ConfigError, config_from_properties
from server.security.acl import AclIndex, AuthorizerConfig, authorize
from server.security.errors import AuthenticationFailed
from server.security.plain import PlainServer, parse_jaas, plain_users
from server.security.sasl import SaslSession
from server.security.scram import (
    ScramCredential, ScramServer, TokenCredential, credential_from_salted_password,
    salted_password, token_credential)
from server.security.tls import distinguished_name, map_principal_name, parse_mapping_rules
from tests.support.security import BASE

TOPIC, CLUSTER = AclResourceType.TOPIC, AclResourceType.CLUSTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


@dataclass(frozen=True)
class Entry:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


def entry(name: str, op: AclOperation, permission: AclPermissionType = ALLOW, principal: str = "User:alice",
          pattern: PatternType = LITERAL, host: str = "*", rtype: AclResourceType = TOPIC) -> Entry:
    return Entry(rtype, name, pattern, principal, host, op, permission)


def allowed(acls: list[Entry], op: AclOperation, name: str = "foo", principal: str = "User:alice",
            host: str = "10.0.0.1", config: AuthorizerConfig = AuthorizerConfig(),
            rtype: AclResourceType = TOPIC) -> bool:
    index: AclIndex[int, Entry] = AclIndex()
    for key, acl in enumerate(acls):
        index.add(key, acl)
    return authorize(principal, host, op, rtype, name, index, config)


def test_super_users_may_do_anything() -> None:
    config = AuthorizerConfig(frozenset({"User:admin"}))
    assert allowed([entry("foo", AclOperation.READ, DENY, "User:admin")], AclOperation.ALTER, principal="User:admin",
                   config=config)


def test_nothing_without_an_acl_unless_everyone_is_allowed() -> None:
    assert not allowed([], AclOperation.READ)
    assert allowed([], AclOperation.READ, config=AuthorizerConfig(allow_everyone_if_no_acl_found=True))
    # An ACL on the resource for someone else: the "no ACL found" rule no longer applies.
    assert not allowed([entry("foo", AclOperation.READ, principal="User:bob")], AclOperation.READ,
                       config=AuthorizerConfig(allow_everyone_if_no_acl_found=True))


def test_deny_wins_over_allow() -> None:
    acls = [entry("foo", AclOperation.ALL), entry("fo", AclOperation.WRITE, DENY, pattern=PREFIXED)]
    assert allowed(acls, AclOperation.READ)
    assert not allowed(acls, AclOperation.WRITE)


def test_prefixed_literal_and_wildcard_resources() -> None:
    assert allowed([entry("fo", AclOperation.READ, pattern=PREFIXED)], AclOperation.READ, "foobar")
    assert not allowed([entry("foobar", AclOperation.READ, pattern=PREFIXED)], AclOperation.READ, "foo")
    assert allowed([entry("*", AclOperation.READ)], AclOperation.READ, "anything")
    assert not allowed([entry("foo", AclOperation.READ)], AclOperation.READ, "foobar")


def test_principals_and_hosts() -> None:
    assert allowed([entry("foo", AclOperation.READ, principal="User:*")], AclOperation.READ, principal="User:zed")
    assert not allowed([entry("foo", AclOperation.READ, host="10.0.0.2")], AclOperation.READ)
    assert allowed([entry("foo", AclOperation.READ, host="10.0.0.1")], AclOperation.READ)


def test_implied_operations() -> None:
    for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER):
        assert allowed([entry("foo", op)], AclOperation.DESCRIBE)
    assert allowed([entry("foo", AclOperation.ALTER_CONFIGS)], AclOperation.DESCRIBE_CONFIGS)
    assert not allowed([entry("foo", AclOperation.DESCRIBE)], AclOperation.READ)
    # A DENY of READ does not deny DESCRIBE.
    assert allowed([entry("foo", AclOperation.DESCRIBE), entry("foo", AclOperation.READ, DENY)], AclOperation.DESCRIBE)


def scram_exchange(server: ScramServer, user: str, password: str, mechanism: str) -> None:
    from kafka.net.sasl.scram import ScramClient

    client = ScramClient(user, password, mechanism)
    client.process_server_first_message(server.respond(client.first_message()))
    client.process_server_final_message(server.respond(client.final_message()))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_kafka_pythons_client(mechanism: str) -> None:
    salt = b"0123456789abcdef"
    credential = credential_from_salted_password(mechanism, salt, salted_password(mechanism, "pencil", salt, 4096), 4096)
    store = {("user", mechanism): credential}
    server = ScramServer(mechanism, lambda u, m: store.get((u, m)))
    scram_exchange(server, "user", "pencil", mechanism)
    assert server.complete and server.username == "user"
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        scram_exchange(ScramServer(mechanism, lambda u, m: store.get((u, m))), "user", "wrong", mechanism)
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        scram_exchange(ScramServer(mechanism, lambda u, m: store.get((u, m))), "nobody", "pencil", mechanism)


def _final_message(mechanism: str, password: str, salt: bytes, client_first_bare: str, server_first: str,
                   nonce: str) -> bytes:
    """A client-final message built by hand, with whatever nonce a client sends."""
    digest = "sha" + mechanism.rsplit("-", 1)[1]
    without_proof = f"c=biws,r={nonce}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted_password(mechanism, password, salt, 4096), b"Client Key", digest).digest()
    signature = hmac.new(hashlib.new(digest, client_key).digest(), auth, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_a_final_nonce_that_repeats_the_client_nonce_logs_in_as_kafka_3_9_lets_it() -> None:
    """librdkafka before 2.6.1 (Debian's kcat 1.7.1) sends the client nonce, then the whole
    nonce; Kafka 3.9's ScramSaslServer accepts a final nonce that ends with the server's."""
    mechanism, salt = "SCRAM-SHA-512", b"0123456789abcdef"
    credential = credential_from_salted_password(mechanism, salt, salted_password(mechanism, "pencil", salt, 4096),
                                                 4096)

    def login(nonce_of: Callable[[str], str]) -> bytes:
        server = ScramServer(mechanism, lambda u, m: credential)
        bare = "n=user,r=clientnonce"
        server_first = server.respond(f"n,,{bare}".encode()).decode()
        nonce = server_first.split(",")[0].removeprefix("r=")
        return server.respond(_final_message(mechanism, "pencil", salt, bare, server_first, nonce_of(nonce)))

    assert login(lambda nonce: nonce).startswith(b"v=")
    assert login(lambda nonce: "clientnonce" + nonce).startswith(b"v=")
    with pytest.raises(AuthenticationFailed, match="invalid SCRAM client-final message"):
        login(lambda nonce: nonce[:-1])  # the server's nonce must still be there


def test_scram_with_tokenauth_logs_in_as_the_tokens_owner() -> None:
    """Kafka's ScramExtensions: tokenauth=true after the nonce asks the token lookup, not the
    user credentials; the user is then the token's owner."""
    from tests.support.secured_clients import scram_client

    mechanism, mac = "SCRAM-SHA-256", b"the token's hmac"

    def lookup(token_id: str, mechanism: str) -> TokenCredential:
        if token_id != "token-1":
            raise AuthenticationFailed("unknown token")
        return token_credential(mechanism, "alice", mac)

    server = ScramServer(mechanism, lambda u, m: None, lookup)
    client = scram_client("token-1", base64.b64encode(mac).decode(), mechanism, token=True)
    client.process_server_first_message(server.respond(client.first_message()))
    client.process_server_final_message(server.respond(client.final_message()))
    assert server.complete and (server.username, server.token_authenticated) == ("alice", True)
    without_lookup = ScramServer(mechanism, lambda u, m: None)
    with pytest.raises(AuthenticationFailed, match="delegation tokens are not enabled"):
        without_lookup.respond(scram_client("token-1", "x", mechanism, token=True).first_message())


@pytest.mark.parametrize("token", [b"", b"junk", b"n,,", b"p=tls-unique,,n=user,r=abc", "n,,n=ü".encode("latin-1")])
def test_malformed_scram_messages_fail_cleanly(token: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lambda u, m: ScramCredential(b"s", b"k", b"k", 4096))
    with pytest.raises(AuthenticationFailed):
        server.respond(token)


def test_plain() -> None:
    assert PlainServer({"alice": "secret"}).respond(b"\0alice\0secret") == b""
    for token, message in [(b"\0alice\0nope", "Invalid username or password"), (b"alice", "expected 3 tokens"),
                           (b"bob\0alice\0secret", "authorization id"), (b"\0\0", "not specified")]:
        with pytest.raises(AuthenticationFailed, match=message):
            PlainServer({"alice": "secret"}).respond(token)


def test_sasl_session_states() -> None:
    session = SaslSession(("PLAIN",), {"alice": "secret"}, lambda u, m: None, reauth_ms=1000)
    assert session.allows(3, now=0.0) is not None  # Metadata before authentication
    assert session.allows(18, now=0.0) is None  # ApiVersions
    assert not session.handshake("SCRAM-SHA-512")
    assert session.handshake("PLAIN")
    assert session.authenticate(b"\0alice\0secret", now=10.0) == (b"", 1000)
    assert session.allows(3, now=10.5) is None
    assert "expired" in (session.allows(3, now=11.0) or "")
    # Re-authenticating as someone else is refused.
    session = SaslSession(("PLAIN",), {"alice": "a", "bob": "b"}, lambda u, m: None, reauth_ms=60_000)
    session.handshake("PLAIN")
    session.authenticate(b"\0alice\0a", now=0.0)
    session.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed, match="same principal"):
        session.authenticate(b"\0bob\0b", now=1.0)


def test_jaas_entries() -> None:
    module, options = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                 'username="admin" password="a \\"quoted\\" one" user_admin="x" user_bob=y;')
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert options["password"] == 'a "quoted" one'
    assert plain_users(options) == {"admin": "x", "bob": "y"}
    for bad in ("", "Module required", "Module maybe x=1;", 'Module required x="open;'):
        with pytest.raises(ValueError):
            parse_jaas(bad)


def test_certificate_names_and_mapping_rules() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),), (("commonName", "broker-1"),))
    dn = distinguished_name({"subject": subject})
    assert dn == "CN=broker-1,O=Acme\\, Inc.,C=US"
    rules = parse_mapping_rules("RULE:^CN=(.*?),O=.*$/$1/U, DEFAULT")
    assert map_principal_name(dn, rules) == "BROKER-1"
    assert map_principal_name("OU=x", rules) == "OU=x"
    with pytest.raises(ValueError):
        parse_mapping_rules("RULE:[/x/")


JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'


@pytest.mark.parametrize("props,key,words", [
    ({"listener.security.protocol.map": "CONTROLLER:SASL_SSL", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.controller.plain.sasl.jaas.config": JAAS}, "ssl.keystore.location", "keystore"),
    ({"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN"},
     "listener.name.controller.plain.sasl.jaas.config", "is required"),
    ({"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER"},
     "sasl.enabled.mechanisms", "OAUTHBEARER is not supported"),
    ({"listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.controller.plain.sasl.jaas.config": "nonsense"},
     "listener.name.controller.plain.sasl.jaas.config", "expected one entry"),
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type", "only PEM"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth", "required, requested or none"),
    ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "authorizer.class.name", "StandardAuthorizer"),
    ({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "admin"},
     "super.users", "Type:name"),
    ({"queued.max.request.bytes": "0"}, "queued.max.request.bytes", "positive"),
    ({"ssl.principal.mapping.rules": "RULE:oops"}, "ssl.principal.mapping.rules", "cannot read"),
    ({"listener.name.controller.ssl.keystore.location": "/k"}, "listener.name.controller.ssl.keystore.location",
     "sasl.jaas.config"),
])
def test_security_config_errors_name_their_key(props: dict[str, str], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        config_from_properties({**BASE, **props})
    assert excinfo.value.key == key and words in excinfo.value.message


def test_idle_connections_are_closed(controller_factory) -> None:
    from protocol.client import KafkaClient
    from protocol.generated.messages.api_versions_request import ApiVersionsRequest
    from tests.support.wire import closed_by_peer

    controller = controller_factory({"connections.max.idle.ms": "300"})
    client = KafkaClient(controller.host, controller.port)
    try:
        assert client.request(ApiVersionsRequest(), 3).error_code == 0
        # The server closes the quiet connection by itself, and says why.
        assert closed_by_peer(client.sock, timeout=60)
        controller.wait_for_stderr(r"closing connection from \S+: idle for longer than "
                                   r"connections.max.idle.ms=300", timeout=60)
        assert controller.running
    finally:
        client.close()
