"""Delegation tokens as Kafka's DelegationTokenControlManager and ControllerApis decide them:
on the state machine with a ManualClock, then over real sockets on PLAINTEXT and SASL."""

from __future__ import annotations

import hashlib
import hmac

from protocol.client import KafkaClient
from protocol.error_codes import Error
from protocol.generated.messages.create_delegation_token_request import (
    CreatableRenewers, CreateDelegationTokenRequest)
from protocol.generated.messages.describe_delegation_token_request import (
    DescribeDelegationTokenOwner, DescribeDelegationTokenRequest)
from protocol.generated.messages.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol.generated.messages.renew_delegation_token_request import RenewDelegationTokenRequest
from server.controller.delegation_tokens import TokenRequester, TokenSettings
from server.controller.features import MV_3_6_IV1
from tests.support.harness import Harness
from tests.support.secured_clients import ADMIN, ADMIN_PASSWORD, PLAIN_JAAS, sasl_client

SECRET = "s3cret"
HOUR_MS = 3600 * 1000


def who(principal: str = "User:alice", allowed: bool = True, may: bool = False) -> TokenRequester:
    return TokenRequester(principal, allowed, lambda owner: may, lambda token_id: may)


def harness(secret: str | None = SECRET, **kw) -> Harness:
    h = Harness(**kw)
    h.qc.delegation_tokens.configure(TokenSettings(secret, max_lifetime_ms=48 * HOUR_MS, expiry_time_ms=24 * HOUR_MS))
    return h


def create(h: Harness, requester: TokenRequester, **fields):
    return h.run(h.qc.create_delegation_token(CreateDelegationTokenRequest(**fields), 3, requester))


def test_create_renew_expire_describe():
    """DelegationTokenControlManagerTest-style life of one token: created with Kafka's
    lifetimes and HMAC, renewed by a renewer, described to its owner, expired at once."""
    h = harness()
    now = h.clock.now_ms()
    created = create(h, who(), renewers=[CreatableRenewers(principal_type="User", principal_name="bob")])
    r = created.response
    assert r.error_code == Error.NONE and (r.principal_type, r.principal_name) == ("User", "alice")
    assert (r.issue_timestamp_ms, r.expiry_timestamp_ms, r.max_timestamp_ms) == (now, now + 24 * HOUR_MS,
                                                                                now + 48 * HOUR_MS)
    assert r.hmac == hmac.new(SECRET.encode(), r.token_id.encode(), hashlib.sha512).digest()
    assert [rec.NAME for rec, _ in created.records] == ["DelegationTokenRecord"]

    h.clock.advance(HOUR_MS)
    mismatch = h.run(h.qc.renew_delegation_token(RenewDelegationTokenRequest(hmac=r.hmac, renew_period_ms=-1), 2,
                                                 who("User:mallory")))
    assert (mismatch.response.error_code, mismatch.records) == (Error.DELEGATION_TOKEN_OWNER_MISMATCH, [])
    renewed = h.run(h.qc.renew_delegation_token(RenewDelegationTokenRequest(hmac=r.hmac, renew_period_ms=HOUR_MS), 2,
                                                who("User:bob")))
    assert renewed.response.expiry_timestamp_ms == now + 2 * HOUR_MS

    described = h.qc.describe_delegation_token(DescribeDelegationTokenRequest(owners=None), 3, who())
    [token] = described.tokens
    assert (token.token_id, token.expiry_timestamp, [x.principal_name for x in token.renewers]) == (
        r.token_id, now + 2 * HOUR_MS, ["bob"])
    assert h.qc.describe_delegation_token(DescribeDelegationTokenRequest(owners=[]), 3, who()).tokens == []
    assert h.qc.describe_delegation_token(DescribeDelegationTokenRequest(owners=[DescribeDelegationTokenOwner(
        principal_type="User", principal_name="bob")]), 3, who()).tokens == []
    # Neither owner nor renewer, and no DESCRIBE on the token: it stays hidden.
    assert h.qc.describe_delegation_token(DescribeDelegationTokenRequest(owners=None), 3,
                                          who("User:mallory")).tokens == []

    expired = h.run(h.qc.expire_delegation_token(ExpireDelegationTokenRequest(hmac=r.hmac, expiry_time_period_ms=-1),
                                                 2, who()))
    assert expired.response.expiry_timestamp_ms == now + HOUR_MS
    assert [rec.NAME for rec, _ in expired.records] == ["RemoveDelegationTokenRecord"]
    gone = h.run(h.qc.renew_delegation_token(RenewDelegationTokenRequest(hmac=r.hmac, renew_period_ms=1), 2, who()))
    assert gone.response.error_code == Error.DELEGATION_TOKEN_NOT_FOUND


