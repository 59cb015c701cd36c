"""The Python daemon that local Spark forks its workers from, with the decoder and the Arrow
path already imported: each forked worker would otherwise import them anew (most of a second
of CPU each, before its first row)."""
from __future__ import annotations

import pandas  # type: ignore[import-untyped]  # noqa: F401  (the Arrow UDF path of a worker imports it)
import pyarrow  # noqa: F401
import pyspark.sql.pandas.serializers  # noqa: F401
from pyspark import daemon

import tools.replay.job  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
