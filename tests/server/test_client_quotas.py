"""AlterClientQuotas and DescribeClientQuotas: Kafka's checks as ClientQuotaControlManager and
ClientQuotasImage make them, on the state machine and then over real sockets, with requests
built and responses read by kafka-python's own message classes."""

from __future__ import annotations

import pytest

from protocol.error_codes import Error
from protocol.generated.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest, EntityData, EntryData, OpData)
from protocol.generated.messages.describe_client_quotas_request import ComponentData, DescribeClientQuotasRequest
from tests.support.harness import Harness
from tests.support.kafka_python_wire import exchange
from tests.support.wire import raw_socket


def alter(h: Harness, *entries: tuple[dict[str, str | None], dict[str, float | None]],
          validate_only: bool = False):
    request = AlterClientQuotasRequest(validate_only=validate_only, entries=[
        EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                  ops=[OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()])
        for entity, ops in entries])
    return h.command("alter_client_quotas", request, 1)


def describe(h: Harness, *components: tuple[str, int, str | None], strict: bool = False):
    return h.qc.describe_client_quotas(DescribeClientQuotasRequest(strict=strict, components=[
        ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components]), 1)


def described(response) -> dict:
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def errors(applied) -> list[tuple[int, str | None]]:
    return [(e.error_code, e.error_message) for e in applied.response.entries]


def test_set_change_and_remove_quotas():
    """ClientQuotaControlManagerTest.testAlterAndRemove: a value equal to the current one and
    the removal of an unset key write nothing."""
    h = Harness()
    applied = alter(h, ({"user": "alice"}, {"producer_byte_rate": 1024.0, "request_percentage": 50.5}),
                    ({"user": None, "client-id": "app"}, {"consumer_byte_rate": 2048.0}))
    assert errors(applied) == [(Error.NONE, None)] * 2 and len(applied.records) == 3
    assert described(describe(h)) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 50.5},
        (("client-id", "app"), ("user", None)): {"consumer_byte_rate": 2048.0}}
    again = alter(h, ({"user": "alice"}, {"producer_byte_rate": 1024.0, "consumer_byte_rate": None}))
    assert errors(again) == [(Error.NONE, None)] and again.records == []
    gone = alter(h, ({"user": "alice"}, {"producer_byte_rate": None, "request_percentage": None}))
    assert len(gone.records) == 2
    assert (("user", "alice"),) not in described(describe(h))
    dry = alter(h, ({"ip": "10.0.0.1"}, {"connection_creation_rate": 5.0}), validate_only=True)
    assert errors(dry) == [(Error.NONE, None)] and dry.records == []


@pytest.mark.parametrize("entity, ops, message", [
    ({}, {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    ({"group": "g"}, {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
    ({"ip": "1.2.3.4", "user": "u"}, {"connection_creation_rate": 1.0},
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ({"ip": "not an address"}, {"connection_creation_rate": 1.0},
     "not an address is not a valid IP or resolvable host."),
    ({"user": "u"}, {"connection_creation_rate": 1.0}, "Invalid configuration key connection_creation_rate"),
    ({"user": "u"}, {"producer_byte_rate": 0.0}, "Quota producer_byte_rate must be greater than 0"),
    ({"user": "u"}, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
    ({"ip": "::1"}, {"connection_creation_rate": 2.0**40},
     "Proposed value for connection_creation_rate is too large for an INT."),
])
def test_refusals_are_kafkas(entity, ops, message):
    """ClientQuotaControlManagerTest: each bad entry fails alone with Kafka's words."""
    h = Harness()
    applied = alter(h, (entity, ops), ({"user": "ok"}, {"producer_byte_rate": 10.0}))
    assert errors(applied) == [(Error.INVALID_REQUEST, message), (Error.NONE, None)]
    assert len(applied.records) == 1


def test_describe_filters():
    """ClientQuotasImageTest / the describe filters: exact, default and any-name matches,
    strict or not, and Kafka's refusals of a bad filter."""
    h = Harness()
    alter(h, ({"user": "alice"}, {"producer_byte_rate": 1.0}),
          ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 2.0}),
          ({"user": None}, {"producer_byte_rate": 3.0}),
          ({"client-id": "app"}, {"producer_byte_rate": 4.0}))
    assert set(described(describe(h, ("user", 0, "alice")))) == {
        (("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
    assert set(described(describe(h, ("user", 0, "alice"), strict=True))) == {(("user", "alice"),)}
    assert set(described(describe(h, ("user", 1, None)))) == {(("user", None),)}
    assert set(described(describe(h, ("client-id", 2, None)))) == {
        (("client-id", "app"),), (("client-id", "app"), ("user", "alice"))}
    assert len(described(describe(h))) == 4
    for components, code, message in [
        ([("user", 0, None)], Error.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([("user", 1, "x")], Error.INVALID_REQUEST,
         "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        ([("user", 2, None), ("user", 2, None)], Error.INVALID_REQUEST,
         "Entity type user cannot appear more than once in the filter."),
        ([("group", 2, None)], Error.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([("user", 7, None)], Error.INVALID_REQUEST, "Unknown match type 7"),
    ]:
        response = describe(h, *components)
        assert (response.error_code, response.error_message, response.entries) == (code, message, None)


def test_quotas_over_the_wire_with_kafka_pythons_classes(controller):
    """kafka-python's own AlterClientQuotas v1 and DescribeClientQuotas v1 against the
    controller process: what it sets is committed and described back."""
    from kafka.protocol.admin import AlterClientQuotasRequest as KpAlter
    from kafka.protocol.admin import DescribeClientQuotasRequest as KpDescribe
    alter_v1, describe_v1 = KpAlter[1], KpDescribe[1]
    entry = alter_v1.EntryData
    with raw_socket(controller) as sock:
        altered = exchange(sock, alter_v1(validate_only=False, entries=[entry(
            entity=[entry.EntityData(entity_type="user", entity_name="alice")],
            ops=[entry.OpData(key="producer_byte_rate", value=1048576.0, remove=False)])]), 1)
        assert [(e.error_code, e.entity[0].entity_name) for e in altered.entries] == [(0, "alice")]
        found = exchange(sock, describe_v1(strict=False, components=[describe_v1.ComponentData(
            entity_type="user", match_type=0, match="alice")]), 2)
        assert found.error_code == 0
        assert [(v.key, v.value) for e in found.entries for v in e.values] == [("producer_byte_rate", 1048576.0)]
