"""What each task contributes to its run's summary, and the run's `SummaryCache`, kept up to
date so that a summary revision costs the changed tasks and the run-wide sums, not a rebuild
of every task's attempt lists.

A run's cache is held beside its state by whoever holds the run (`projections.held`): it is
derived, never stored, and the state knows nothing of it. `refreshed` brings it up to date
with the state: it recomputes the `TaskContribution` (O(the task)) of each task whose records
are other objects than those it was computed from (each score makes a task's records anew),
and moves the run-wide structures by the difference: the numeric values of every metric
output in run log order, and Harbor's reward_stats lists in the order of the scores that
made them. Everything else the summary needs is summed over the tasks' contributions in
summary task order, in the order the specification fixes (`projections.assembly.summary`),
so the floats are the ones a rebuild gives.

Safe because, while the run's keys stand, a task's state only grows: score rows and trials
are appended, and a key a task gains (SEMANTICS.md section 1, rule 2) is a new attempt list.
Whatever decides every task's keys afresh (a run.started after events, which may also name
the run's Harbor rules; a restore; a failed step's undo) makes the run's pass@k tallies a new
dict (`projections.fold.run.rekey_run`), and a cache made under another starts over
(`current`). `refreshed` checks that growth too,
and starts over when a task shrank. The laws are tested against a fresh restore of the same
state, byte for byte, and against the summary built from scratch
(tests/projections/assembly/test_incremental.py).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, insort
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from events.models import DEFAULT_HARBOR_RULES
from projections.assembly.attempts import AttemptList, TaskTallies, task_attempts
from projections.assembly.harbor_stats import HarborKept, HarborShare, share_of
from projections.assembly.log_order import InOrder
from projections.assembly.view_values import view_values
from projections.figures.aggregates import Growing, finite, negative_zero, wire_number
from projections.figures.harbor import value_label
from projections.figures.passk import KeyFigures
from projections.figures.verdicts import verdict_of
from projections.fold.declarations import Key, key_name
from projections.fold.key_tallies import KeyTally
from projections.fold.run import RunState
from projections.fold.task import TaskState
from projections.packed.records import MetricRecords
from projections.packed.trial_ids import listed

K = TypeVar("K")

Coverage = dict[str, tuple[int, int, dict[str, int]]]
"""metric_type -> (scores, failed scores, output -> scores carrying it)."""


@dataclass(slots=True, init=False)
class TaskContribution:
    """One task's share of its run's summary, from the task's state alone."""

    # The __init__ of this class and of the other dataclasses made per run or per summary is
    # written out: the compiled fold compiles a class body's methods, not a dataclass's
    # generated ones.

    records: tuple[bytes, ...]
    """The task's records it was computed from (`TaskState.records`): while the task holds
    the same object, no score landed on it since."""
    attempts: orjson.Fragment
    """The task's entry of `task_metric_attempts`, encoded."""
    verdicts: dict[str, str]
    harbor: HarborShare
    views: dict[str, tuple[int, list[float]]]
    """View name -> (the task's trials, the values the view reduces them to)."""
    coverage: Coverage
    taken_attempts: dict[str, int]
    """Key name -> attempts already in the run's `rewards`."""
    taken_numeric: dict[Key, int]
    """(metric, output) -> numeric values already in the run's `numeric`."""
    taken_trials: int
    """The task's trial ids already in the run's `trials`."""

    def __init__(
        self,
        *,
        records: tuple[bytes, ...],
        attempts: orjson.Fragment,
        verdicts: dict[str, str],
        harbor: HarborShare,
        views: dict[str, tuple[int, list[float]]],
        coverage: Coverage,
        taken_attempts: dict[str, int],
        taken_numeric: dict[Key, int],
        taken_trials: int,
    ) -> None:
        self.records = records
        self.attempts = attempts
        self.verdicts = verdicts
        self.harbor = harbor
        self.views = views
        self.coverage = coverage
        self.taken_attempts = taken_attempts
        self.taken_numeric = taken_numeric
        self.taken_trials = taken_trials


