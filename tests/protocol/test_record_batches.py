"""Record batches: the value-only encoder writes what the general one writes."""

from __future__ import annotations

import random

import pytest

from protocol.records import Record, RecordBatch, decode_batch, encode_batch, encode_value_batch


@pytest.mark.parametrize("count", [1, 63, 64, 2047, 2048, 2049, 9000])
def test_value_only_records_encode_as_the_general_encoder_writes_them(count: int) -> None:
    """Offset deltas and value sizes on both sides of the one- and two-byte varints, and past
    the sizes whose varints are kept ready."""
    rng = random.Random(count)
    values = [rng.randbytes(rng.choice([0, 1, 63, 64, 200, 2047, 2048, 9000])) for _ in range(count)]
    general = encode_batch(RecordBatch(base_offset=77, partition_leader_epoch=3, base_timestamp=123,
                                       max_timestamp=123, records=[Record(v) for v in values]))
    assert encode_value_batch(values, 77, 3, 123) == general
    batch, _ = decode_batch(general)
    assert [r.value for r in batch.records] == values
    assert [r.key for r in batch.records] == [None] * count
