"""The metadata shell shows ACLs, client quotas, SCRAM credentials, delegation tokens, producer
ids and the ZooKeeper migration state under the names of Kafka 3.5+'s shell."""

from __future__ import annotations

import io
import json
from pathlib import Path

from protocol.primitives import uuid_to_str
from server.image.files import open_snapshot
from server.metalog.snapshot_file import write_snapshot_file
from tests.support.record_families import ACL_ID, EVERY_FAMILY, replayed
from tools.metadata_shell.shell import Shell
from tools.metadata_shell.tree import build_tree


def shell_on(tmp_path: Path) -> Shell:
    path = tmp_path / "00000000000000000019-0000000001.checkpoint"
    write_snapshot_file(path, replayed(EVERY_FAMILY).snapshot_records())
    return Shell(build_tree(open_snapshot(path)), io.StringIO(), io.StringIO())


def run(shell: Shell, line: str) -> list[str]:
    shell.out = io.StringIO()
    assert shell.run_line(line), shell.err.getvalue()
    return shell.out.getvalue().splitlines()


def test_every_family_has_its_node(tmp_path: Path) -> None:
    shell = shell_on(tmp_path)
    assert run(shell, "ls /image/acls") == [uuid_to_str(ACL_ID)]
    # Kafka's StandardAcl, its enums by name.
    assert json.loads(run(shell, f"cat /image/acls/{uuid_to_str(ACL_ID)}")[0]) == {
        "resourceType": "TOPIC", "resourceName": "orders", "patternType": "LITERAL", "principal": "User:alice",
        "host": "*", "operation": "READ", "permissionType": "ALLOW"}
    assert run(shell, "ls /image/clientQuotas") == ["user(<default>)", "user(alice)"]
    assert run(shell, "cat '/image/clientQuotas/user(alice)/producer_byte_rate'") == ["1024.0"]
    assert run(shell, "ls /image/scram") == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert run(shell, "ls /image/scram/SCRAM-SHA-256") == ["alice"]
    assert run(shell, "ls /image/scram/SCRAM-SHA-512") == []
    assert run(shell, "ls /image/delegationToken") == ["t1"]
    assert json.loads(run(shell, "cat /image/delegationToken/t1")[0])["expiration_timestamp"] == 90
    assert run(shell, "cat /image/producerIds/nextProducerId") == ["2000"]
    assert run(shell, "cat /image/features/zkMigrationState") == ["NONE"]