@dataclass(slots=True, init=False)
class MetricCoverage:
    """A metric's scores over the run: all, failed, and per output those carrying it."""

    scores: int
    failed: int
    carried: dict[str, int]

    def __init__(self) -> None:
        self.scores = 0
        self.failed = 0
        self.carried = {}


@dataclass(slots=True, init=False)
class SummaryCache:
    """What a run's summary and progress keep between events, beside the run's state."""

    passk: dict[Key, KeyTally] | None
    """The run's pass@k tallies it was made under (`current`); None: not made yet."""
    tasks: dict[str, TaskContribution]
    numeric: dict[Key, InOrder]
    """Every numeric value of each (metric, output), in run log order."""
    coverage: dict[str, MetricCoverage]
    trials: set[str]
    """Every task's trial ids (a trial id may be in several tasks: counted once)."""
    outputs: dict[str, set[str]]
    """metric_type -> the output names its scores carried."""
    metric_records: dict[Key, tuple[int, orjson.Fragment]]
    """(metric, output) -> (its metric's score count, its aggregate encoded), until a value lands."""
    metric_values: dict[Key, tuple[int, Growing]]
    """(metric, output) -> (its `numeric` list's `rearranged` then, its values ready for the
    aggregate): a value that lands at the end of the log (a late score's) is added to them."""
    view_records: list[orjson.Fragment] | None
    """The view aggregates encoded, until some task's views change (None: to compute)."""
    view_totals: dict[str, int]
    """View name -> the trials of the declared tasks that have it."""
    view_values: dict[str, list[list[float]]]
    """View name -> per declared task, in declaration order, the values it reduces to:
    concatenated, the view aggregate's values (a changed task replaces its own slot)."""
    view_sorted: dict[str, list[float]]
    """View name -> the finite values of its `view_values` in ascending order, kept as a
    task's values change (`_place_views`) where none is -0.0; missing: sorted afresh."""
    declared_at: dict[str, int] | None
    """Declared task id -> its place in declaration order (made when first needed)."""
    keys: dict[str, KeyFigures]
    """Key name -> its pass@k and pass^k figures (`projections.assembly.key_figures`)."""
    tallies: TaskTallies | None
    """Every eligible key's tasks' (n, c), kept for `keys` (`attempts.task_tallies`)."""
    harbor: HarborKept

    def __init__(self) -> None:
        self.clear(None)

    def clear(self, passk: dict[Key, KeyTally] | None) -> None:
        """Hold nothing, as made under the tallies `passk`."""
        self.passk = passk
        self.tasks = {}
        self.numeric = {}
        self.coverage = {}
        self.trials = set()
        self.outputs = {}
        self.metric_records = {}
        self.metric_values = {}
        self.view_records = None
        self.view_totals = {}
        self.view_values = {}
        self.view_sorted = {}
        self.declared_at = None
        self.keys = {}
        self.tallies = None
        self.harbor = HarborKept()


def current(run: RunState, cache: SummaryCache) -> None:
    """Start `cache` over if the run's keys were decided afresh since it was made (or it
    was made for another state of the run: a restore's)."""
    if cache.passk is not run.passk:
        cache.clear(run.passk)


def refreshed(run: RunState, cache: SummaryCache) -> SummaryCache:
    """`cache` with the contribution of every task changed since recomputed."""
    current(run, cache)
    landed = _Landed()
    eligible = {key_name(key): key for key in run.passk}
    try:
        for task in run.tasks.values():
            old = cache.tasks.get(task.task_id)
            if old is None or old.records is not task.records:
                _refresh(cache, run, task, old, eligible=eligible, landed=landed)
    except _Shrunk:
        cache.clear(run.passk)
        return refreshed(run, cache)
    for key, new in landed.numeric.items():
        _in_order(cache.numeric, key).add(new)
        cache.metric_records.pop(key, None)
    rewards = cache.harbor.rewards
    for name, labels in landed.rewards.items():
        kept = rewards.get(name)
        if kept is None:
            kept = rewards[name] = {}
        for label, trials in labels.items():
            _in_order(kept, label).add(trials)
    return cache


