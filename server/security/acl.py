"""Kafka's ACL vocabulary (the numbers its protocol and AccessControlEntryRecord carry) and
the authorizer: a pure function of who asks, from where, for what, and the ACLs that stand."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Iterable, Iterator, Protocol

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


class AclIndex:
    """ACLs by resource, as Kafka's StandardAuthorizer keeps them sorted by resource: what
    applies to one resource is found by lookups (its literal name, the wildcard, and each prefix
    length some PREFIXED ACL of that type uses), so a check costs the ACLs that can match, never
    all of them."""

    def __init__(self) -> None:
        # (resource type, pattern type, resource name) -> the ACLs there, by key.
        self._by_resource: dict[tuple[int, int, str], dict[Hashable, Acl]] = {}
        # resource type -> how many PREFIXED ACLs use each prefix length.
        self._prefix_lengths: dict[int, Counter[int]] = {}

    def add(self, key: Hashable, acl: Acl) -> None:
        self._by_resource.setdefault((acl.resource_type, acl.pattern_type, acl.resource_name), {})[key] = acl
        if acl.pattern_type == PatternType.PREFIXED:
            self._prefix_lengths.setdefault(acl.resource_type, Counter())[len(acl.resource_name)] += 1

    def remove(self, key: Hashable, acl: Acl) -> None:
        where = (acl.resource_type, acl.pattern_type, acl.resource_name)
        bucket = self._by_resource[where]
        del bucket[key]
        if not bucket:
            del self._by_resource[where]
        if acl.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths[acl.resource_type]
            lengths[len(acl.resource_name)] -= 1
            if not lengths[len(acl.resource_name)]:
                del lengths[len(acl.resource_name)]

    def matching(self, resource_type: int, name: str) -> Iterator[tuple[Hashable, Acl]]:
        """(key, ACL) of every ACL whose resource pattern covers ``name``."""
        found = self._by_resource.get
        yield from (found((resource_type, PatternType.LITERAL, name)) or {}).items()
        if name != WILDCARD:
            yield from (found((resource_type, PatternType.LITERAL, WILDCARD)) or {}).items()
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                yield from (found((resource_type, PatternType.PREFIXED, name[:length])) or {}).items()

    def with_name(self, resource_type: int, pattern_type: int, name: str) -> Iterator[tuple[Hashable, Acl]]:
        """(key, ACL) of the ACLs on exactly this resource pattern."""
        yield from (self._by_resource.get((resource_type, pattern_type, name)) or {}).items()

    def applying_to(self, resource_type: int, name: str) -> list[Acl]:
        """What the authorizer weighs for one resource."""
        return [acl for _, acl in self.matching(resource_type, name)]


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


def authorize(principal: str, host: str, operation: AclOperation, resource_type: AclResourceType, name: str,
              acls: Iterable[Acl], config: AuthorizerConfig) -> bool:
    """Whether ``principal`` connecting from ``host`` may do ``operation`` on the resource.

    Super users may do anything. Otherwise a matching DENY wins over any ALLOW; with neither,
    the answer is no, unless no ACL at all names the resource and the configuration allows
    everyone then.
    """
    if principal in config.super_users:
        return True
    any_for_resource = False
    allowed = False
    for acl in acls:
        if not _resource_matches(acl, resource_type, name):
            continue
        any_for_resource = True
        if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD):
            continue
        if not _operation_matches(acl, operation):
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
