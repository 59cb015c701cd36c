"""The log rules of replication, on logs built by hand."""

from __future__ import annotations

import pytest

from tests.support.raft_log import InMemoryLog
from server.raft.types import OffsetAndEpoch
from server.raft.replication import FetchPosition, fetch_position, majority_offset, truncation_offset
from tests.raft.helpers import batch, log_with


@pytest.mark.parametrize("offsets, expected", [([5, 3, 9], 5), ([0, 0, 7], 0), ([4, 8, 6, 2, 9], 6)])
def test_the_majority_offset_is_reached_by_most_voters(offsets: list[int], expected: int) -> None:
    assert majority_offset(offsets) == expected


@pytest.mark.parametrize("offset, last_epoch, expected", [
    (0, 0, FetchPosition()),
    (3, 2, FetchPosition()),              # behind, in an epoch this log has
    (5, 2, FetchPosition(diverging=OffsetAndEpoch(4, 2))),  # past where epoch 2 ends here
    (4, 3, FetchPosition(diverging=OffsetAndEpoch(4, 2))),  # an epoch this log never had
    (6, 5, FetchPosition()),
])
def test_where_a_fetch_stands(offset: int, last_epoch: int, expected: FetchPosition) -> None:
    assert fetch_position(log_with(1, 1, 2, 2, 5, 5), offset, last_epoch) == expected


def test_a_fetch_below_the_snapshot_goes_to_it() -> None:
    log = InMemoryLog(snapshot=(4, 2))
    log.append([batch(4, 5)])
    assert fetch_position(log, 2, 1) == FetchPosition(snapshot=(4, 2))
    assert fetch_position(log, 4, 2) == FetchPosition()


@pytest.mark.parametrize("epoch, end, expected", [(2, 3, 3), (2, 9, 4), (3, 9, 4), (1, 2, 2), (0, 0, 0)])
def test_a_follower_cuts_at_the_earlier_end_of_the_shared_epoch(epoch: int, end: int, expected: int) -> None:
    assert truncation_offset(log_with(1, 1, 2, 2, 4), epoch, end) == expected
