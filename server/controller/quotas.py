"""Client quotas (KIP-546) by entity and quota key: AlterClientQuotas and DescribeClientQuotas,
with Kafka's validation (ClientQuotaControlManager) and filters (ClientQuotasImage.describe).

Entities are indexed by each (type, name) part and by type, so a describe looks only at the
entities its filter can match.
"""

from __future__ import annotations

import ipaddress
from typing import Iterator

from protocol.error_codes import Error
from protocol.generated.messages.alter_client_quotas_request import AlterClientQuotasRequest, EntryData
from protocol.generated.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse, EntityData as AlteredEntity, EntryData as AlteredEntry)
from protocol.generated.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from protocol.generated.messages.describe_client_quotas_response import (
    DescribeClientQuotasResponse, EntityData as DescribedEntity, EntryData as DescribedEntry, ValueData)
from protocol.generated.metadata.client_quota_record import ClientQuotaRecord, EntityData as RecordEntity
from server.controller.offsets import OffsetControl
from server.controller.record_table import RecordTable
from server.controller.result import ControllerResult, VersionedRecord

# An entity is its (type, name) parts in type order: ("user", "alice"), ("client-id", None), ...
Entity = tuple[tuple[str, str | None], ...]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# Kafka's QuotaConfig: the keys each kind of entity takes, and whether a value must be whole.
_USER_AND_CLIENT_KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True,
                         "request_percentage": False, "controller_mutation_rate": False}
_IP_KEYS = {"connection_creation_rate": True}
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


