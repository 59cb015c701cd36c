"""Kafka's ACL vocabulary (the numbers its protocol and AccessControlEntryRecord carry) and
the authorizer: a pure function of who asks, from where, for what, and the ACLs that stand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Hashable, Iterator, Protocol, TypeVar

from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD = "*"  # any resource name (LITERAL), any host
WILDCARD_PRINCIPAL = "User:*"

# An ALLOW of one of these operations also allows the keyed one, as in Kafka.
_IMPLIED_BY = {
    AclOperation.DESCRIBE: (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.ALTER_CONFIGS,),
}


class Acl(Protocol):
    """An access control entry: AccessControlEntryRecord's fields."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def pattern_type(self) -> int: ...
    @property
    def principal(self) -> str: ...  # "User:alice"
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


@dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str] = frozenset()  # "User:admin", ...
    allow_everyone_if_no_acl_found: bool = False


def _resource_matches(acl: Acl, resource_type: int, name: str) -> bool:
    if acl.resource_type != resource_type:
        return False
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name == name or acl.resource_name == WILDCARD
    if acl.pattern_type == PatternType.PREFIXED:
        return name.startswith(acl.resource_name)
    return False


def _operation_matches(acl: Acl, operation: int) -> bool:
    if acl.operation in (AclOperation.ALL, operation):
        return True
    return acl.permission_type == AclPermissionType.ALLOW and acl.operation in _IMPLIED_BY.get(AclOperation(operation), ())


# (resource type, pattern type, resource name): the resource pattern an ACL names.
Pattern = tuple[int, int, str]
K = TypeVar("K", bound=Hashable)
A = TypeVar("A", bound=Acl)

# The resource types an ACL can name (ANY appears only in filters).
CONCRETE_TYPES = tuple(t for t in AclResourceType if t not in (AclResourceType.UNKNOWN, AclResourceType.ANY))


class AclIndex(Generic[K, A]):
    """The standing ACLs by resource pattern, then principal, as Kafka's StandardAuthorizer
    keeps them sorted by resource: a check looks up the literal name, the wildcard and each
    prefix of the name that some PREFIXED ACL uses, so its cost does not grow with the number
    of ACLs. Kept up to date one ACL at a time by whoever replays the ACL records."""

    def __init__(self) -> None:
        # pattern -> principal -> ACL key -> ACL
        self._patterns: dict[Pattern, dict[str, dict[K, A]]] = {}
        # resource type -> length of a PREFIXED ACL's name -> how many patterns have it: the
        # prefixes worth looking up are those lengths, at most one per character of the name.
        self._prefix_lengths: dict[int, dict[int, int]] = {}

    def add(self, key: K, acl: A) -> None:
        pattern = (acl.resource_type, acl.pattern_type, acl.resource_name)
        by_principal = self._patterns.get(pattern)
        if by_principal is None:
            by_principal = self._patterns[pattern] = {}
            if acl.pattern_type == PatternType.PREFIXED:
                lengths = self._prefix_lengths.setdefault(acl.resource_type, {})
                lengths[len(acl.resource_name)] = lengths.get(len(acl.resource_name), 0) + 1
        by_principal.setdefault(acl.principal, {})[key] = acl

    def remove(self, key: K, acl: A) -> None:
        pattern = (acl.resource_type, acl.pattern_type, acl.resource_name)
        by_principal = self._patterns[pattern]
        keyed = by_principal[acl.principal]
        del keyed[key]
        if keyed:
            return
        del by_principal[acl.principal]
        if by_principal:
            return
        del self._patterns[pattern]
        if acl.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths[acl.resource_type]
            length = len(acl.resource_name)
            lengths[length] -= 1
            if not lengths[length]:
                del lengths[length]

    def stands(self, acl: Acl) -> bool:
        """Whether an ACL with the same fields as ``acl`` is in the index."""
        by_principal = self._patterns.get((acl.resource_type, acl.pattern_type, acl.resource_name), {})
        return any((a.host, a.operation, a.permission_type) == (acl.host, acl.operation, acl.permission_type)
                   for a in by_principal.get(acl.principal, {}).values())

    def applying(self, resource_type: int, name: str) -> Iterator[dict[str, dict[K, A]]]:
        """The ACLs of every pattern that covers the resource: its literal name, the literal
        wildcard, and the PREFIXED patterns the name starts with."""
        for pattern in self._applying_patterns(resource_type, name):
            by_principal = self._patterns.get(pattern)
            if by_principal is not None:
                yield by_principal

    def _applying_patterns(self, resource_type: int, name: str) -> Iterator[Pattern]:
        yield resource_type, PatternType.LITERAL, name
        if name != WILDCARD:
            yield resource_type, PatternType.LITERAL, WILDCARD
        for length in self._prefix_lengths.get(resource_type, {}):
            if length <= len(name):
                yield resource_type, PatternType.PREFIXED, name[:length]

    def filtered(self, resource_type: int, name: str | None, pattern_type: int,
                 principal: str | None) -> Iterator[tuple[K, A]] | None:
        """The ACLs a DescribeAcls/DeleteAcls filter's resource and principal can select,
        looked up when the filter names a resource; None when it names none (every ACL is a
        candidate). The caller still applies the whole filter to each."""
        if name is None:
            return None
        types = CONCRETE_TYPES if resource_type == AclResourceType.ANY else (resource_type,)
        patterns: list[Pattern] = []
        for t in types:
            if pattern_type == PatternType.MATCH:
                patterns += self._applying_patterns(t, name)
            if pattern_type in (PatternType.LITERAL, PatternType.ANY):
                patterns.append((t, PatternType.LITERAL, name))
            if pattern_type in (PatternType.PREFIXED, PatternType.ANY):
                patterns.append((t, PatternType.PREFIXED, name))
        found = (self._patterns.get(pattern, {}) for pattern in patterns)
        selected = (by_principal.values() if principal is None else [by_principal.get(principal, {})]
                    for by_principal in found)
        return ((key, acl) for keyed_lists in selected for keyed in keyed_lists for key, acl in keyed.items())


