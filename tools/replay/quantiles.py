"""Percentiles of values spread over many tasks, in bounded memory.

Each task keeps its values sorted or, past LIMIT of them, LIMIT evenly spaced order
statistics, each standing for the run of values up to it; the driver merges the parts and reads
a percentile as the value at rank ceil(q * n), as Spark's percentile_approx does. With at most
LIMIT values in every part the answer is exact; otherwise its rank is off by less than a
1/LIMIT share of the values, the accuracy percentile_approx(..., 10000) promises.
"""
from __future__ import annotations

import math
from typing import Iterable, NamedTuple

import numpy as np
import numpy.typing as npt

LIMIT = 10_000


class Sample(NamedTuple):
    values: npt.NDArray[np.float64]  # ascending
    weights: npt.NDArray[np.int64]  # how many of the original values each stands for


def sample(values: npt.ArrayLike, limit: int = LIMIT) -> Sample:
    ordered = np.sort(np.asarray(values, np.float64))
    n = len(ordered)
    if n <= limit:
        return Sample(ordered, np.ones(n, np.int64))
    ends = np.arange(1, limit + 1, dtype=np.int64) * n // limit  # the last rank of each run; the final one is n
    return Sample(ordered[ends - 1], np.diff(ends, prepend=0))


def merge(samples: Iterable[Sample]) -> Sample:
    parts = list(samples)
    if not parts:
        return Sample(np.empty(0, np.float64), np.empty(0, np.int64))
    values = np.concatenate([p.values for p in parts])
    order = np.argsort(values, kind="stable")
    return Sample(values[order], np.concatenate([p.weights for p in parts])[order])


def percentile(part: Sample, q: float) -> float | None:
    """The value at rank ceil(q * n) (1-based; at least 1), or None without values."""
    ranks = np.cumsum(part.weights)
    if len(ranks) == 0:
        return None
    rank = max(1, math.ceil(q * int(ranks[-1])))
    return float(part.values[int(np.searchsorted(ranks, rank))])
