"""View aggregates: per trial, a task's declared views reduce several signals to one value
(SEMANTICS.md section 4, "View aggregate", with the reducers of `projections.figures.reducers`)."""

from __future__ import annotations

from projections.fold.declarations import Key, TaskDeclaration
from projections.fold.task import TaskState
from projections.packed.records import MetricRecords
from projections.packed.trial_ids import count


def view_values(
    task: TaskState,
    declared: TaskDeclaration,
    totals: dict[str, int],
    values: dict[str, list[float]],
    read: dict[str, MetricRecords],
) -> None:
    """Add this task's trials to the per-view totals and value lists; `read`: the task's
    records (`TaskState.read`)."""
    trials = count(task.trials)
    if not trials:
        return
    signals = _SignalValues(read)
    for view in declared.read_views:
        totals[view.name] = totals.get(view.name, 0) + trials
        by_signal = [signals.of(key) for key in view.signals]
        # The trials with a value for every signal, in trial order; the others are skipped.
        complete = sorted(set(by_signal[0]).intersection(*by_signal[1:])) if by_signal else []
        reduced = [value for trial in complete if (value := view.reduce([of[trial] for of in by_signal])) is not None]
        if reduced:
            values.setdefault(view.name, []).extend(reduced)


class _SignalValues:
    """Per signal, trial index -> its semantic value in the trial's last completed or
    partial score of the signal's metric (a trial whose last such score lacks it has
    none): each computed once per task, whichever views share it."""

    def __init__(self, read: dict[str, MetricRecords]) -> None:
        self.read = read
        self.values: dict[Key, dict[int, float]] = {}

    def of(self, key: Key) -> dict[int, float]:
        """The values of the signal of (metric_type, output) `key`."""
        known = self.values.get(key)
        if known is None:
            known = self.values[key] = self._compute(key[0], key[1])
        return known

    def _compute(self, metric: str, output: str) -> dict[int, float]:
        records = self.read.get(metric)
        if records is None:
            return {}
        semantic = records.semantic_at(output)
        if not semantic:
            return {}
        return {trial: semantic[row] for trial, row in records.latest_ok_rows().items() if row in semantic}
