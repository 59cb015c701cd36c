"""The Python daemon that local Spark forks its workers from, with the decoder and the Arrow
writers already imported: each forked worker would otherwise import them anew (most of a
second of CPU each, before its first row)."""
from __future__ import annotations

import pyarrow.parquet  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark import daemon

import tools.replay.crossflow  # noqa: F401
import tools.replay.job  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
