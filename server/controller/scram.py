"""SCRAM credentials (KIP-554) by user name and mechanism, and the APIs that set, delete and
list them. Clients send the salted password; the controller keeps only the keys derived from
it, as Kafka's ScramControlManager does."""

from __future__ import annotations

from collections import Counter
from typing import Iterator

from protocol.error_codes import Error
from protocol.generated.messages.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from protocol.generated.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult)
from protocol.generated.messages.describe_user_scram_credentials_request import DescribeUserScramCredentialsRequest
from protocol.generated.messages.describe_user_scram_credentials_response import (
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult)
from protocol.generated.metadata.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from protocol.generated.metadata.user_scram_credential_record import UserScramCredentialRecord
from server.controller.offsets import OffsetControl
from server.controller.record_table import RecordTable
from server.controller.result import ControllerResult, VersionedRecord
from server.security.scram import (
    MAX_ITERATIONS, MECHANISM_NAMES, MIN_ITERATIONS, credential_from_salted_password)

# Kafka's ScramMechanism numbers.
MECHANISMS = MECHANISM_NAMES
# A user's credentials are listed by mechanism number.
_MECHANISM_ORDER = sorted(MECHANISMS)


class ScramControl:
    def __init__(self, offsets: OffsetControl) -> None:
        self.credentials: RecordTable[tuple[str, int], UserScramCredentialRecord] = RecordTable(offsets, "SCRAM credential")

    def replay_add(self, record: UserScramCredentialRecord) -> None:
        self.credentials.put((record.name, record.mechanism), record)

    def replay_remove(self, record: RemoveUserScramCredentialRecord) -> None:
        self.credentials.remove((record.name, record.mechanism))

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.credentials.snapshot_records()

    def alter(self, req: AlterUserScramCredentialsRequest) -> ControllerResult:
        """One result per user: a user named twice in the request is refused whole."""
        names = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
        duplicated = {n for n, count in Counter(names).items() if count > 1}
        errors: dict[str, tuple[int, str]] = {n: (Error.DUPLICATE_RESOURCE, "A user credential cannot be "
                                                  "altered twice in the same request") for n in duplicated}
        changes: list[tuple[str, UserScramCredentialRecord | RemoveUserScramCredentialRecord]] = []
        for d in req.deletions:
            if d.name in errors:
                continue
            if d.mechanism not in MECHANISMS:
                errors[d.name] = (Error.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif (d.name, d.mechanism) not in self.credentials.entries:
                errors[d.name] = (Error.RESOURCE_NOT_FOUND,
                                  "Attempt to delete a user credential that does not exist")
            else:
                changes.append((d.name, RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism)))
        for u in req.upsertions:
            if u.name in errors:
                continue
            if not u.name:
                errors[u.name] = (Error.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif u.mechanism not in MECHANISMS:
                errors[u.name] = (Error.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif u.iterations < MIN_ITERATIONS:
                errors[u.name] = (Error.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif u.iterations > MAX_ITERATIONS:
                errors[u.name] = (Error.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            else:
                credential = credential_from_salted_password(
                    MECHANISMS[u.mechanism], u.salt, u.salted_password, u.iterations)
                changes.append((u.name, UserScramCredentialRecord(
                    name=u.name, mechanism=u.mechanism, salt=u.salt, stored_key=credential.stored_key,
                    server_key=credential.server_key, iterations=u.iterations)))
        # A user's changes apply only when none of them failed.
        records: list[VersionedRecord] = [(record, 0) for name, record in changes if name not in errors]
        results = [AlterUserScramCredentialsResult(user=n, error_code=errors.get(n, (0, ""))[0],
                                                   error_message=errors[n][1] if n in errors else None)
                   for n in dict.fromkeys(names)]
        return ControllerResult(records, AlterUserScramCredentialsResponse(results=results))

    def describe(self, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
        if not req.users:
            by_user: dict[str, list[CredentialInfo]] = {}
            for (name, mechanism), record in self.credentials.items():
                by_user.setdefault(name, []).append(CredentialInfo(mechanism=mechanism, iterations=record.iterations))
            return DescribeUserScramCredentialsResponse(error_message=None, results=[
                DescribeUserScramCredentialsResult(user=n, error_message=None, credential_infos=infos)
                for n, infos in sorted(by_user.items())])
        counts = Counter(u.name for u in req.users)
        results = []
        for name, count in counts.items():
            infos = [CredentialInfo(mechanism=mechanism, iterations=stored.iterations)
                     for mechanism in _MECHANISM_ORDER
                     if (stored := self.credentials.entries.get((name, mechanism))) is not None]
            if count > 1:
                results.append(DescribeUserScramCredentialsResult(
                    user=name, error_code=Error.DUPLICATE_RESOURCE, error_message="Cannot describe SCRAM "
                    "credentials for the same user twice in a single request: " + name))
            elif not infos:
                results.append(DescribeUserScramCredentialsResult(
                    user=name, error_code=Error.RESOURCE_NOT_FOUND,
                    error_message="Attempt to describe a user credential that does not exist: " + name))
            else:
                results.append(DescribeUserScramCredentialsResult(user=name, error_message=None,
                                                                  credential_infos=infos))
        return DescribeUserScramCredentialsResponse(error_message=None, results=results)
