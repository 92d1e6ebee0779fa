"""View aggregates: per trial, a task's declared views reduce several signals to one value
(SEMANTICS.md section 4, "View aggregate"). The `mean` and `weighted` reducers add with
the same compensated sum as the aggregates, signals in declaration order."""

from __future__ import annotations

import math
from collections.abc import Iterable

from events.models import ViewSpec
from projections.aggregates import compensated_sum
from projections.task import TaskState


def reduce_signals(reducer: str, signals: list[tuple[float, float]]) -> float | None:
    """Reduce (value, weight) pairs; None when the reducer has nothing to give."""
    values = [value for value, _ in signals]
    if not values:
        return None
    if reducer == "single":
        return values[0]
    if reducer == "all":
        return min(values)
    if reducer == "any":
        return max(values)
    if reducer == "mean":
        finite = [value for value in values if math.isfinite(value)]
        return compensated_sum(finite) / len(finite) if finite else None
    weights = compensated_sum(weight for _, weight in signals)
    return compensated_sum(value * weight for value, weight in signals) / weights if weights else None


def view_values(
    task: TaskState, views: Iterable[ViewSpec], totals: dict[str, int], values: dict[str, list[float]]
) -> None:
    """Add this task's trials to the per-view totals and value lists."""
    views = list(views)
    if not views:
        return
    used = {(signal.metric, signal.output) for view in views for signal in view.signals}
    metrics = {metric for metric, _ in used if metric in task.metrics}
    latest = {metric: task.metrics[metric].latest_ok_rows() for metric in metrics}
    semantic = {
        (metric, output): task.metrics[metric].outputs[output].semantic_at()
        for metric, output in used
        if metric in task.metrics and output in task.metrics[metric].outputs
    }
    for trial in range(len(task.trial_ids)):
        for view in views:
            totals[view.name] = totals.get(view.name, 0) + 1
            signals: list[tuple[float, float]] = []
            for signal in view.signals:
                row = latest.get(signal.metric, {}).get(trial)
                value = None if row is None else semantic.get((signal.metric, signal.output), {}).get(row)
                if value is None:
                    break
                signals.append((value, signal.weight))
            else:
                reduced = reduce_signals(view.reducer, signals)
                if reduced is not None:
                    values.setdefault(view.name, []).append(reduced)
