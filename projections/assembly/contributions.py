"""What each task contributes to its run's summary, kept up to date as events land, so that
a summary revision costs the changed tasks and the run-wide sums, not a rebuild of every
task's attempt lists.

A run's `SummaryCache` is made by the first summary or progress event that asks for it. From
then on `run.apply` names in `dirty` every task an event changes, and `refreshed` recomputes
those tasks' `TaskContribution` (O(the task)) and moves the run-wide structures by the
difference: the numeric values of every metric output in run log order, and Harbor's
reward_stats lists in the order of the scores that made them. Everything else the summary
needs is summed over the tasks' contributions in summary task order, in the order the
specification fixes (`projections.assembly.summary`), so the floats are the ones a rebuild gives.

Safe because, between two resets, a task's state only grows: score rows and trials are
appended, and a key a task gains (SEMANTICS.md section 1, rule 2) is a new attempt list. The
rest (a run.started after events, a restore, a failed step's undo) goes through
`run.rekey_run`, which drops the cache. `refreshed` checks that growth, and starts over when
a task shrank. The laws are tested against a fresh restore of the same state, byte for byte,
and against the summary built from scratch (tests/projections/test_incremental.py).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final, TypeVar, final

import orjson

from projections.assembly.attempts import AttemptList, TaskTallies, task_attempts
from projections.assembly.harbor import HarborLists, value_label
from projections.assembly.view_values import view_values
from projections.figures.aggregates import Center, Growing, Spread, finite, negative_zero, wire_number
from projections.figures.passk import Tally
from projections.figures.verdicts import verdict_of
from projections.fold.declarations import Key, key_name
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

    # Its __init__ is written out: a dataclass's generated one runs as Python even in the
    # compiled fold (mypyc compiles the methods of the class body only).

    attempts: orjson.Fragment
    """The task's entry of `task_metric_attempts`, encoded."""
    verdicts: dict[str, str]
    harbor: dict[str, Tally]
    """Eligible key name -> Harbor's (n, c) (c: values equal to 1.0), keys with attempts."""
    broken: frozenset[str]
    """Key names with a value neither null, 0.0 nor 1.0 (Harbor gives them no pass@k)."""
    views: dict[str, tuple[int, list[float]]]
    """View name -> (the task's trials, the values the view reduces them to)."""
    coverage: Coverage
    taken_attempts: dict[str, int]
    """Key name -> attempts already in the run's `rewards`."""
    taken_numeric: dict[Key, int]
    """(metric, output) -> numeric values already in the run's `numeric`."""
    taken_trials: int
    """The task's trial ids already in the run's `trials`."""
    rows: int
    """The task's score rows (all metrics) it was computed from."""

    def __init__(
        self,
        *,
        attempts: orjson.Fragment,
        verdicts: dict[str, str],
        harbor: dict[str, Tally],
        broken: frozenset[str],
        views: dict[str, tuple[int, list[float]]],
        coverage: Coverage,
        taken_attempts: dict[str, int],
        taken_numeric: dict[Key, int],
        taken_trials: int,
        rows: int,
    ) -> None:
        self.attempts = attempts
        self.verdicts = verdicts
        self.harbor = harbor
        self.broken = broken
        self.views = views
        self.coverage = coverage
        self.taken_attempts = taken_attempts
        self.taken_numeric = taken_numeric
        self.taken_trials = taken_trials
        self.rows = rows


