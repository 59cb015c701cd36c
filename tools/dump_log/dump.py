"""Dumping one file: its batches, their records, and where reading had to stop."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from server.metalog.bootstrap import BOOTSTRAP_CHECKPOINT
from server.metalog.segments import offset_gap
from tools.dump_log.render import batch_fields, batch_line, record_fields, record_line, to_json
from tools.dump_log.scan import Batch, Damage, walk

_SEGMENT = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True)
class Options:
    """kafka-dump-log.sh's switches: records are listed under their batch only with
    ``deep_iteration``, and their content printed only with ``print_data_log``."""

    json: bool = False
    skip_record_metadata: bool = False
    deep_iteration: bool = True
    print_data_log: bool = True


def dump_file(path: Path, options: Options, out: TextIO, err: TextIO) -> bool:
    """Print what ``path`` holds; False if any of it could not be read, or if its batches do
    not follow one another without a gap."""
    if path.suffix not in (".log", ".checkpoint"):
        print(f"{path}: not a .log segment or a .checkpoint snapshot", file=err)
        return False
    try:
        data = path.read_bytes()
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror}", file=err)
        return False
    if not options.json:
        print(f"Dumping {path}", file=out)
        for line in _describe_name(path.name):
            print(line, file=out)
    segment = _SEGMENT.match(path.name)
    expected: int | None = int(segment.group(1)) if segment else None
    ok = True
    for item in walk(data):
        if isinstance(item, Damage):
            _report_damage(path, item, len(data), options, out, err)
            return False
        if expected is not None and (gap := offset_gap(item.header, expected)) is not None:
            print(f"{path}: non-consecutive offsets at byte {item.position}: {gap}; the controller "
                  f"refuses this log at start-up", file=err)
            ok = False
        expected = item.header.last_offset + 1
        ok = _print_batch(path, item, options, out) and ok
    return ok


def _describe_name(name: str) -> list[str]:
    if m := _SEGMENT.match(name):
        return [f"Log starting offset: {int(m.group(1))}"]
    if name == BOOTSTRAP_CHECKPOINT:
        return ["KRaft bootstrap snapshot"]
    if m := _SNAPSHOT.match(name):
        return [f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}"]
    return []


def _print_batch(path: Path, item: Batch, options: Options, out: TextIO) -> bool:
    """Print a batch and its records as the options ask; False if a record could not be decoded."""
    fields = batch_fields(item.position, item.header, True)
    if options.json and options.skip_record_metadata:
        print(to_json({"file": str(path), "batch": fields}), file=out)
        return True
    if not options.json:
        print(batch_line(fields), file=out)
        if not options.deep_iteration:
            return True
    ok = True
    is_control = item.header.is_control
    # A record's content counts only where it is shown: a data record's is not without payloads.
    shown = options.json or options.print_data_log or is_control
    for record in item.batch.records:
        rec = record_fields(item.header, record)
        ok = ok and ("error" not in rec or not shown)
        if options.json:
            line = to_json({"file": str(path), "batch": fields, **rec})
        else:
            line = record_line(rec, is_control, options.skip_record_metadata, options.print_data_log)
        print(line, file=out)
    return ok


def _report_damage(path: Path, damage: Damage, size: int, options: Options, out: TextIO, err: TextIO) -> None:
    if damage.header is not None and not options.json:
        print(batch_line(batch_fields(damage.position, damage.header, False)), file=out)
    if damage.torn:
        print(f"{path}: torn tail at byte {damage.position}: the last {size - damage.position} bytes "
              f"are not a whole batch: {damage.reason}", file=err)
    else:
        print(f"{path}: corrupt batch at byte {damage.position}: {damage.reason}; "
              f"nothing after it was read", file=err)
