"""The Python daemon that local Spark forks its workers from, with the decoder and the Arrow
writers already imported: each forked worker would otherwise import them anew (most of a
second of CPU each, before its first row)."""
from __future__ import annotations

import gc

# Arrow imports pandas the first time it converts Python values, and Arrow's grouping its query
# engine: about 0.6 s of CPU a worker would spend in its first batch.
import pandas  # type: ignore[import-untyped]  # noqa: F401
import pyarrow.acero  # noqa: F401
import pyarrow.parquet  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark import daemon

import tools.replay.crossflow  # noqa: F401
import tools.replay.job  # noqa: F401

if __name__ == "__main__":
    # What is imported now lives as long as the workers forked from here: their collections
    # need not look at it again and again.
    gc.freeze()
    daemon.manager()