def test_every_version_of_the_answers_can_be_encoded():
    """The requester is named from version 3 on: earlier answers leave it out, so they encode."""
    from protocol.generated.messages.create_delegation_token_response import CreateDelegationTokenResponse
    from protocol.generated.messages.describe_delegation_token_response import DescribeDelegationTokenResponse
    for version in range(4):
        h = harness()
        created = h.run(h.qc.create_delegation_token(CreateDelegationTokenRequest(), version, who())).response
        assert created.error_code == Error.NONE
        assert (created.token_requester_principal_name != "") == (version >= 3)
        CreateDelegationTokenResponse._ENCODERS[version](created, bytearray())
        described = h.qc.describe_delegation_token(DescribeDelegationTokenRequest(owners=None), version, who())
        assert len(described.tokens) == 1
        DescribeDelegationTokenResponse._ENCODERS[version](described, bytearray())


def test_an_expired_token_cannot_be_renewed():
    h = harness()
    r = create(h, who(), max_lifetime_ms=HOUR_MS).response
    assert r.expiry_timestamp_ms == r.max_timestamp_ms == r.issue_timestamp_ms + HOUR_MS
    h.clock.advance(HOUR_MS + 1)
    renewed = h.run(h.qc.renew_delegation_token(RenewDelegationTokenRequest(hmac=r.hmac, renew_period_ms=1), 2, who()))
    assert renewed.response.error_code == Error.DELEGATION_TOKEN_EXPIRED
    moved = h.run(h.qc.expire_delegation_token(ExpireDelegationTokenRequest(hmac=r.hmac, expiry_time_period_ms=5), 2,
                                               who()))
    assert moved.response.error_code == Error.DELEGATION_TOKEN_EXPIRED
    # Kafka's order: a renewal looks at the expiry before the owner, an expiry the other way round.
    stranger = who("User:mallory")
    renewed = h.run(h.qc.renew_delegation_token(RenewDelegationTokenRequest(hmac=r.hmac, renew_period_ms=1), 2,
                                                stranger))
    assert renewed.response.error_code == Error.DELEGATION_TOKEN_EXPIRED
    moved = h.run(h.qc.expire_delegation_token(ExpireDelegationTokenRequest(hmac=r.hmac, expiry_time_period_ms=5), 2,
                                               stranger))
    assert moved.response.error_code == Error.DELEGATION_TOKEN_OWNER_MISMATCH
    # Expiring at once removes even an expired token.
    removed = h.run(h.qc.expire_delegation_token(ExpireDelegationTokenRequest(hmac=r.hmac, expiry_time_period_ms=-1),
                                                 2, who()))
    assert (removed.response.error_code, [rec.NAME for rec, _ in removed.records]) == (
        Error.NONE, ["RemoveDelegationTokenRecord"])


def test_refusals():
    """ControllerApis.allowTokenRequests, then the manager's own checks, in Kafka's order."""
    assert create(harness(), who(allowed=False)).response.error_code == Error.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert create(harness(secret=None), who()).response.error_code == Error.DELEGATION_TOKEN_AUTH_DISABLED
    assert create(harness(metadata_version=MV_3_6_IV1), who()).response.error_code == Error.UNSUPPORTED_VERSION
    other = create(harness(), who(), owner_principal_type="User", owner_principal_name="bob").response
    assert (other.error_code, other.principal_name, other.token_requester_principal_name) == (
        Error.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "bob", "alice")
    assert create(harness(), who(may=True), owner_principal_type="User",
                  owner_principal_name="bob").response.error_code == Error.NONE
    bad = create(harness(), who(), renewers=[CreatableRenewers(principal_type="Group", principal_name="g")])
    assert (bad.response.error_code, bad.records) == (Error.INVALID_PRINCIPAL_TYPE, [])


def test_a_snapshot_or_replay_finds_tokens_by_hmac():
    h = harness()
    r = create(h, who()).response
    copy = harness()
    for _, record, version in h.journal[1:]:
        copy.qc.replay(record, copy.qc.next_offset)
    renewed = copy.run(copy.qc.renew_delegation_token(RenewDelegationTokenRequest(hmac=r.hmac, renew_period_ms=1), 2,
                                                      who()))
    assert renewed.response.error_code == Error.NONE


def test_plaintext_is_not_allowed_and_sasl_is(controller_factory):
    """Over real sockets: on PLAINTEXT the answer is DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; a
    PLAIN-authenticated user on SASL_PLAINTEXT gets a token, renews and describes it."""
    plain = controller_factory({"delegation.token.secret.key": SECRET})
    with KafkaClient(plain.host, plain.port) as client:
        refused = client.request(CreateDelegationTokenRequest(), 3)
        assert refused.error_code == Error.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert (refused.principal_name, refused.token_requester_principal_name) == ("ANONYMOUS", "ANONYMOUS")
    sasl = controller_factory({
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS, "delegation.token.secret.key": SECRET})
    client = sasl_client(sasl.host, sasl.port, ADMIN, ADMIN_PASSWORD)
    try:
        created = client.request(CreateDelegationTokenRequest(), 3)
        assert created.error_code == Error.NONE and created.principal_name == ADMIN
        renewed = client.request(RenewDelegationTokenRequest(hmac=created.hmac, renew_period_ms=1000), 2)
        assert renewed.error_code == Error.NONE
        described = client.request(DescribeDelegationTokenRequest(owners=None), 3)
        assert [t.token_id for t in described.tokens] == [created.token_id]
    finally:
        client.close()
