"""Faults at a quorum's edges that must stop a node or be said aloud, never pass in silence."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from tools.controller_process import ControllerProcess, QuorumProcesses
from tools.processes import poll

TIMING = {"controller.quorum.election.timeout.ms": "300", "controller.quorum.fetch.timeout.ms": "600"}


def test_a_voter_that_cannot_save_its_vote_stops_instead_of_voting(tmp_path: Path) -> None:
    quorum = QuorumProcesses(tmp_path / "quorum", 3, TIMING, lifetime_s=240).start()
    try:
        leader = quorum.wait_for_leader(timeout=60)
        follower = next(n for n in quorum.members if n != leader)
        member = quorum.members[follower]
        # The state file becomes a directory: the atomic rename onto it fails (EISDIR), as a
        # full or failing disk fails the write, and root's permissions cannot get round it.
        state = member.data_dir / "__cluster_metadata-0" / "quorum-state"
        state.unlink()
        state.mkdir()
        os.kill(quorum.members[leader].pid, signal.SIGKILL)
        # The next election asks the follower to save a new epoch: it cannot, so it stops.
        poll(lambda: not member.running, 120, message=f"voter {follower} stops")
        assert member.proc is not None and member.proc.returncode == 3
        assert "cannot save the quorum state" in member.stderr_text()
        assert "Traceback" not in member.stderr_text()
        shutil.rmtree(state)
    finally:
        quorum.stop()


def test_a_voter_of_another_cluster_is_reported_on_both_sides(tmp_path: Path) -> None:
    quorum = QuorumProcesses(tmp_path / "quorum", 3, TIMING, lifetime_s=240)
    odd_id = max(quorum.members)
    odd = quorum.members[odd_id]
    quorum.members[odd_id] = ControllerProcess(
        odd.workdir, odd.properties, lifetime_s=240, port=odd.port, cluster_id="b3RoZXItY2x1c3Rlci1pZA")
    quorum.start()
    try:
        quorum.wait_for_leader(timeout=60)
        poll(lambda: "INCONSISTENT_CLUSTER_ID" in odd.stderr_text() or
             "INCONSISTENT_CLUSTER_ID" in quorum.members[odd_id].stderr_text(), 120,
             message="the odd voter says why it is refused")
        others = [m for n, m in quorum.members.items() if n != odd_id]
        poll(lambda: any("INCONSISTENT_CLUSTER_ID" in m.stderr_text() for m in others), 120,
             message="a voter of the cluster says whom it refuses")
    finally:
        quorum.stop()
