"""Delegation tokens (KIP-48 in KRaft, KIP-900): CreateDelegationToken, RenewDelegationToken,
ExpireDelegationToken and DescribeDelegationToken, decided as Kafka's DelegationTokenControlManager
and ControllerApis decide them.

A token's HMAC is HMAC-SHA512 of its id under ``delegation.token.secret.key``; renew and expire
name the token by it, so replay keeps an index from HMAC to token id.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Callable, Iterator

from protocol.error_codes import Error
from protocol.generated.messages.create_delegation_token_request import CreateDelegationTokenRequest
from protocol.generated.messages.create_delegation_token_response import CreateDelegationTokenResponse
from protocol.generated.messages.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol.generated.messages.describe_delegation_token_response import (
    DescribedDelegationToken, DescribedDelegationTokenRenewer, DescribeDelegationTokenResponse)
from protocol.generated.messages.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol.generated.messages.expire_delegation_token_response import ExpireDelegationTokenResponse
from protocol.generated.messages.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol.generated.messages.renew_delegation_token_response import RenewDelegationTokenResponse
from protocol.generated.metadata.delegation_token_record import DelegationTokenRecord
from protocol.generated.metadata.remove_delegation_token_record import RemoveDelegationTokenRecord
from protocol.primitives import random_uuid, uuid_to_str
from server.controller.offsets import OffsetControl, restore_key
from server.controller.record_table import RecordTable
from server.controller.result import ControllerResult, VersionedRecord
from server.settings import default

MV_3_6_IV2 = 14  # the first metadata.version with delegation token records
ERROR_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class TokenSettings:
    """Kafka's delegation.token.* settings, the table's defaults unless set; no secret means
    tokens are disabled."""

    secret_key: str | None = None
    max_lifetime_ms: int = default("delegation.token.max.lifetime.ms")
    expiry_time_ms: int = default("delegation.token.expiry.time.ms")


@dataclass(frozen=True)
class TokenRequester:
    """Who asks, as "Type:name", and what the router found out about the channel and ACLs."""

    principal: str
    allowed: bool  # Kafka's allowTokenRequests: authenticated, not with a token, not PLAINTEXT
    may_create_for: Callable[[str], bool]  # CREATE_TOKENS on the USER resource of another owner
    may_describe: Callable[[str], bool]  # DESCRIBE on the DELEGATION_TOKEN resource of a token id


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def _sum(now: int, duration: int) -> int:
    return _LONG_MAX if now > _LONG_MAX - duration else now + duration


class DelegationTokenControl:
    def __init__(self, offsets: OffsetControl) -> None:
        self.offsets = offsets
        self.settings = TokenSettings()
        self.tokens: RecordTable[str, DelegationTokenRecord] = RecordTable(offsets, "delegation token")
        self._by_hmac: dict[bytes, str] = {}

    def configure(self, settings: TokenSettings) -> None:
        """Set the secret and lifetimes; the HMAC index is rebuilt under the new secret."""
        self.settings = settings
        self._by_hmac = {self.hmac(token_id): token_id for token_id in self.tokens.entries}

    def hmac(self, token_id: str) -> bytes:
        key = (self.settings.secret_key or "").encode()
        return hmac.new(key, token_id.encode(), hashlib.sha512).digest()

    def replay_add(self, record: DelegationTokenRecord) -> None:
        # A renewal writes the token again with a later expiration: it replaces the entry.
        self.tokens.put(record.token_id, record)
        self._index(record.token_id, record.token_id)

    def replay_remove(self, record: RemoveDelegationTokenRecord) -> None:
        self.tokens.remove(record.token_id)
        self._index(record.token_id, None)

    def _index(self, token_id: str, value: str | None) -> None:
        if self.settings.secret_key is None:
            return
        key = self.hmac(token_id)
        if self.offsets.recording:
            self.offsets.on_undo(restore_key(self._by_hmac, key))
        if value is None:
            self._by_hmac.pop(key, None)
        else:
            self._by_hmac[key] = value

    def live_token(self, token_id: str, now_ms: int) -> tuple[DelegationTokenRecord, bytes] | Error:
        """The token a SCRAM login names and its HMAC (the holder's password), or why no client
        may log in with it, as Kafka's token cache and ScramSaslServer refuse it."""
        token = self.tokens.entries.get(token_id)
        if self.settings.secret_key is None:
            return Error.DELEGATION_TOKEN_AUTH_DISABLED
        if token is None:
            return Error.DELEGATION_TOKEN_NOT_FOUND
        if _expired(token, now_ms):
            return Error.DELEGATION_TOKEN_EXPIRED
        return token, self.hmac(token_id)

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.tokens.snapshot_records()

    def _refusal(self, who: TokenRequester, metadata_version: int) -> Error | None:
        if not who.allowed:
            return Error.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        if self.settings.secret_key is None:
            return Error.DELEGATION_TOKEN_AUTH_DISABLED
        if metadata_version < MV_3_6_IV2:
            return Error.UNSUPPORTED_VERSION
        return None

    # --- CreateDelegationToken --------------------------------------------------------------
    def create(self, req: CreateDelegationTokenRequest, who: TokenRequester, now_ms: int,
               metadata_version: int, version: int) -> ControllerResult:
        owner = who.principal
        if req.owner_principal_name:
            owner = f"{req.owner_principal_type}:{req.owner_principal_name}"
        owner_type, owner_name = _split(owner)
        # The requester is named from version 3 on (KIP-373); earlier versions cannot carry it.
        requester_type, requester_name = _split(who.principal) if version >= 3 else ("", "")
        response = CreateDelegationTokenResponse(
            principal_type=owner_type, principal_name=owner_name, token_requester_principal_type=requester_type,
            token_requester_principal_name=requester_name, issue_timestamp_ms=ERROR_TIMESTAMP,
            expiry_timestamp_ms=ERROR_TIMESTAMP, max_timestamp_ms=ERROR_TIMESTAMP, token_id="", hmac=b"")
        # ControllerApis judges the channel and the owner before the manager looks at anything.
        refusal = None if who.allowed else Error.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        if refusal is None and owner != who.principal and not who.may_create_for(owner):
            refusal = Error.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        refusal = refusal or self._refusal(who, metadata_version)
        if refusal is None and any(r.principal_type != "User" for r in req.renewers):
            refusal = Error.INVALID_PRINCIPAL_TYPE
        if refusal is not None:
            response.error_code = refusal
            return ControllerResult([], response)
        s = self.settings
        lifetime = min(s.max_lifetime_ms, req.max_lifetime_ms) if req.max_lifetime_ms > 0 else s.max_lifetime_ms
        max_timestamp = _sum(now_ms, lifetime)
        expiry = min(max_timestamp, _sum(now_ms, s.expiry_time_ms))
        token_id = uuid_to_str(random_uuid())
        record = DelegationTokenRecord(
            owner=owner, requester=who.principal,
            renewers=[f"{r.principal_type}:{r.principal_name}" for r in req.renewers],
            issue_timestamp=now_ms, max_timestamp=max_timestamp, expiration_timestamp=expiry, token_id=token_id)
        response.issue_timestamp_ms, response.expiry_timestamp_ms = now_ms, expiry
        response.max_timestamp_ms, response.token_id, response.hmac = max_timestamp, token_id, self.hmac(token_id)
        return ControllerResult([(record, 0)], response)

    # --- RenewDelegationToken and ExpireDelegationToken -------------------------------------
    def _held(self, mac: bytes, who: TokenRequester,
              metadata_version: int) -> tuple[DelegationTokenRecord | None, Error | None]:
        """The token an HMAC names, or why a renewal or expiry cannot look for it."""
        code = self._refusal(who, metadata_version)
        if code is not None:
            return None, code
        token_id = self._by_hmac.get(bytes(mac))
        token = None if token_id is None else self.tokens.entries.get(token_id)
        return token, Error.DELEGATION_TOKEN_NOT_FOUND if token is None else None

    def renew(self, req: RenewDelegationTokenRequest, who: TokenRequester, now_ms: int,
              metadata_version: int) -> ControllerResult:
        response = RenewDelegationTokenResponse(expiry_timestamp_ms=ERROR_TIMESTAMP)
        token, code = self._held(req.hmac, who, metadata_version)
        # Kafka checks the expiry before the owner here, and the other way round for an expiry.
        if token is not None:
            code = Error.DELEGATION_TOKEN_EXPIRED if _expired(token, now_ms) else _owner_mismatch(who, token)
        if token is None or code is not None:
            response.error_code = code or Error.DELEGATION_TOKEN_NOT_FOUND
            return ControllerResult([], response)
        period = min(self.settings.expiry_time_ms, req.renew_period_ms) if req.renew_period_ms > 0 \
            else self.settings.expiry_time_ms
        response.expiry_timestamp_ms = min(token.max_timestamp, now_ms + period)
        return ControllerResult([(_with_expiry(token, response.expiry_timestamp_ms), 0)], response)

    def expire(self, req: ExpireDelegationTokenRequest, who: TokenRequester, now_ms: int,
               metadata_version: int) -> ControllerResult:
        response = ExpireDelegationTokenResponse(expiry_timestamp_ms=ERROR_TIMESTAMP)
        token, code = self._held(req.hmac, who, metadata_version)
        if token is not None:
            code = _owner_mismatch(who, token)
        if token is None or code is not None:
            response.error_code = code or Error.DELEGATION_TOKEN_NOT_FOUND
            return ControllerResult([], response)
        if req.expiry_time_period_ms < 0:
            # A negative period expires the token at once: it is removed.
            response.expiry_timestamp_ms = now_ms
            return ControllerResult([(RemoveDelegationTokenRecord(token_id=token.token_id), 0)], response)
        if _expired(token, now_ms):
            response.error_code = Error.DELEGATION_TOKEN_EXPIRED
            return ControllerResult([], response)
        response.expiry_timestamp_ms = min(token.max_timestamp, _sum(now_ms, req.expiry_time_period_ms))
        return ControllerResult([(_with_expiry(token, response.expiry_timestamp_ms), 0)], response)

    # --- DescribeDelegationToken ------------------------------------------------------------
    def describe(self, req: DescribeDelegationTokenRequest, who: TokenRequester,
                 metadata_version: int, version: int) -> DescribeDelegationTokenResponse:
        """As a Kafka broker answers: the tokens of the owners named (all owners when the list
        is null), each only if the requester owns it, may renew it, or may describe it."""
        code = self._refusal(who, metadata_version)
        if code is not None:
            return DescribeDelegationTokenResponse(error_code=code)
        if req.owners is not None and not req.owners:
            return DescribeDelegationTokenResponse()
        owners = None if req.owners is None else {f"{o.principal_type}:{o.principal_name}" for o in req.owners}
        described = []
        for token_id, token in self.tokens.items():
            if owners is not None and token.owner not in owners:
                continue
            if _owner_mismatch(who, token) and not who.may_describe(token_id):
                continue
            owner_type, owner_name = _split(token.owner)
            requester_type, requester_name = _split(token.requester) if version >= 3 else ("", "")
            described.append(DescribedDelegationToken(
                principal_type=owner_type, principal_name=owner_name,
                token_requester_principal_type=requester_type, token_requester_principal_name=requester_name,
                issue_timestamp=token.issue_timestamp, expiry_timestamp=token.expiration_timestamp,
                max_timestamp=token.max_timestamp, token_id=token_id, hmac=self.hmac(token_id),
                renewers=[DescribedDelegationTokenRenewer(principal_type=t, principal_name=n)
                          for t, n in map(_split, token.renewers)]))
        return DescribeDelegationTokenResponse(tokens=described)


def _expired(token: DelegationTokenRecord, now_ms: int) -> bool:
    return token.max_timestamp < now_ms or token.expiration_timestamp < now_ms


def _owner_mismatch(who: TokenRequester, token: DelegationTokenRecord) -> Error | None:
    """Only the owner and the renewers may renew, expire or (without a Describe ACL) see a token."""
    if who.principal == token.owner or who.principal in token.renewers:
        return None
    return Error.DELEGATION_TOKEN_OWNER_MISMATCH


def _with_expiry(token: DelegationTokenRecord, expiry: int) -> DelegationTokenRecord:
    return DelegationTokenRecord(owner=token.owner, requester=token.requester, renewers=list(token.renewers),
                                 issue_timestamp=token.issue_timestamp, max_timestamp=token.max_timestamp,
                                 expiration_timestamp=expiry, token_id=token.token_id)

