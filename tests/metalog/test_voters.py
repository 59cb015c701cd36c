"""A log whose VotersRecord names other voters is refused before anything is written, as a
quorum-state that names them is; --take-over-quorum continues as the only voter."""

from __future__ import annotations

from protocol.generated.metadata.voters_record import KRaftVersionFeature, Voter, VotersRecord
from protocol.records import CONTROL_FLAG, ControlType, Record, RecordBatch, control_key, control_value, encode_batch
from server.config import EMBEDDED_NODE_ID
from server.metalog.quorum_state import read_quorum_state
from tests.support.kafka_data import read_batches
from tests.support.metalog import run_server_once, segment_paths
from tools.controller_process import ControllerProcess

THREE_VOTERS = VotersRecord(version=0, voters=[
    Voter(voter_id=i, voter_directory_id=bytes([i]) * 16, endpoints=[],
          k_raft_version_feature=KRaftVersionFeature(min_supported_version=0, max_supported_version=1))
    for i in (1, 2, 3)])


def test_a_voters_record_naming_other_voters_is_refused_until_taken_over(controller_factory) -> None:
    controller = controller_factory({"broker.session.timeout.ms": "120000"})
    controller.stop()
    [segment] = segment_paths(controller.data_dir)
    end = read_quorum_state(controller.data_dir)
    data = segment.read_bytes()
    next_offset = read_batches(data)[-1][2][-1][0] + 1
    segment.write_bytes(data + encode_batch(RecordBatch(
        base_offset=next_offset, partition_leader_epoch=end.leader_epoch, attributes=CONTROL_FLAG,
        records=[Record(control_value(THREE_VOTERS), control_key(ControlType.KRAFT_VOTERS))])))

    result = run_server_once(controller.config_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the quorum's voters are [1, 2, 3] (VotersRecord)" in result.stderr.splitlines()[-1]
    assert read_quorum_state(controller.data_dir) == end  # nothing was written

    taking_over = TakeOver(controller.workdir, controller.properties)
    try:
        taking_over.start()
        assert "taking over the quorum of voters [1, 2, 3]" in taking_over.stderr_text()
        assert read_quorum_state(controller.data_dir).voters == (EMBEDDED_NODE_ID,)
    finally:
        taking_over.stop()


class TakeOver(ControllerProcess):
    def _launch(self, args: list[str]) -> None:
        super()._launch([*args, "--take-over-quorum"])
