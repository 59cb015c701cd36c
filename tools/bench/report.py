"""Benchmark output and timing.

Every measurement is printed as one JSON object per line next to an anchor measured in the
same run, because only ratios taken side by side mean anything on a shared machine.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable

# Every line emitted in this process, in order: `python -m tools.bench --doc FILE` writes them
# into the benchmark document after the suites have run.
EMITTED: list[dict[str, Any]] = []


def emit(name: str, ours: float, anchor: float | None, unit: str, **extra: Any) -> dict[str, Any]:
    line: dict[str, Any] = {"name": name, "ours": round(ours, 3),
                            "anchor": None if anchor is None else round(anchor, 3), "unit": unit,
                            "ratio": None if not anchor else round(ours / anchor, 3)}
    line.update(extra)
    EMITTED.append(line)
    print(json.dumps(line), flush=True)
    return line


def rate(fn: Callable[[], object], min_seconds: float = 0.4, repeats: int = 5) -> float:
    """Best observed calls per second of ``fn`` over a few timed rounds."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= 0.05:
            break
        n *= 4
    n = max(1, int(n * min_seconds / max(elapsed, 1e-9) / repeats))
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        best = max(best, n / elapsed)
    return best


def paired_rate(ours: Callable[[], object], anchor: Callable[[], object],
                rounds: int = 3) -> tuple[float, float]:
    """Interleave the two so that a noisy neighbour hurts both sides alike."""
    best_ours = best_anchor = 0.0
    for _ in range(rounds):
        best_ours = max(best_ours, rate(ours, repeats=2))
        best_anchor = max(best_anchor, rate(anchor, repeats=2))
    return best_ours, best_anchor


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
