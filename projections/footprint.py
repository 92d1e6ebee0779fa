"""What a held run (its state and its summary cache) holds in memory, estimated from above in
O(1) from its counts, so that the worker's run cache can bound the bytes it holds rather than
the number of runs (many small runs fit where a few big ones do).

The constants are calibrated with tracemalloc (`tests/projections/test_footprint.py` checks
that the estimate is never below what a run measures, and within 3x of it, for runs small
and large, open and closed, with and without a summary cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from projections.assembly.contributions import SummaryCache
from projections.fold.run import RunState
from projections.held import FoldState, HeldRun
from projections.native_state import NativeState

RUN_BYTES: Final = 4096
"""A run before any event: its objects and dicts (its run.started as kept is counted apart)."""
TASK_BYTES: Final = 1024
"""A task before any event (a declared task is made at run.started): ~850 B."""
EVENT_BYTES: Final = 160
"""Per applied event: its attempt's rows and cells, fingerprints and trial id. The
redelivery index's table is counted as it is: a run.started reserves it for its plan."""
FIGURES_BYTES: Final = 12 * 1024
FIGURES_TASK_BYTES: Final = 512
"""The summary cache's pass@k and section 8 columns, which the first progress event or
summary builds: per key and k, over the tasks (~11 KB for a run of 2 tasks)."""
SUMMARY_BYTES: Final = 20 * 1024
CONTRIBUTION_TASK_BYTES: Final = 4096
CONTRIBUTION_EVENT_BYTES: Final = 200
"""What the first summary adds: the pass@k aggregates, and each task's contribution
(attempt lists, Harbor lists, values in log order)."""


def footprint(run: FoldState, cache: SummaryCache | None = None) -> int:
    """An estimate from above of the bytes `run` and its summary `cache` hold in memory (the
    native fold's runs measure what they hold, their own summary cache with it)."""
    if isinstance(run, NativeState):
        measured: int = run.native.footprint()
        return measured + (len(run.declarations.started) if run.declarations is not None else 0)
    tasks = len(run.tasks)
    held = RUN_BYTES + TASK_BYTES * tasks + EVENT_BYTES * run.event_count + run.applied.table_bytes
    if run.declarations is not None:
        held += len(run.declarations.started)
    return held + cache_footprint(run, cache)


def cache_footprint(run: RunState, cache: SummaryCache | None) -> int:
    """The part of `footprint(run, cache)` that is the summary cache (0: none)."""
    if cache is None:
        return 0
    held = FIGURES_BYTES + FIGURES_TASK_BYTES * len(run.tasks)
    if cache.tasks:
        held += SUMMARY_BYTES + CONTRIBUTION_TASK_BYTES * len(cache.tasks) + CONTRIBUTION_EVENT_BYTES * run.event_count
    return held


def footprints(runs: Iterable[HeldRun]) -> int:
    """The sum of `footprint` over the held `runs` (the worker's run cache sums every run it
    holds at each checkpoint)."""
    total = 0
    for held in runs:
        total += footprint(held.run, held.summaries)
    return total