@final
class InOrder:
    """Items in run log order: `seqs` ascending, one item each (seqs are unique). A plain
    class, made natively by the compiled fold (one per metric output and reward label of a
    run's summary)."""

    __slots__ = ("items", "rearranged", "seqs")

    def __init__(self) -> None:
        self.seqs = array("q")
        self.items: list[Any] = []
        self.rearranged = 0
        """How many times items were put before others (anything but appended)."""

    def add(self, new: list[tuple[int, Any]]) -> None:
        """Put the (seq, item) pairs `new` (at least one) in their places: appended when they
        all come after the items there (a run's first summary, an event at the end of the
        log), one by one when few (a late event's), else in one sort."""
        # Seqs are unique, so pairs are sorted by seq alone: a sort of the pairs themselves
        # would compare each pair's heads for equality before it ordered them.
        if not _ascending(new):  # they mostly are (a task's rows are in log order): sorted() is a Python call
            new = sorted(new, key=_seq_of)
        seqs, items = self.seqs, self.items
        if not seqs or new[0][0] > seqs[-1]:
            seqs.fromlist([seq for seq, _ in new])  # sized once, where extend grows per item
            items.extend([item for _, item in new])
            return
        self.rearranged += 1
        if len(new) <= _FEW:
            for seq, item in new:
                at = bisect_right(seqs, seq)
                seqs.insert(at, seq)
                items.insert(at, item)
            return
        merged = sorted([*zip(seqs, items, strict=True), *new], key=_seq_of)
        self.seqs = array("q", [seq for seq, _ in merged])
        self.items = [item for _, item in merged]


def _ascending(pairs: list[tuple[int, Any]]) -> bool:
    """Whether the (seq, item) `pairs` are in ascending order of seq."""
    return all(pairs[at - 1][0] <= pairs[at][0] for at in range(1, len(pairs)))


_seq_of: Final = itemgetter(0)
_FEW: Final = 64


@dataclass(slots=True, init=False)
class MetricCoverage:
    """A metric's scores over the run: all, failed, and per output those carrying it."""

    # The __init__ of this class and of the other dataclasses made per run or per summary is
    # written out: a dataclass's generated one runs as Python even in the compiled fold.

    scores: int
    failed: int
    carried: dict[str, int]

    def __init__(self) -> None:
        self.scores = 0
        self.failed = 0
        self.carried = {}


@final
class Column:
    """One k's per-task figures of an eligible key (pass@k's or pass^k's, in summary task
    order: `middle.finite`, the figures being never NaN nor infinite), their center and
    spread, and section 8's entry they give. A plain class, made natively by the compiled
    fold (one per k of a key whose tallies moved, at every progress event and summary)."""

    __slots__ = ("aggregate", "entry", "middle", "spreads")

    def __init__(self, middle: Center, spreads: Spread | None, entry: dict[str, Any]) -> None:
        self.middle: Final = middle
        self.spreads: Final = spreads
        self.entry: Final = entry
        self.aggregate: orjson.Fragment | None = None
        """pass@k's `<key>.pass@<k>` aggregate, encoded when a summary first asks for it
        (`statistics.pass_at_k_aggregates`): progress shows none."""

    @property
    def values(self) -> list[float]:
        return self.middle.finite


@final
class KeyFigures:
    """One eligible key's pass@k and pass^k columns and its section 8 entry (None: no
    measured task), for the (n, c) list they were computed from. A plain class, built
    natively by the compiled fold (a NamedTuple's constructor and `_replace` are Python code)."""

    __slots__ = ("at_k", "hat_k", "measured", "moves", "statistics", "unmeasured")

    def __init__(
        self,
        measured: list[Tally],
        unmeasured: int,
        at_k: list[Column],
        hat_k: list[Column],
        statistics: dict[str, Any] | None,
    ) -> None:
        self.measured: Final = measured
        self.unmeasured: Final = unmeasured
        self.at_k: Final = at_k
        self.hat_k: Final = hat_k
        """Empty when no task is measured."""
        self.statistics: Final = statistics
        self.moves = 0
        """The key's `KeyTally.moves` when the list was taken: while it is the same, so is the list."""