def authorize(principal: str, host: str, operation: AclOperation, resource_type: AclResourceType, name: str,
              acls: AclIndex[K, A], config: AuthorizerConfig) -> bool:
    """Whether ``principal`` connecting from ``host`` may do ``operation`` on the resource.

    Super users may do anything. Otherwise a matching DENY wins over any ALLOW; with neither,
    the answer is no, unless no ACL at all names the resource and the configuration allows
    everyone then.
    """
    if principal in config.super_users:
        return True
    any_for_resource = False
    allowed = False
    principals = (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
    for by_principal in acls.applying(resource_type, name):
        any_for_resource = True
        for who in principals:
            for acl in by_principal.get(who, {}).values():
                if acl.host not in (host, WILDCARD) or not _operation_matches(acl, operation):
                    continue
                if acl.permission_type == AclPermissionType.DENY:
                    return False
                allowed = True
    return allowed or (not any_for_resource and config.allow_everyone_if_no_acl_found)


def filter_matches(acl: Acl, resource_type: int, name: str | None, pattern_type: int,
                   principal: str | None, host: str | None, operation: int, permission: int) -> bool:
    """Whether an ACL matches a DescribeAcls/DeleteAcls filter (None, ANY: anything).

    The MATCH pattern type selects the ACLs that would apply to the named resource: the
    literal one, the wildcard and every prefix of it.
    """
    if resource_type != AclResourceType.ANY and acl.resource_type != resource_type:
        return False
    if pattern_type == PatternType.MATCH:
        if name is not None and not _resource_matches(acl, acl.resource_type, name):
            return False
    else:
        if pattern_type != PatternType.ANY and acl.pattern_type != pattern_type:
            return False
        if name is not None and acl.resource_name != name:
            return False
    return ((principal is None or acl.principal == principal)
            and (host is None or acl.host == host)
            and (operation == AclOperation.ANY or acl.operation == operation)
            and (permission == AclPermissionType.ANY or acl.permission_type == permission))