def _in_order(kept: dict[K, InOrder], key: K) -> InOrder:
    """`kept[key]`, made if missing (only then: `setdefault` would make one each time)."""
    value = kept.get(key)
    if value is None:
        value = kept[key] = InOrder()
    return value


@dataclass(slots=True, init=False)
class _Landed:
    """The (seq, item) pairs the changed tasks add to the run-wide ordered structures."""

    numeric: dict[Key, list[tuple[int, float]]]
    rewards: dict[str, dict[str, list[tuple[int, str]]]]
    """Key name -> value label -> (seq, trial id) pairs."""

    def __init__(self) -> None:
        self.numeric = {}
        self.rewards = {}


class _Shrunk(Exception):
    """A task holds less than its contribution took from it: not the growth the cache follows."""


def fragment(payload: Any) -> orjson.Fragment:
    """`payload` encoded, to be kept and put in a summary as it is: a copy of orjson's bytes,
    which keep its whole output buffer (4 KB at least)."""
    return orjson.Fragment(bytes(memoryview(orjson.dumps(payload))))


def _refresh(
    cache: SummaryCache,
    run: RunState,
    task: TaskState,
    old: TaskContribution | None,
    *,
    eligible: dict[str, Key],
    landed: _Landed,
) -> None:
    """Compute the task's contribution again (`old`: the one before); `eligible`: the run's
    pass@k keys by name."""
    read = task.read()
    trial_ids = listed(task.trials)
    lists = task_attempts(task, read, trial_ids)
    taken_attempts = _take_rewards(landed, lists, old.taken_attempts if old else {})
    taken_numeric = _take_numeric(landed, task, read, old.taken_numeric if old else {})
    declared = run.declarations.tasks.get(task.task_id) if run.declarations else None
    totals: dict[str, int] = {}
    values: dict[str, list[float]] = {}
    if declared is not None:
        view_values(task, declared, totals, values, read)
    views = {name: (total, values.get(name, [])) for name, total in totals.items()}
    if old is None or not _same_views(old.views, views):
        cache.view_records = None
        if declared is not None:
            _place_views(cache, run, task.task_id, old.views if old else {}, views)
    coverage: Coverage = {
        metric: (
            len(records.rows),
            records.failed(),
            records.carried(),
        )
        for metric, records in read.items()
    }
    # A task's trials and graded trials only grow, as its rows do.
    if len(trial_ids) < (old.taken_trials if old else 0):
        raise _Shrunk
    cache.trials.update(trial_ids[old.taken_trials if old else 0 :])
    cache.harbor.graded.update(task.graded_trials(read, trial_ids))
    _move_coverage(cache, old.coverage if old else {}, -1)
    _move_coverage(cache, coverage, 1)
    for metric, columns in task.metrics():
        cache.outputs.setdefault(metric, set()).update(columns.names)
    cache.tasks[task.task_id] = TaskContribution(
        records=task.records,
        attempts=fragment(
            {
                name: [{"trial_id": trial_id, "value": wire_number(value)} for trial_id, value, _ in attempt_list]
                for name, attempt_list in lists.items()
            }
        ),
        verdicts={
            name: verdict_of(*tally)
            for name in lists
            if name in eligible and (tally := task.tally(eligible[name])) is not None
        },
        harbor=share_of(lists, eligible, run.declarations.harbor_rules if run.declarations else DEFAULT_HARBOR_RULES),
        views=views,
        coverage=coverage,
        taken_attempts=taken_attempts,
        taken_numeric=taken_numeric,
        taken_trials=len(trial_ids),
    )


def _same_views(old: dict[str, tuple[int, list[float]]], new: dict[str, tuple[int, list[float]]]) -> bool:
    """Whether a task's views give the same totals and floats, to the bit (== would take
    -0.0 for 0.0, which an aggregate's min, max and percentiles tell apart)."""
    return old.keys() == new.keys() and all(
        old[name][0] == total and array("d", old[name][1]).tobytes() == array("d", values).tobytes()
        for name, (total, values) in new.items()
    )