@dataclass(slots=True, init=False)
class SummaryCache:
    dirty: set[str]
    """Tasks changed since their contribution was computed."""
    tasks: dict[str, TaskContribution]
    numeric: dict[Key, InOrder]
    """Every numeric value of each (metric, output), in run log order."""
    rewards: dict[str, dict[str, InOrder]]
    """Key name -> value label -> trial ids of its non-null attempts, in log order."""
    coverage: dict[str, MetricCoverage]
    trials: set[str]
    """Every task's trial ids (a trial id may be in several tasks: counted once)."""
    graded: set[str]
    """The trial ids with a completed or partial score, of any task and metric."""
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
    tallies: TaskTallies | None
    """Every eligible key's tasks' (n, c), kept for `keys` (`attempts.task_tallies`)."""
    harbor: dict[str, tuple[list[Tally], dict[str, float]]]
    """Key name -> (the tallies Harbor's pass@k was computed from, that pass@k)."""
    exceptions: tuple[int, dict[str, list[str]]] | None
    """(the run's failed trials then, Harbor's exception_stats gathered from them)."""
    harbor_lists: HarborLists | None
    reward_lists: dict[tuple[str, str], tuple[InOrder, int, int, bytes]]
    """(key name, value label) -> (its `rewards` list, the list's `rearranged` and length
    then, its trial ids encoded): `harbor.encoded_ids`."""

    def __init__(self, dirty: set[str]) -> None:
        self.dirty = dirty
        self.tasks = {}
        self.numeric = {}
        self.rewards = {}
        self.coverage = {}
        self.trials = set()
        self.graded = set()
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
        self.harbor = {}
        self.exceptions = None
        self.harbor_lists = None
        self.reward_lists = {}


def cache_of(run: RunState) -> SummaryCache:
    if run.summary_cache is None:
        run.summary_cache = SummaryCache(dirty=set(run.tasks))
    return run.summary_cache


def refreshed(run: RunState) -> SummaryCache:
    """The run's cache with every changed task's contribution recomputed."""
    cache = cache_of(run)
    landed = _Landed()
    eligible = {key_name(key): key for key in run.passk}
    try:
        for task_id in cache.dirty:
            _refresh(cache, run, run.tasks[task_id], eligible, landed)
    except _Shrunk:
        run.summary_cache = None
        return refreshed(run)
    for key, new in landed.numeric.items():
        _in_order(cache.numeric, key).add(new)
        cache.metric_records.pop(key, None)
    for name, labels in landed.rewards.items():
        kept = cache.rewards.setdefault(name, {})  # the compiled fold makes the {} only when missing
        for label, trials in labels.items():
            _in_order(kept, label).add(trials)
    cache.dirty.clear()
    return cache


def _in_order(kept: dict[K, InOrder], key: K) -> InOrder:
    """`kept[key]`, made if missing (only then: `setdefault` would make one each time), by
    the class itself: the compiled fold builds it natively, where a factory passed in is a
    Python call."""
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


def _refresh(cache: SummaryCache, run: RunState, task: TaskState, eligible: dict[str, Key], landed: _Landed) -> None:
    """Compute the task's contribution again; `eligible`: the run's pass@k keys by name."""
    old = cache.tasks.get(task.task_id)
    rows = task.score_rows()
    if old is not None and old.rows == rows:
        # No score since (a trial.finished): rows only grow, so the same count is the same
        # rows, trials and keys, all the contribution is made of.
        return
    read = task.read()
    trial_ids = listed(task.trials)
    lists = task_attempts(task, read, trial_ids)
    taken_attempts = _take_rewards(landed, lists, old.taken_attempts if old else {})
    taken_numeric = _take_numeric(landed, task, read, old.taken_numeric if old else {})
    harbor: dict[str, Tally] = {}
    broken = set()
    for name, attempt_list in lists.items():
        n = c = 0
        for _, value, _ in attempt_list:
            n += 1
            if value == 1.0:
                c += 1
            elif value is not None and value != 0.0:
                broken.add(name)
        if name in eligible and n:
            harbor[name] = (n, c)
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
    cache.graded.update(task.graded_trials(read, trial_ids))
    _move_coverage(cache, old.coverage if old else {}, -1)
    _move_coverage(cache, coverage, 1)
    for metric, columns in task.metrics():
        cache.outputs.setdefault(metric, set()).update(columns.names)
    cache.tasks[task.task_id] = TaskContribution(
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
        harbor=harbor,
        broken=frozenset(broken),
        views=views,
        coverage=coverage,
        taken_attempts=taken_attempts,
        taken_numeric=taken_numeric,
        taken_trials=len(trial_ids),
        rows=rows,
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
