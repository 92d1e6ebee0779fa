"""`footprint` estimates a run's memory from above, and not far above: the worker's run
cache holds runs up to a byte budget by it."""

from __future__ import annotations

import gc
import tracemalloc

import orjson
import pytest

from events.synthetic import synthetic_run
from projections.assembly.progress import progress
from projections.fold.run import RunState
from projections.footprint import footprint, footprints
from projections.held import Held, summaries_of
from projections.step import step


def folded(tasks: int, attempts: int, *, close: bool, summarized: bool, events: int | None = None) -> Held:
    lines = [orjson.dumps(event) for event in synthetic_run("measured", tasks=tasks, attempts=attempts, seed=3)]
    lines = lines[:events] if events is not None else lines if close else lines[:-1]
    held = Held(RunState("measured"))
    for line in lines:
        step(line, lambda _: held)
    if summarized:
        progress(held.run, held.run.event_count, cache=summaries_of(held))  # builds the cache, as a summary does
    return held


@pytest.mark.parametrize(
    ("tasks", "attempts", "close", "summarized", "events"),
    [
        (2, 5, False, False, None),  # a small open run
        (2, 5, False, True, None),  # and with the figures its progress built
        (2, 5, True, True, None),  # a small closed run with its summary cache
        (20, 1, True, True, None),  # one attempt a task: the summary cache outweighs the rows
        (40, 5, True, True, None),
        (300, 5, False, True, None),  # open: progress built the figures, no summary yet
        (300, 5, False, False, None),
        (2000, 5, False, False, None),
        (1000, 50, False, False, 1),  # run.started alone: declared tasks and the reserved index
    ],
)
def test_a_runs_footprint_is_never_below_its_measured_memory(
    tasks: int, attempts: int, close: bool, summarized: bool, events: int | None
) -> None:
    folded(2, 2, close=True, summarized=True)  # module caches warmed outside the measure
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = folded(tasks, attempts, close=close, summarized=summarized, events=events)
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held.run.closed is close
    assert (held.summaries is not None) is summarized
    assert measured <= footprint(held.run, held.summaries) <= 3 * measured


def test_the_footprint_of_runs_is_the_sum_of_theirs() -> None:
    runs = [
        folded(2, 5, close=True, summarized=True),
        folded(40, 5, close=False, summarized=False),
        Held(RunState("new")),
    ]
    assert footprints(runs) == sum(footprint(held.run, held.summaries) for held in runs)
    assert footprint(runs[0].run) < footprint(runs[0].run, runs[0].summaries)
    assert footprints([]) == 0