def _place_views(
    cache: SummaryCache,
    run: RunState,
    task_id: str,
    old: dict[str, tuple[int, list[float]]],
    new: dict[str, tuple[int, list[float]]],
) -> None:
    """Move the run's per-view totals and value slots from a declared task's `old` views to its `new`."""
    assert run.declarations is not None  # the task is declared
    declared = run.declarations.tasks
    if cache.declared_at is None:
        cache.declared_at = {declared_id: at for at, declared_id in enumerate(declared)}
    at = cache.declared_at[task_id]
    nothing: list[float] = []
    for name in old.keys() | new.keys():
        total, values = new.get(name, (0, nothing))
        before = old.get(name, (0, nothing))
        total += cache.view_totals.get(name, 0) - before[0]
        slots = cache.view_values.get(name)
        if slots is None:
            slots = cache.view_values[name] = [nothing] * len(declared)
        slots[at] = values
        ordered = cache.view_sorted.get(name)
        if ordered is not None and not _moved_sorted(ordered, before[1], values):
            del cache.view_sorted[name]
        if total:
            cache.view_totals[name] = total
        else:  # no declared task has the view any more
            del cache.view_totals[name], cache.view_values[name]
            cache.view_sorted.pop(name, None)


def _moved_sorted(ordered: list[float], old: list[float], new: list[float]) -> bool:
    """Take the finite `old` values out of the ascending `ordered` and put the finite `new`
    ones in; False (`ordered` then unusable) where some is -0.0. Without -0.0, values that
    compare equal are the same float, so the list is the stable sort of the view's values
    whichever of equals is taken out or put in first."""
    if any(negative_zero(value) for value in old) or any(negative_zero(value) for value in new):
        return False
    for value in old:
        if finite(value):
            del ordered[bisect_left(ordered, value)]
    for value in new:
        if finite(value):
            insort(ordered, value)
    return True


def _take_rewards(landed: _Landed, lists: dict[str, AttemptList], taken: dict[str, int]) -> dict[str, int]:
    """Land the attempts of `lists` past those `taken` for the run's reward_stats lists."""
    if any(len(lists.get(name, ())) < count for name, count in taken.items()):
        raise _Shrunk
    for name, attempt_list in lists.items():
        labels: dict[str, list[tuple[int, str]]] | None = None
        for trial_id, value, seq in attempt_list[taken.get(name, 0) :]:
            if value is not None:
                if labels is None:
                    labels = landed.rewards.setdefault(name, {})
                labels.setdefault(value_label(value), []).append((seq, trial_id))
    return {name: len(attempt_list) for name, attempt_list in lists.items()}


def _take_numeric(
    landed: _Landed, task: TaskState, read: dict[str, MetricRecords], taken: dict[Key, int]
) -> dict[Key, int]:
    """Land the task's numeric values past those `taken` for the run's."""
    now: dict[Key, int] = {}
    for metric, columns in task.metrics():
        for output in columns.names:
            key = (metric, output)
            numeric = read[metric].numeric(output)
            already = taken.get(key, 0)
            if len(numeric) < already:
                raise _Shrunk
            if len(numeric) > already:
                landed.numeric.setdefault(key, []).extend(numeric[already:])
            now[key] = len(numeric)
    if taken.keys() - now.keys():
        raise _Shrunk
    return now


def _move_coverage(cache: SummaryCache, coverage: Coverage, sign: int) -> None:
    for metric, (scores, failed, carried) in coverage.items():
        totals = cache.coverage.get(metric)
        if totals is None:
            totals = cache.coverage[metric] = MetricCoverage()
        totals.scores += sign * scores
        totals.failed += sign * failed
        for output, count in carried.items():
            totals.carried[output] = totals.carried.get(output, 0) + sign * count
