"""What the validation job reads and writes, apart from how: a capture path as an executor
opens it, and the three tables. The job builds the tables and the summary reads them; both
import this module rather than each other."""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def local_path(path: str) -> str:
    """A capture path as the executor opens it: `file:` URIs name a (shared) local file."""
    return path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:")


class Tables(NamedTuple):
    frames: DataFrame
    violations: DataFrame
    flows: DataFrame
