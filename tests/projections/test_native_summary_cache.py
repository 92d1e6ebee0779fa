"""The native fold's summary cache (`summary_cache.rs`): a closed run's revisions, one after
another through the cache the run keeps, are the Python fold's summaries byte for byte,
whatever its late events change (a late score or trial of a task, a new trial, a redelivery,
a task no run.started declares, a run.started after the close), with the cache dropped
(`NativeRun.drop_cache`) or the run restored from its stored records between revisions; and
the native replayer's bound on its closed runs' caches (`projections.closed_caches`)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from events.models import InputEvent
from events.synthetic import synthetic_run
from projections.fold import run as run_module
from projections.fold.run import RunState
from projections.native_events import native_apply
from projections.native_replay import NativeReplayer
from projections.replayer import Output
from projections.storage import restore, stored_run
from tests import builders
from tests.native import kernels
from tests.projections.test_closed_caches import UNBOUNDED, logs_of_runs_with_late_events
from tests.projections.test_native_fold import assert_same_summary
from tests.projections.test_native_storage import natively, natively_folded, read, stored
from tests.strategies import KINDS, METRICS, run_logs
from tests.strategies import values as run_values

STEPS = ("keep", "keep", "keep", "drop", "restore")
"""What happens to the native run between two revisions: mostly nothing."""


@st.composite
def late_event(draw: st.DrawFn, tasks: list[str], earlier: list[InputEvent], number: int) -> InputEvent:
    """One event after the close: a score or a trial of a task of the run or of a new one, of
    a trial it has or a new one; an earlier event again (a redelivery); or a run.started
    (applied where the run had none, else refused)."""
    kind = draw(st.sampled_from(["score", "score", "score", "trial", "again", "started"]))
    task = draw(st.sampled_from(tasks))
    trial = f"{task}-{draw(st.integers(0, 5))}"
    event_id = f"late-{number}"
    if kind == "trial":
        status = draw(st.sampled_from(["completed", "failed"]))
        error_type = draw(st.sampled_from([None, "SandboxTimeout"]))
        return builders.trial(task, trial, status, error_type=error_type, event_id=event_id)
    if kind == "again":
        return draw(st.sampled_from(earlier))
    if kind == "started":
        kinds = {
            f"{metric}.{output}": draw(st.sampled_from(KINDS))
            for metric, outputs in METRICS.items()
            for output in outputs
        }
        specs = [
            builders.task_spec(task_id, kinds)
            for task_id in draw(st.lists(st.sampled_from(tasks), min_size=1, unique=True))
        ]
        return builders.started("run", specs, attempts_per_task=draw(st.integers(1, 4)), event_id=event_id)
    metric = draw(st.sampled_from(sorted(METRICS)))
    status = draw(st.sampled_from(["completed", "partial", "trial", "metric"]))
    if status in ("trial", "metric"):
        return builders.score(task, trial, metric, status="failed", failure=status, event_id=event_id)
    outputs = {name: draw(run_values) for name in draw(st.lists(st.sampled_from(METRICS[metric]), unique=True))}
    return builders.score(task, trial, metric, outputs, status=status, event_id=event_id)


@st.composite
def revised_runs(draw: st.DrawFn) -> tuple[list[InputEvent], list[tuple[InputEvent, str]]]:
    """A closed run's log, then its late events, each with what happens to the native run
    before the revision it makes."""
    events = draw(run_logs())
    tasks = sorted({event.task_id for event in events if hasattr(event, "task_id")} | {"new-0", "new-1"})
    late: list[tuple[InputEvent, str]] = []
    for number in range(draw(st.integers(1, 15))):
        event = draw(late_event(tasks, [*events, *(event for event, _ in late)], number))
        late.append((event, draw(st.sampled_from(STEPS))))
    return events, late


def restored(run: RunState) -> tuple[RunState, Any]:
    """The run as restored from its stored records, by the Python fold and natively."""
    header, tasks = stored(run)
    return restore("run", header, read(tasks)), natively(stored_run("run", header, read(tasks)))


@settings(max_examples=200)
@given(revised_runs())
def test_each_revision_through_the_cache_is_the_python_fold_s_summary(
    log: tuple[list[InputEvent], list[tuple[InputEvent, str]]],
) -> None:
    events, late = log
    run = RunState("run")
    native = kernels().NativeRun("run")
    for event in events:
        run_module.apply(run, event)
        native_apply(native, event, None)
    assert_same_summary(run, native)
    for event, step in late:
        if step == "drop":
            native.drop_cache()
        elif step == "restore":
            run, native = restored(run)
        assert native_apply(native, event, None) == run_module.apply(run, event).outcome.value
        assert_same_summary(run, native)


def test_a_big_run_s_cache_counts_in_its_footprint_and_goes_with_drop_cache() -> None:
    """The cache a summary makes is in `footprint`, and `drop_cache` gives its bytes back; the
    summary after a drop is the same."""
    native = kernels().NativeRun("r")
    for event in synthetic_run("r", tasks=40, attempts=4, seed=3):
        native_apply(native, TypeAdapter(InputEvent).validate_python(event), None)
    before = native.footprint()
    assert native.cache_size() == 0
    summary = native.summary_bytes()
    assert native.cache_size() > len(summary) // 2
    assert native.footprint() == before + native.cache_size()
    native.drop_cache()
    assert native.cache_size() == 0
    assert native.footprint() == before
    assert native.summary_bytes() == summary


def replayed_natively(lines: list[bytes], budget: int, in_runs: bool) -> tuple[list[Output], NativeReplayer]:
    """What the native replayer writes of `lines`, line by line (`feed`) or in runs of lines
    (`feed_lines`), its closed runs' caches within `budget`."""
    replayer = NativeReplayer(3, closed_caches_bytes=budget)
    if in_runs:
        return replayer.feed_lines(1, [line + b"\n" for line in lines]), replayer
    return [output for number, line in enumerate(lines, 1) for output in replayer.feed(number, line)], replayer


@settings(max_examples=100)
@given(logs_of_runs_with_late_events(), st.sampled_from([0, 40_000, 200_000]), st.booleans())
def test_the_native_replayer_keeps_its_closed_runs_caches_within_the_budget_and_writes_the_same_bytes(
    lines: list[bytes], budget: int, in_runs: bool
) -> None:
    bounded, replayer = replayed_natively(lines, budget, in_runs)
    assert bounded == replayed_natively(lines, UNBOUNDED, in_runs)[0]
    caches = replayer.closed_caches
    assert caches.held_bytes <= budget or len(caches) == 1
    for run_id, run in replayer.runs.items():
        if run.closed():
            # A closed run has a cache only if held.
            assert (run.cache_size() > 0) == (run_id in caches)


@pytest.mark.parametrize(("tasks", "attempts"), [(2, 5), (40, 5), (500, 8)])
def test_a_summary_cache_s_estimate_is_never_below_its_measured_memory_nor_far_above(tasks: int, attempts: int) -> None:
    """The cache's bytes come from Python's raw allocator, which tracemalloc traces: what a
    summary leaves held (the cache it makes) is within its estimate (`cache_size`), which the
    run's footprint counts and the closed runs' budget weighs."""
    run = natively_folded(NativeReplayer(), tasks, attempts, close=True, events=None)
    run.summary_bytes()  # the output's buffer, and the names runs share, made outside
    run.drop_cache()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run.summary_bytes()
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert measured <= run.cache_size() <= 2 * measured
