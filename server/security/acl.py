"""Kafka's ACL vocabulary (the numbers its protocol and AccessControlEntryRecord carry) and
the authorizer: a pure function of who asks, from where, for what, and the ACLs that stand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

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
