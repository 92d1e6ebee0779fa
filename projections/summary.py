"""`run.summary`: the summary, harbor, verdicts and statistics objects of a run (SEMANTICS.md 1-6, 8).

Built as JSON-ready plain data (non-finite floats already in their wire strings) in the
exact key order of the contract, so that encoding it is one `orjson.dumps` and the same
state always gives the same bytes. `events.outputs.RunSummary` is the model of this shape.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from events.nonfinite import wire_float
from projections.aggregates import Aggregate, range_aggregate
from projections.attempts import TaskAttempts, key_tallies, run_attempts, summary_tasks
from projections.declarations import key_name
from projections.harbor import harbor_stats
from projections.passk import estimates
from projections.run import RunState
from projections.statistics import by_k, statistics
from projections.verdicts import verdict_of
from projections.views import view_values

Summary = dict[str, Any]


def summary(run: RunState) -> Summary:
    """The `run.summary` event of a closed run (its `revision` counts events since close)."""
    attempts = run_attempts(run)
    return {
        "schema_version": 1,
        "type": "run.summary",
        "run_id": run.run_id,
        "revision": run.revision,
        "closed_reason": run.closed_reason,
        "labels": dict(run.declarations.labels) if run.declarations else {},
        "event_count": run.event_count,
        "summary": {
            "scores": metric_aggregates(run) + view_aggregates(run) + passk_aggregates(run),
            "metric_coverage": metric_coverage(run),
            "task_metric_attempts": {
                task_id: {
                    key: [{"trial_id": trial_id, "value": _wire(value)} for trial_id, value, _ in attempt_list]
                    for key, attempt_list in lists.items()
                }
                for task_id, lists in attempts.items()
            },
            "task_count": len(run.declarations.tasks) if run.declarations else len(attempts),
            "trial_count": len({trial_id for task in run.tasks.values() for trial_id in task.trial_ids}),
            "score_count": run.score_count,
        },
        "harbor": harbor_stats(run, attempts),
        "verdicts": verdicts(run, attempts),
        "statistics": statistics(run),
    }


def _wire(value: float | None) -> float | str | None:
    return None if value is None else wire_float(value)


def _metric_outputs(run: RunState) -> dict[str, set[str]]:
    """Per metric_type, the output names declared (any kind) or carried by any score."""
    names: dict[str, set[str]] = {}
    if run.declarations:
        for metric, declared in run.declarations.outputs.items():
            names.setdefault(metric, set()).update(declared)
    for task in run.tasks.values():
        for metric, columns in task.metrics.items():
            names.setdefault(metric, set()).update(columns.outputs)
    return names


def metric_aggregates(run: RunState) -> list[Aggregate]:
    records = []
    tasks = summary_tasks(run)
    for metric, outputs in sorted(_metric_outputs(run).items()):
        per_task = [task.metrics[metric] for task in tasks if metric in task.metrics]
        total = sum(len(columns.statuses) for columns in per_task)
        for output in sorted(outputs):
            # Run log order: each task's values are in order; one sort merges them (rows' seqs are unique).
            values = [
                value for _, value in sorted(chain.from_iterable(columns.numeric(output) for columns in per_task))
            ]
            records.append(range_aggregate(f"{metric}.{output}", values, total))
    return records


def metric_coverage(run: RunState) -> dict[str, dict[str, dict[str, int]]]:
    coverage: dict[str, dict[str, dict[str, int]]] = {}
    for metric, outputs in sorted(_metric_outputs(run).items()):
        per_task = [task.metrics[metric] for task in run.tasks.values() if metric in task.metrics]
        total = sum(len(columns.statuses) for columns in per_task)
        failed = sum(columns.failed() for columns in per_task)
        coverage[metric] = {}
        for output in sorted(outputs):
            scored = sum(len(columns.outputs[output].rows) for columns in per_task if output in columns.outputs)
            coverage[metric][output] = {
                "total": total,
                "scored": scored,
                "failed": failed,
                "missing": total - scored - failed,
            }
    return coverage


def view_aggregates(run: RunState) -> list[Aggregate]:
    if run.declarations is None:
        return []
    totals: dict[str, int] = {}
    values: dict[str, list[float]] = {}
    for task_id, declared in run.declarations.tasks.items():
        view_values(run.tasks[task_id], declared.views, totals, values)
    return [range_aggregate(f"view.{name}", values.get(name, []), totals[name]) for name in sorted(totals)]


def passk_aggregates(run: RunState) -> list[Aggregate]:
    """`<key>.pass@<k>` for every eligible key and k = 1..largest n (section 2), over the
    per-task figures `statistics` takes its pass@k from."""
    return [
        range_aggregate(f"{name}.pass@{k}", values, len(values) + unmeasured)
        for name, measured, unmeasured in key_tallies(run)
        for k, values in enumerate(by_k(measured, estimates), start=1)
    ]


def verdicts(run: RunState, attempts: TaskAttempts) -> dict[str, dict[str, str]]:
    eligible = {key_name(key): key for key in run.passk}
    result: dict[str, dict[str, str]] = {}
    for task_id in attempts:
        task = run.tasks[task_id]
        result[task_id] = {
            name: verdict_of(*tally)
            for name in attempts[task_id]
            if name in eligible and (tally := task.tally(eligible[name])) is not None
        }
    return result
