"""A run as replay and the worker hold it: its state, and beside it its summary cache.

The state (`projections.fold.run.RunState`) is what the events make and the store keeps;
the cache (`projections.assembly.contributions.SummaryCache`) only saves work, and may be
dropped at any time (a budget, an eviction): the next summary or progress event makes it
again from the state, to the same bytes. So the state never holds it, and whoever holds a
run holds its cache beside it: `Held` in replay, the worker's `CachedRun`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from events.codec import encode_payload
from projections.assembly.contributions import SummaryCache
from projections.assembly.progress import progress
from projections.fold.run import RunState
from projections.native_state import NativeState

FoldState = RunState | NativeState
"""A run's state in the Python fold, or in the native one (`projections.native_step`)."""


class HeldRun(Protocol):
    @property
    def run(self) -> FoldState: ...

    summaries: SummaryCache | None
    """None: no cache, or it was dropped."""


@dataclass(slots=True, eq=False)
class Held:
    run: RunState
    summaries: SummaryCache | None = None


def summaries_of(held: HeldRun) -> SummaryCache:
    """The run's summary cache, made when it has none."""
    cache = held.summaries
    if cache is None:
        cache = held.summaries = SummaryCache()
    return cache


def progress_bytes(held: HeldRun, seq: int) -> bytes:
    """The encoded `run.progress` number `seq` of a held run of either fold, the span of its
    events for the ETA (the native fold writes `projections.assembly.progress`'s bytes)."""
    run = held.run
    if isinstance(run, NativeState):
        written: bytes = run.native.progress_bytes(seq, None)
        return written
    return encode_payload(progress(run, seq, cache=summaries_of(held)))


def task_count(run: FoldState) -> int:
    """The tasks the run holds: declared, or named by an event."""
    return run.native.task_count() if isinstance(run, NativeState) else len(run.tasks)
