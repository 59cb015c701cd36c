"""Counters and heartbeat latency of a broker process, for its summary line."""

from __future__ import annotations

import math

# Latencies fall into buckets 2% wide: percentiles of millions of heartbeats in a few kB.
_GROWTH = 1.02
_LOG_GROWTH = math.log(_GROWTH)
_BUCKETS = 1200  # 1 us * 1.02**1200 is beyond 20 000 s


class LatencyHistogram:
    __slots__ = ("counts", "count", "max_s")

    def __init__(self) -> None:
        self.counts = [0] * _BUCKETS
        self.count = 0
        self.max_s = 0.0

    def record(self, seconds: float) -> None:
        us = seconds * 1e6
        index = int(math.log(us) / _LOG_GROWTH) if us > 1 else 0
        self.counts[min(index, _BUCKETS - 1)] += 1
        self.count += 1
        if seconds > self.max_s:
            self.max_s = seconds

    def percentile_ms(self, q: float) -> float:
        """The latency below which ``q`` (0-100) percent of samples fall, to within 2%."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(self.count * q / 100))
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                # The middle of the bucket, but never beyond the largest sample.
                return min(_GROWTH ** (index + 0.5) / 1000, self.max_s * 1000)
        return self.max_s * 1000


class Stats:
    """Shared by every broker of the process."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.heartbeats_sent = 0
        self.heartbeats_answered = 0
        self.heartbeat_errors = 0  # answered with an error code
        self.heartbeats_unanswered = 0  # the connection failed or timed out first
        self.latency = LatencyHistogram()
        self.registrations = 0
        self.alter_partition_sent = 0
        self.alter_partition_errors = 0
        self.isr_changes = 0

    def heartbeat_line(self) -> str:
        h = self.latency
        return (f"heartbeats sent {self.heartbeats_sent}, answered {self.heartbeats_answered}, "
                f"errors {self.heartbeat_errors}, unanswered {self.heartbeats_unanswered} | "
                f"heartbeat latency ms p50 {h.percentile_ms(50):.2f} p99 {h.percentile_ms(99):.2f} "
                f"max {h.max_s * 1000:.2f}")
