"""`evalstream replay`: an event log in, every run.summary the worker would publish out.

Reads JSON Lines, applies each event with the same projection code as the worker, and
writes each output event as one JSON line, in the order the worker would publish them.
Invalid lines are reported on stderr (line number, reason) and skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from events.codec import DecodeError, decode, encode_payload
from projections.progress import progress
from projections.run import Outcome, RunState, apply, summary_due
from projections.summary import summary


@dataclass(slots=True)
class ReplayStats:
    lines: int = 0
    applied: int = 0
    redeliveries: int = 0
    ignored: int = 0
    skipped: int = 0
    summaries: int = 0
    open_runs: int = 0


def replay(
    lines: Iterable[bytes],
    out: BinaryIO,
    err: TextIO,
    *,
    progress_every: int | None = None,
) -> ReplayStats:
    """Fold `lines` (one event each) and write summaries (and progress, when
    `progress_every` is set: every that many applied events of a run, and at close)."""
    runs: dict[str, RunState] = {}
    progress_seq: dict[str, int] = {}
    stats = ReplayStats()
    for number, line in enumerate(lines, 1):
        stats.lines = number
        if not line.strip():
            continue
        try:
            event = decode(line.rstrip(b"\r\n"))
        except DecodeError as error:
            stats.skipped += 1
            err.write(f"line {number}: {error.code}: {error}\n")
            continue
        run = runs.get(event.run_id)
        if run is None:
            run = runs[event.run_id] = RunState(event.run_id)
        applied = apply(run, event)
        if applied.outcome is Outcome.REFUSED:
            stats.skipped += 1
            err.write(f"line {number}: refused: {applied.reason}\n")
            continue
        if applied.outcome is not Outcome.APPLIED:
            stats.redeliveries += applied.outcome is Outcome.REDELIVERY
            stats.ignored += applied.outcome is Outcome.IGNORED
            continue
        stats.applied += 1
        if progress_every and (run.closed or run.event_count % progress_every == 0):
            seq = progress_seq[run.run_id] = progress_seq.get(run.run_id, 0) + 1
            out.write(encode_payload(progress(run, seq)) + b"\n")
        if summary_due(run, applied):
            stats.summaries += 1
            out.write(encode_payload(summary(run)) + b"\n")
    stats.open_runs = sum(1 for run in runs.values() if not run.closed)
    return stats