class QuotaError(Exception):
    def __init__(self, code: Error, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_of(record: ClientQuotaRecord) -> Entity:
    return tuple(sorted((e.entity_type, e.entity_name) for e in record.entity))


class ClientQuotaControl:
    def __init__(self, offsets: OffsetControl) -> None:
        self.offsets = offsets
        # (entity, quota key) -> the record that set it; a quota's value is the record's.
        self.quotas: RecordTable[tuple[Entity, str], ClientQuotaRecord] = RecordTable(offsets, "client quota")
        self.values: dict[Entity, dict[str, float]] = {}
        self.by_part: dict[tuple[str, str | None], set[Entity]] = {}
        self.by_type: dict[str, set[Entity]] = {}

    def replay(self, record: ClientQuotaRecord) -> None:
        entity = entity_of(record)
        key = (entity, record.key)
        if record.remove:
            # Kafka removes a quota that is not set without complaint.
            if key in self.quotas.entries:
                self.quotas.remove(key)
                self._set_value(entity, record.key, None)
        else:
            self.quotas.put(key, record)
            self._set_value(entity, record.key, record.value)

    def _set_value(self, entity: Entity, key: str, value: float | None) -> None:
        old = self.values.get(entity)
        if self.offsets.recording:
            before = None if old is None else dict(old)
            self.offsets.on_undo(lambda: self._restore(entity, before))
        values = dict(old or {})
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
        self._restore(entity, values or None)

    def _restore(self, entity: Entity, values: dict[str, float] | None) -> None:
        if values is None:
            self.values.pop(entity, None)
            for part in entity:
                self._unindex(self.by_part, part, entity)
                self._unindex(self.by_type, part[0], entity)
        else:
            self.values[entity] = values
            for part in entity:
                self.by_part.setdefault(part, set()).add(entity)
                self.by_type.setdefault(part[0], set()).add(entity)

    @staticmethod
    def _unindex(index: dict, key: object, entity: Entity) -> None:
        members = index.get(key)
        if members is not None:
            members.discard(entity)
            if not members:
                del index[key]

    def by_entity(self) -> dict[Entity, dict[str, float]]:
        return {entity: dict(values) for entity, values in self.values.items()}

    def snapshot_records(self) -> Iterator[VersionedRecord]:
        return self.quotas.snapshot_records()

    # --- AlterClientQuotas ------------------------------------------------------------------
    def alter(self, req: AlterClientQuotasRequest) -> ControllerResult:
        """Kafka's checks per entry; an entry that fails writes nothing, the others still
        apply. A value equal to the current one and a removal of an unset key write nothing."""
        records: list[VersionedRecord] = []
        response = AlterClientQuotasResponse()
        seen: set[Entity] = set()
        for entry in req.entries:
            result = AlteredEntry(error_message=None, entity=[AlteredEntity(entity_type=e.entity_type, entity_name=e.entity_name)
                                          for e in entry.entity])
            response.entries.append(result)
            try:
                entity, entry_records = self._alter_entity(entry)
                if entity in seen:
                    raise QuotaError(Error.INVALID_REQUEST, f"Ignoring duplicate entity {_show(entity)}")
                seen.add(entity)
            except QuotaError as exc:
                result.error_code, result.error_message = exc.code, exc.message
                continue
            if not req.validate_only:
                records += entry_records
        return ControllerResult(records, response)

    def _alter_entity(self, entry: EntryData) -> tuple[Entity, list[VersionedRecord]]:
        parts: dict[str, str | None] = {}
        for e in entry.entity:
            if e.entity_type in parts:
                raise QuotaError(Error.INVALID_REQUEST,
                                 f"Invalid client quota entity, duplicate entity entry {e.entity_type}")
            if e.entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaError(Error.INVALID_REQUEST, f"Unhandled client quota entity type: {e.entity_type}")
            parts[e.entity_type] = e.entity_name
        entity: Entity = tuple(sorted(parts.items()))
        if not parts:
            raise QuotaError(Error.INVALID_REQUEST, "Invalid empty client quota entity")
        if IP in parts:
            if len(parts) > 1:
                raise QuotaError(Error.INVALID_REQUEST, "Invalid quota entity combination, IP entity should"
                                                        "not be combined with User or ClientId")
            if not _valid_ip(parts[IP]):
                raise QuotaError(Error.INVALID_REQUEST, f"{parts[IP]} is not a valid IP or resolvable host.")
            keys = _IP_KEYS
        else:
            keys = _USER_AND_CLIENT_KEYS
        wanted: dict[str, float | None] = {}
        for op in entry.ops:
            if op.key in wanted:
                raise QuotaError(Error.INVALID_REQUEST, f"Duplicate quota key {op.key} not updating quota "
                                                        f"for this entity {_show(entity)}")
            wanted[op.key] = None if op.remove else op.value
        current = self.values.get(entity, {})
        records: list[VersionedRecord] = []
        for key, value in wanted.items():
            fields = [RecordEntity(entity_type=t, entity_name=n) for t, n in entity]
            if value is None:
                if key in current:
                    records.append((ClientQuotaRecord(entity=fields, key=key, remove=True), 0))
                continue
            _check_value(keys, key, value)
            if current.get(key) != value:
                records.append((ClientQuotaRecord(entity=fields, key=key, value=value), 0))
        return entity, records

    # --- DescribeClientQuotas ---------------------------------------------------------------
    def describe(self, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
        try:
            exact, typed = _filter(req)
        except QuotaError as exc:
            return DescribeClientQuotasResponse(error_code=exc.code, error_message=exc.message, entries=None)
        # The smallest index set any component names holds every match.
        candidates: list[set[Entity]] = [self.by_part.get(p, set()) for p in exact.items()]
        candidates += [self.by_type.get(t, set()) for t in typed]
        pool = min(candidates, key=len) if candidates else self.values.keys()
        entries = []
        for entity in sorted(pool, key=repr):
            parts = dict(entity)
            if req.strict and len(parts) != len(exact) + len(typed):
                continue
            if any(t not in parts or parts[t] != n for t, n in exact.items()) or any(t not in parts for t in typed):
                continue
            entries.append(DescribedEntry(
                entity=[DescribedEntity(entity_type=t, entity_name=n) for t, n in entity],
                values=[ValueData(key=k, value=v) for k, v in sorted(self.values[entity].items())]))
        return DescribeClientQuotasResponse(error_message=None, entries=entries)


def _filter(req: DescribeClientQuotasRequest) -> tuple[dict[str, str | None], set[str]]:
    """ClientQuotasImage.describe's checks: the exact (type -> name) and any-name types."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in req.components:
        if not c.entity_type:
            raise QuotaError(Error.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in typed:
            raise QuotaError(Error.INVALID_REQUEST,
                             f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(Error.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaError(Error.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaError(Error.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaError(Error.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(c.entity_type)
        else:
            raise QuotaError(Error.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    named = exact.keys() | typed
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaError(Error.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                "component should not be used with user or clientId filter component.")
    return exact, typed


def _check_value(keys: dict[str, bool], key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue."""
    whole = keys.get(key)
    if whole is None:
        raise QuotaError(Error.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaError(Error.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if whole:
        limit, kind = (_INT_MAX, "an INT") if key in _IP_KEYS else (_LONG_MAX, "a LONG")
        if value > limit:
            raise QuotaError(Error.INVALID_REQUEST, f"Proposed value for {key} is too large for {kind}.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaError(Error.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def _valid_ip(name: str | None) -> bool:
    """An IP entity names an address (or is the default); kraftwire resolves no host names,
    since the controller decides without I/O."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _show(entity: Entity) -> str:
    """An entity as Kafka's ClientQuotaEntity prints it."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"
