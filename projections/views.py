"""View aggregates: per trial, a task's declared views reduce several signals to one value
(SEMANTICS.md section 4, "View aggregate"). The `mean` and `weighted` reducers add with
the same compensated sum as the aggregates, signals in declaration order."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from operator import mul

from events.models import Signal, ViewSpec
from projections.aggregates import compensated_sum
from projections.columns import MetricRecords
from projections.task import TaskState

Reduce = Callable[[list[float]], float | None]
"""A view's reducer over one trial's signal values, in declaration order (all present);
None when it has nothing to give."""


def reducer_of(view: ViewSpec) -> Reduce:
    """The view's reducer. `weighted` divides by the compensated sum of the view's weights,
    the same for every trial (a trial is reduced only when it has every signal), so it is
    added once per view, not once per trial."""
    if view.reducer == "single":
        return _first
    if view.reducer == "all":
        return min
    if view.reducer == "any":
        return max
    if view.reducer == "mean":
        return _finite_mean
    weights = [signal.weight for signal in view.signals]
    weight_sum = compensated_sum(weights)
    if not weight_sum:
        return _nothing

    def weighted(values: list[float]) -> float:
        # One value per signal, so `values` and `weights` have the same length.
        return compensated_sum(map(mul, values, weights)) / weight_sum

    return weighted


def _nothing(values: list[float]) -> None:
    return None


def _first(values: list[float]) -> float:
    return values[0]


def _finite_mean(values: list[float]) -> float | None:
    finite = list(filter(math.isfinite, values))
    return compensated_sum(finite) / len(finite) if finite else None


def view_values(
    task: TaskState,
    views: Iterable[ViewSpec],
    totals: dict[str, int],
    values: dict[str, list[float]],
    read: dict[str, MetricRecords],
) -> None:
    """Add this task's trials to the per-view totals and value lists; `read`: the task's
    records (`TaskState.read`)."""
    trials = len(task.trial_ids)
    if not trials:
        return
    signals = _SignalValues(read)
    for view in views:
        totals[view.name] = totals.get(view.name, 0) + trials
        by_signal = [signals.of(signal) for signal in view.signals]
        # The trials with a value for every signal, in trial order; the others are skipped.
        complete = sorted(set(by_signal[0]).intersection(*by_signal[1:])) if by_signal else []
        reduce = reducer_of(view)
        reduced = [value for trial in complete if (value := reduce([of[trial] for of in by_signal])) is not None]
        if reduced:
            values.setdefault(view.name, []).extend(reduced)


class _SignalValues:
    """Per signal, trial index -> its semantic value in the trial's last completed or
    partial score of the signal's metric (a trial whose last such score lacks it has
    none): each computed once per task, whichever views share it."""

    def __init__(self, read: dict[str, MetricRecords]) -> None:
        self.read = read
        self.values: dict[tuple[str, str], dict[int, float]] = {}

    def of(self, signal: Signal) -> dict[int, float]:
        key = (signal.metric, signal.output)
        known = self.values.get(key)
        if known is None:
            known = self.values[key] = self._compute(*key)
        return known

    def _compute(self, metric: str, output: str) -> dict[int, float]:
        records = self.read.get(metric)
        if records is None:
            return {}
        semantic = records.semantic_at(output)
        if not semantic:
            return {}
        return {trial: semantic[row] for trial, row in records.latest_ok_rows().items() if row in semantic}
