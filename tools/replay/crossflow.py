"""The job's second step, one task per capture: the rules that look across a capture's flows,
and the figures that need the whole run's first frame.

A capture's controller events, written by its decoding tasks, are judged in time order
(`rules.controller_violations`); the violations go to their own part file of the violations
table, and a frame they name gets the rule in its own list of violations, its part file
written again (rarely: most captures break none of these rules). The capture's frames are then
tallied into the timeline, whose bins start at the run's first frame, and the latency samples.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from tools.replay import schema
from tools.replay.rules import CROSS_FLOW_RULES, ControllerEvent, controller_violations
from tools.replay.summary import Tally
from tools.replay.tasks import EVENTS, part_path, write_part

_TIMELINE_COLUMNS = ["api_key", "api_name", "direction", "timestamp_ns", "latency_ms"]


class Capture(NamedTuple):
    number: int  # the capture's place in the job's list
    tasks: list[int]  # the numbers of its decoding tasks


def judge_capture(capture: Capture, out: str, scratch: str, first_ns: int | None, bin_ns: int) -> Tally:
    """Judge `capture` across its flows and tally its frames into the timeline (bins of
    `bin_ns` from `first_ns`) and the latency samples."""
    tally = Tally()
    events = pq.read_table([part_path(scratch, EVENTS, n) for n in capture.tasks], schema=schema.EVENTS)
    # In the rules' own order already: their sort then only confirms it, several times faster
    # than ordering a capture's events itself.
    events = events.sort_by([("timestamp_ns", "ascending"), ("frame", "ascending")])
    columns = [events[name].to_pylist() for name in ControllerEvent._fields]
    found = list(controller_violations(map(ControllerEvent._make, zip(*columns))))
    frame_files = [part_path(out, "frames", n) for n in capture.tasks]
    if found:
        judged = schema.table(found, schema.VIOLATIONS)
        write_part(os.path.join(out, "violations", f"part-flows-{capture.number:05d}.parquet"), judged)
        tally.add_violations(judged)
        late: dict[tuple[str | None, int | None], list[str]] = {}
        for v in found:
            if v.frame is not None and v.rule in CROSS_FLOW_RULES:
                late.setdefault((v.flow, v.frame), []).append(v.rule)
        if late:
            for path in frame_files:
                _add_late(path, late)
    if first_ns is not None:
        frames = pq.read_table(frame_files, columns=_TIMELINE_COLUMNS)
        tally.add_timeline(frames, first_ns, bin_ns)
    return tally


def _add_late(path: str, late: dict[tuple[str | None, int | None], list[str]]) -> None:
    """Write a frames part file again with the rules judged across flows added to the lists
    of the frames they name."""
    frames = pq.read_table(path, schema=schema.FRAMES)
    keys = zip(frames["flow"].to_pylist(), frames["frame"].to_pylist())
    lists = [own + late.get(key, []) for key, own in zip(keys, frames["violations"].to_pylist())]
    patched = frames.set_column(frames.schema.get_field_index("violations"), schema.FRAMES.field("violations"),
                                pa.array(lists, schema.FRAMES.field("violations").type))
    write_part(path, patched)
