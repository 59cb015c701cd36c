"""server.config: Kafka-named properties files into a typed, validated ControllerConfig."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.config import (
    EMBEDDED_NODE_ID, IGNORED_KEYS, ConfigError, Listener, config_from_properties,
    embedded_config, load_config, parse_properties)
from server.settings import SETTINGS, Setting

BASE = {
    "process.roles": "controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "metadata.log.dir": "/var/kraft/meta",
}


def error_for(props: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        config_from_properties(props)
    return info.value


def with_(**changes: str | None) -> dict[str, str]:
    props = dict(BASE)
    for key, value in changes.items():
        key = key.replace("_", ".")
        if value is None:
            props.pop(key)
        else:
            props[key] = value
    return props


# --- every key --------------------------------------------------------------------------------

def test_every_key_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=controller\n"
        "node.id=2\n"
        "controller.quorum.voters=2@[::1]:9094\n"
        "listeners=controller://:9094\n"
        "advertised.listeners=CONTROLLER://ctl-2.example:9095\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL:SASL_PLAINTEXT,SSL:SSL\n"
        "metadata.log.dir=/data/meta\n"
        "log.dirs=/data/a,/data/meta,/data/b\n"
        "broker.session.timeout.ms=18000\n"
        "broker.heartbeat.interval.ms=3000\n"
        "socket.request.max.bytes=2048\n"
        "metadata.log.segment.bytes=8192\n"
        "metadata.log.max.record.bytes.between.snapshots=4294967296\n"
        "metadata.max.idle.interval.ms=0\n"
        "num.partitions=6\n"
        "default.replication.factor=3\n"
        "min.insync.replicas=2\n"
        "unclean.leader.election.enable=TRUE\n"
        "eligible.leader.replicas.enabled=true\n"
        "max.request.partition.size.limit=500\n"
        "kraftwire.metadata.nodes=controller\n"
        "num.network.threads=3\n"
        "log.retention.hours=168\n")
    cfg = load_config(path)
    assert cfg.process_roles == ["controller"]
    assert cfg.node_id == 2
    assert cfg.voters == {2: ("::1", 9094)}
    assert cfg.listeners == [Listener("CONTROLLER", "", 9094)]
    assert cfg.advertised_listeners == [Listener("CONTROLLER", "ctl-2.example", 9095)]
    assert cfg.controller_listener_names == ["CONTROLLER"]
    assert cfg.controller_listener == Listener("CONTROLLER", "", 9094)
    assert cfg.advertised_controller_listener == Listener("CONTROLLER", "ctl-2.example", 9095)
    assert cfg.listener_security_protocol_map == {"CONTROLLER": "PLAINTEXT"}
    assert cfg.metadata_log_dir == Path("/data/meta")
    assert cfg.log_dirs == [Path("/data/meta"), Path("/data/a"), Path("/data/b")]
    assert cfg.broker_session_timeout_ms == 18000
    assert cfg.socket_request_max_bytes == 2048
    assert cfg.metadata_log_segment_bytes == 8192
    assert cfg.metadata_log_max_record_bytes_between_snapshots == 4294967296
    assert cfg.metadata_max_idle_interval_ms == 0
    assert cfg.num_partitions == 6
    assert cfg.default_replication_factor == 3
    assert cfg.min_insync_replicas == 2
    assert cfg.unclean_leader_election_enable is True
    assert cfg.eligible_leader_replicas_enabled is True
    assert cfg.max_request_partition_size_limit == 500
    assert cfg.metadata_nodes == "controller"
    assert cfg.ignored == ["broker.heartbeat.interval.ms", "log.retention.hours", "num.network.threads"]


def test_defaults() -> None:
    cfg = config_from_properties(BASE)
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.advertised_controller_listener == Listener("CONTROLLER", "127.0.0.1", 9093)
    assert cfg.listener_security_protocol_map == {"CONTROLLER": "PLAINTEXT"}
    assert cfg.log_dirs == [Path("/var/kraft/meta")]
    assert cfg.broker_session_timeout_ms == 9000
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.metadata_log_segment_bytes == 1073741824
    assert cfg.metadata_log_max_record_bytes_between_snapshots == 20971520
    assert cfg.metadata_max_idle_interval_ms == 500
    assert (cfg.num_partitions, cfg.default_replication_factor, cfg.min_insync_replicas) == (1, 1, 1)
    assert cfg.unclean_leader_election_enable is False
    assert cfg.eligible_leader_replicas_enabled is False
    assert cfg.max_request_partition_size_limit == 2000
    assert cfg.metadata_nodes == "brokers"
    assert cfg.ignored == []


def test_embedded_config_is_a_single_node_quorum(tmp_path: Path) -> None:
    cfg = embedded_config(tmp_path, port=19093)
    assert cfg.node_id == EMBEDDED_NODE_ID
    assert cfg.voters == {EMBEDDED_NODE_ID: ("127.0.0.1", 19093)}
    assert cfg.controller_listener == Listener("CONTROLLER", "127.0.0.1", 19093)
    assert cfg.metadata_log_dir == tmp_path and cfg.log_dirs == [tmp_path]


def test_example_config_matches_the_embedded_default() -> None:
    example = Path(__file__).resolve().parents[2] / "config" / "controller.properties"
    assert load_config(example) == embedded_config(Path("./data/controller"))


def test_metadata_dir_falls_back_to_log_dirs_then_log_dir() -> None:
    props = with_(metadata_log_dir=None)
    cfg = config_from_properties({**props, "log.dirs": "/x, /y", "log.dir": "/z"})
    assert (cfg.metadata_log_dir, cfg.log_dirs) == (Path("/x"), [Path("/x"), Path("/y")])
    cfg = config_from_properties({**props, "log.dir": "/z"})
    assert (cfg.metadata_log_dir, cfg.log_dirs) == (Path("/z"), [Path("/z")])


def test_a_listener_on_every_interface_is_advertised_as_loopback_unless_told_otherwise() -> None:
    cfg = config_from_properties({**BASE, "listeners": "CONTROLLER://:9093"})
    assert cfg.advertised_controller_listener == Listener("CONTROLLER", "127.0.0.1", 9093)
    cfg = config_from_properties({**BASE, "listeners": "CONTROLLER://:9093",
                                  "advertised.listeners": "CONTROLLER://[2001:db8::7]:19093"})
    assert cfg.advertised_controller_listener == Listener("CONTROLLER", "2001:db8::7", 19093)


def test_every_ignored_key_is_accepted_and_reported() -> None:
    cfg = config_from_properties({**BASE, **{key: "1" for key in IGNORED_KEYS}})
    assert cfg.ignored == sorted(IGNORED_KEYS)


# --- errors name their key --------------------------------------------------------------------

@pytest.mark.parametrize("props, key, fragment", [
    ({**BASE, "node.idd": "1"}, "node.idd", "unknown"),
    ({**BASE, "node.id": "one"}, "node.id", "integer"),
    ({**BASE, "node.id": "-1"}, "node.id", "at least 0"),
    ({**BASE, "node.id": "3000000000"}, "node.id", "at most"),
    (with_(node_id=None), "node.id", "required"),
    (with_(process_roles=None), "process.roles", "required"),
    ({**BASE, "process.roles": "broker"}, "process.roles", "dedicated"),
    ({**BASE, "process.roles": "broker,controller"}, "process.roles", "dedicated"),
    ({**BASE, "controller.quorum.voters": "2@127.0.0.1:9093"}, "controller.quorum.voters", "node.id 1"),
    ({**BASE, "controller.quorum.voters": "1@127.0.0.1"}, "controller.quorum.voters", "id@host:port"),
    ({**BASE, "controller.quorum.voters": "1@h:1,1@h:2"}, "controller.quorum.voters", "twice"),
    ({**BASE, "controller.quorum.voters": "1@h:70000"}, "controller.quorum.voters", "out of range"),
    ({**BASE, "controller.quorum.election.timeout.ms": "0"}, "controller.quorum.election.timeout.ms", "at least"),
    ({**BASE, "controller.quorum.fetch.timeout.ms": "x"}, "controller.quorum.fetch.timeout.ms", "integer"),
    (with_(controller_quorum_voters=None), "controller.quorum.voters", "required"),
    ({**BASE, "controller.quorum.bootstrap.servers": "127.0.0.1:9093"},
     "controller.quorum.bootstrap.servers", "not both"),
    ({**BASE, "controller.listener.names": "CTL"}, "controller.listener.names", "CTL"),
    (with_(controller_listener_names=None), "controller.listener.names", "required"),
    (with_(listeners=None), "listeners", "required"),
    ({**BASE, "listeners": "127.0.0.1:9093"}, "listeners", "NAME://host:port"),
    ({**BASE, "listeners": "CONTROLLER://:1,CONTROLLER://:2"}, "listeners", "twice"),
    ({**BASE, "listeners": "CONTROLLER://:9093,PLAINTEXT://:9092"}, "listeners",
     "PLAINTEXT is not in controller.listener.names"),
    ({**BASE, "listeners": "CONTROLLER://:9093,CONTROLLER2://:9094",
      "controller.listener.names": "CONTROLLER,CONTROLLER2"}, "listeners", "single controller listener"),
    ({**BASE, "advertised.listeners": "OTHER://h:1"}, "advertised.listeners", "OTHER"),
    ({**BASE, "advertised.listeners": "CONTROLLER://0.0.0.0:9093"}, "advertised.listeners", "non-routable"),
    ({**BASE, "listeners": "CONTROLLER://0.0.0.0:9093"}, "advertised.listeners", "non-routable"),
    ({**BASE, "listener.name.controller.ssl.keystore.location": "/k.jks"},
     "listener.name.controller.ssl.keystore.location", "not supported"),
    ({**BASE, "listener.name.controller.plain.sasl.jaas.config": "x required;"},
     "listener.name.controller.plain.sasl.jaas.config", "no SASL mechanism enabled"),
    ({**BASE, "listener.security.protocol.map": "CONTROLLER:SSL"},
     "ssl.keystore.location", "needs a keystore"),
    ({**BASE, "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT"},
     "sasl.enabled.mechanisms", "GSSAPI is not supported"),
    ({**BASE, "listener.security.protocol.map": "CONTROLLER:NOPE"},
     "listener.security.protocol.map", "NOPE"),
    ({**BASE, "listener.security.protocol.map": "OTHER:PLAINTEXT"},
     "listener.security.protocol.map", "CONTROLLER"),
    ({**BASE, "listeners": "SSL://:9094", "controller.listener.names": "SSL"},
     "ssl.keystore.location", "SSL"),
    (with_(metadata_log_dir=None), "metadata.log.dir", "required"),
    ({**BASE, "broker.session.timeout.ms": "0"}, "broker.session.timeout.ms", "at least 1"),
    ({**BASE, "socket.request.max.bytes": "1023"}, "socket.request.max.bytes", "at least 1024"),
    ({**BASE, "metadata.log.segment.bytes": "4095"}, "metadata.log.segment.bytes", "4096"),
    ({**BASE, "num.partitions": "0"}, "num.partitions", "at least 1"),
    ({**BASE, "min.insync.replicas": "1_0"}, "min.insync.replicas", "integer"),
    ({**BASE, "unclean.leader.election.enable": "yes"}, "unclean.leader.election.enable", "true or false"),
    ({**BASE, "eligible.leader.replicas.enabled": "1"}, "eligible.leader.replicas.enabled", "true or false"),
    ({**BASE, "kraftwire.metadata.nodes": "all"}, "kraftwire.metadata.nodes", "brokers"),
    ({**BASE, "kraftwire.log.format": "xml"}, "kraftwire.log.format", "text, json"),
    ({**BASE, "kraftwire.metrics.port": "65536"}, "kraftwire.metrics.port", "at most 65535"),
    ({**BASE, "kraftwire.metrics.port": "-1"}, "kraftwire.metrics.port", "at least 0"),
    ({**BASE, "metadata.log.max.record.bytes.between.snapshots": str(2**63)},
     "metadata.log.max.record.bytes.between.snapshots", f"at most {2**63 - 1}"),
    # A blank number or boolean is malformed, as in Kafka; a blank required key is missing.
    ({**BASE, "broker.session.timeout.ms": " "}, "broker.session.timeout.ms", "integer"),
    ({**BASE, "unclean.leader.election.enable": ""}, "unclean.leader.election.enable", "true or false"),
    ({**BASE, "node.id": ""}, "node.id", "required"),
    # A blank map has no entry for the listener; only a missing one means Kafka's default map.
    ({**BASE, "listener.security.protocol.map": ""}, "listener.security.protocol.map", "CONTROLLER"),
])
def test_errors_name_their_key(props: dict[str, str], key: str, fragment: str) -> None:
    err = error_for(props)
    assert err.key == key
    assert str(err).startswith(f"{key}: ")
    assert fragment in err.message


def test_a_blank_value_is_unset_where_blank_means_nothing_else() -> None:
    blank = config_from_properties({**BASE, "kraftwire.metrics.port": "", "kraftwire.log.format": " ",
                                    "advertised.listeners": "", "sasl.enabled.mechanisms": ""})
    assert blank == config_from_properties(BASE)
    # An empty ssl.endpoint.identification.algorithm is Kafka's "no host name check".
    assert not config_from_properties({**BASE, "ssl.endpoint.identification.algorithm": ""}).controller_client.check_hostname


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(missing)


# --- .properties syntax -----------------------------------------------------------------------

def test_separators_comments_and_whitespace() -> None:
    text = ("# a comment\n"
            "! another comment\n"
            "\n"
            "   spaced.key   =   spaced value  \n"
            "colon.key: colon value\n"
            "space.key space value\n"
            "empty.key=\n"
            "bare.key\n"
            "\t  tabbed=1\n")
    assert parse_properties(text) == {
        "spaced.key": "spaced value  ",  # Java keeps trailing blanks; config strips them later
        "colon.key": "colon value",
        "space.key": "space value",
        "empty.key": "",
        "bare.key": "",
        "tabbed": "1",
    }


def test_continuation_lines() -> None:
    text = ("listeners=CONTROLLER://127.0.0.1:9093,\\\n"
            "          SASL://127.0.0.1:9094\n"
            "# a comment ending in a backslash does not continue \\\n"
            "next=1\n"
            "two.backslashes=a\\\\\n"
            "after=2\n"
            "last=tail\\")
    assert parse_properties(text) == {
        "listeners": "CONTROLLER://127.0.0.1:9093,SASL://127.0.0.1:9094",
        "next": "1",
        "two.backslashes": "a\\",
        "after": "2",
        "last": "tail",
    }


def test_escapes() -> None:
    text = "key\\=with\\:seps\\ x=tab\\there\\u00e9\\\\\\q\r\nwindows=1\rmac=2"
    assert parse_properties(text) == {"key=with:seps x": "tab\there\u00e9\\q",
                                      "windows": "1", "mac": "2"}


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"^line 2: malformed \\u escape"):
        parse_properties("ok=1\nbad=\\u12x4\n")


def test_properties_file_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "controller.properties"
    path.write_text("process.roles : controller\n"
                    "node.id 7\n"
                    "controller.quorum.voters=\\\n"
                    "    7@localhost:9093\n"
                    "listeners = CONTROLLER://localhost:9093\n"
                    "controller.listener.names=CONTROLLER\n"
                    "log.dirs=" + str(tmp_path / "logs") + "\n")
    cfg = load_config(path)
    assert cfg.node_id == 7
    assert cfg.voters == {7: ("localhost", 9093)}
    assert cfg.metadata_log_dir == tmp_path / "logs"


def test_a_three_voter_quorum_and_its_timing_come_from_server_properties():
    cfg = config_from_properties({**BASE, "controller.quorum.voters": "1@127.0.0.1:9093,2@[::1]:9094,3@h3:9095",
                                  "controller.quorum.election.timeout.ms": "500",
                                  "controller.quorum.fetch.timeout.ms": "900"})
    assert cfg.voters == {1: ("127.0.0.1", 9093), 2: ("::1", 9094), 3: ("h3", 9095)}
    assert (cfg.quorum_election_timeout_ms, cfg.quorum_fetch_timeout_ms) == (500, 900)
    assert (cfg.quorum_election_backoff_max_ms, cfg.quorum_append_linger_ms) == (1000, 25)


QUORUM = {**BASE, "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094"}
SASL_QUORUM = {**QUORUM, "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
               "ssl.keystore.location": "/k.pem", "ssl.truststore.location": "/ca.pem",
               "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "sasl.mechanism.controller.protocol": "PLAIN",
               "listener.name.controller.plain.sasl.jaas.config":
                   'org.apache.kafka.common.security.plain.PlainLoginModule required username="kraft" '
                   'password="pw" user_kraft="pw";'}


def test_voters_reach_each_other_over_the_controller_listeners_protocol():
    tls = config_from_properties({**QUORUM, "listener.security.protocol.map": "CONTROLLER:SSL",
                                  "ssl.keystore.location": "/k.pem", "ssl.truststore.location": "/ca.pem",
                                  "ssl.endpoint.identification.algorithm": ""})
    client = tls.controller_client
    assert (client.protocol, client.tls.truststore_location, client.tls.keystore_location) == ("SSL", "/ca.pem", "/k.pem")
    assert not client.check_hostname and not client.uses_sasl
    sasl = config_from_properties(SASL_QUORUM).controller_client
    assert (sasl.protocol, sasl.sasl_mechanism, sasl.sasl_username, sasl.sasl_password) == ("SASL_SSL", "PLAIN", "kraft", "pw")
    assert sasl.check_hostname


@pytest.mark.parametrize("change, key, words", [
    ({"sasl.mechanism.controller.protocol": None}, "sasl.mechanism.controller.protocol", "GSSAPI is not supported"),
    ({"sasl.mechanism.controller.protocol": "SCRAM-SHA-256"}, "sasl.mechanism.controller.protocol",
     "not in sasl.enabled.mechanisms"),
    ({"sasl.mechanism.controller.protocol": "SCRAM-SHA-512"}, "listener.name.controller.scram-sha-512.sasl.jaas.config",
     "is required"),
    ({"listener.name.controller.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required user_kraft="pw";'},
     "listener.name.controller.plain.sasl.jaas.config", "username"),
    ({"ssl.endpoint.identification.algorithm": "dns"}, "ssl.endpoint.identification.algorithm", "https or empty"),
])
def test_the_voters_client_settings_are_checked(change, key, words):
    props = {k: v for k, v in {**SASL_QUORUM, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as err:
        config_from_properties(props)
    assert err.value.key == key and words in str(err.value), err.value


# --- the table's defaults ---------------------------------------------------------------------

WITH_DEFAULTS = [setting for setting in SETTINGS if setting.default_text is not None]


def test_the_defaults_checked_below_are_most_of_the_table() -> None:
    assert len(WITH_DEFAULTS) > len(SETTINGS) / 2


@pytest.mark.parametrize("setting", WITH_DEFAULTS, ids=lambda setting: setting.name)
def test_each_default_of_the_table_is_the_default(setting: Setting[object]) -> None:
    """Setting a key to the default the table (and so the documentation) gives changes nothing."""
    assert setting.default_text is not None
    assert config_from_properties({**BASE, setting.name: setting.default_text}) == config_from_properties(BASE)


def test_the_quorum_settings_default_to_the_tables() -> None:
    """A QuorumConfig built without a controller's configuration, as the Raft tests build it,
    runs by the same defaults as one built from it."""
    from server.raft.quorum_config import QuorumConfig

    built = QuorumConfig.from_controller(config_from_properties(BASE), (1,), "c", bytes(16))
    assert built == QuorumConfig(voters=(1,), cluster_id="c", listener_name="CONTROLLER",
                                 endpoints=(("CONTROLLER", "127.0.0.1", 9093),),
                                 voter_addresses={1: ("127.0.0.1", 9093)})
