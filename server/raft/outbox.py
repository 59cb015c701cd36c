"""The Raft core's requests in flight, and its backoff after failed ones.

One request at a time goes to each destination, none while that destination is backed off,
and a response counts only if it answers the request in flight now (its correlation id, from
the destination it went to): late, duplicated or reordered responses are dropped here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    API_VERSIONS = "api-versions"
    UPDATE_VOTER = "update-voter"
    PRE_VOTE = "pre-vote"
    VOTE = "vote"
    BEGIN_EPOCH = "begin-epoch"
    END_EPOCH = "end-epoch"
    FETCH = "fetch"
    FETCH_SNAPSHOT = "fetch-snapshot"


@dataclass(frozen=True)
class InFlight:
    destination: int
    kind: Kind
    sent_ms: int


class Outbox:
    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._next_correlation = 0
        self._in_flight: dict[int, InFlight] = {}
        self._busy: dict[int, int] = {}  # destination -> correlation id of its request in flight
        self._backoff_until: dict[int, int] = {}

    @property
    def idle(self) -> bool:
        return not self._in_flight

    def busy(self, destination: int) -> bool:
        return destination in self._busy

    def send(self, destination: int, kind: Kind, now: int) -> int | None:
        """The correlation id of a new request to ``destination``, or None if one may not go now."""
        if destination in self._busy or destination in self._backoff_until:
            return None
        correlation_id = self._next_correlation
        self._next_correlation += 1
        self._in_flight[correlation_id] = InFlight(destination, kind, now)
        self._busy[destination] = correlation_id
        return correlation_id

    def finish(self, correlation_id: int, source: int | None = None) -> InFlight | None:
        """The request ``correlation_id`` answered (by ``source``, if given), no longer in
        flight; None if it was not in flight (to ``source``)."""
        sent = self._in_flight.get(correlation_id)
        if sent is None or (source is not None and sent.destination != source):
            return None
        del self._in_flight[correlation_id]
        if self._busy.get(sent.destination) == correlation_id:
            del self._busy[sent.destination]
        return sent

    def fail(self, correlation_id: int, now: int) -> None:
        """The request could not be delivered, or its connection broke: back off its destination."""
        sent = self.finish(correlation_id)
        if sent is not None:
            self.back_off(sent.destination, now)

    def back_off(self, destination: int, now: int) -> None:
        self._backoff_until[destination] = now + self.retry_backoff_ms

    def forgive(self, destination: int) -> None:
        """Let a request go to ``destination`` without waiting out its backoff."""
        self._backoff_until.pop(destination, None)

    def expire(self, now: int) -> None:
        """Give up on requests unanswered for the request timeout, and end backoffs that are over."""
        for correlation_id, sent in list(self._in_flight.items()):
            if now - sent.sent_ms >= self.request_timeout_ms:
                self.finish(correlation_id)
        for destination, until in list(self._backoff_until.items()):
            if until <= now:
                del self._backoff_until[destination]

    def clear(self) -> None:
        """Forget every request and backoff: their responses will be ignored."""
        self._in_flight.clear()
        self._busy.clear()
        self._backoff_until.clear()

    def deadlines(self) -> list[int]:
        """When a request times out or a backoff ends."""
        times = [sent.sent_ms + self.request_timeout_ms for sent in self._in_flight.values()]
        times.extend(self._backoff_until.values())
        return times
