"""ACL and SCRAM control driven directly, and the base properties of a valid secured
controller configuration."""

from __future__ import annotations

from protocol.constants import AclOperation, AclPermissionType, AclResourceType, PatternType
from protocol.generated.messages.create_acls_request import AclCreation
from protocol.message import Message
from server.controller.acls import AclControl
from server.controller.result import ControllerResult
from server.controller.scram import ScramControl


def replay(control: AclControl | ScramControl, result: ControllerResult) -> Message:
    for record, _ in result.records:
        name = type(record).__name__
        if name.startswith("Remove"):
            control.replay_remove(record)  # type: ignore[arg-type]
        else:
            control.replay_add(record)  # type: ignore[arg-type]
    assert result.response is not None
    return result.response


def creation(name: str = "foo", rtype: int = AclResourceType.TOPIC, pattern: int = PatternType.LITERAL,
             principal: str = "User:alice", host: str = "*", op: int = AclOperation.READ,
             permission: int = AclPermissionType.ALLOW) -> AclCreation:
    return AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern, principal=principal,
                       host=host, operation=op, permission_type=permission)


def match_all(**overrides: object) -> dict:
    base = dict(resource_type_filter=AclResourceType.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
                principal_filter=None, host_filter=None, operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)
    return {**base, **overrides}


# The least a controller's server.properties holds; the security settings under test go on top.
BASE = {"process.roles": "controller", "node.id": "1", "listeners": "CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093",
        "metadata.log.dir": "/tmp/kraftwire-unused"}
