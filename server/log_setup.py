"""The controller's log output: Kafka-like text lines, or one JSON object a line for log
collectors (``kraftwire.log.format=json`` or ``--log-format json``)."""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from typing import Callable

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLinesFormatter(logging.Formatter):
    """A record as a single-line JSON object: time (UTC, ISO 8601), level, logger, message,
    and the exception's text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, log_format: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLinesFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class RateLimitedLog:
    """One line per key (a client address) per interval, however often the event repeats: a
    client retrying a wrong password every few milliseconds must not flood the log. The next
    line after a quiet spell says how many were left out."""

    def __init__(self, logger: logging.Logger, interval_s: float, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 10_000) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self.max_keys = max_keys  # the memory of who was logged is bounded too
        self._last: dict[str, tuple[float, int]] = {}  # key -> (when logged, left out since)

    def note(self, key: str, message: str) -> None:
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return
        suppressed = last[1] if last is not None else 0
        if last is None and len(self._last) >= self.max_keys:
            self._last.pop(next(iter(self._last)))
        self._last[key] = (now, 0)
        if suppressed:
            message += f" ({suppressed} more from {key} not logged in the last {self.interval_s:.0f} s)"
        self.logger.warning(message)
