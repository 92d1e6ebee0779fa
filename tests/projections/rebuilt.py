"""The summary built from scratch, every task's attempt lists and every run-wide figure
computed again from the columns: the way `projections.assembly.summary` built each revision before
it kept per-task contributions, kept here as the oracle the incremental summary must equal
byte for byte (tests/projections/assembly/test_incremental.py)."""

from __future__ import annotations

import heapq
import math
from itertools import chain
from typing import Any

from events.nonfinite import wire_float
from projections.assembly.attempts import AttemptList, key_tallies, summary_tasks, task_attempts
from projections.assembly.view_values import view_values
from projections.figures.aggregates import Aggregate, center, compensated_sum, range_aggregate, spread
from projections.figures.harbor import value_label
from projections.figures.passk import by_k, estimates, hat_estimates
from projections.figures.t975 import t975
from projections.figures.verdicts import verdict_of
from projections.fold.declarations import key_name
from projections.fold.run import RunState
from projections.kernels import clip, harbor_estimate, harbor_k_values
from projections.packed.trial_ids import listed

TaskAttempts = dict[str, dict[str, AttemptList]]
"""task_id -> key name -> attempt list, tasks in summary order, keys sorted."""


def run_attempts(run: RunState) -> TaskAttempts:
    return {task.task_id: task_attempts(task) for task in summary_tasks(run)}


def summary(run: RunState) -> dict[str, Any]:
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
            "trial_count": len({trial_id for task in run.tasks.values() for trial_id in listed(task.trials)}),
            "score_count": run.score_count,
        },
        "harbor": harbor_stats(run, attempts),
        "verdicts": verdicts(run, attempts),
        "statistics": statistics(run),
    }


def _wire(value: float | None) -> float | str | None:
    return None if value is None else wire_float(value)


def _metric_outputs(run: RunState) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    if run.declarations:
        for metric, declared in run.declarations.outputs.items():
            names.setdefault(metric, set()).update(declared)
    for task in run.tasks.values():
        for metric, columns in task.metrics():
            names.setdefault(metric, set()).update(columns.outputs)
    return names


def metric_aggregates(run: RunState) -> list[Aggregate]:
    records = []
    tasks = summary_tasks(run)
    for metric, outputs in sorted(_metric_outputs(run).items()):
        per_task = [columns for task in tasks if (columns := task.metric(metric)) is not None]
        total = sum(len(columns) for columns in per_task)
        for output in sorted(outputs):
            numeric = chain.from_iterable(columns.read().numeric(output) for columns in per_task)
            values = [value for _, value in sorted(numeric)]
            records.append(range_aggregate(f"{metric}.{output}", values, total))
    return records


def metric_coverage(run: RunState) -> dict[str, dict[str, dict[str, int]]]:
    coverage: dict[str, dict[str, dict[str, int]]] = {}
    for metric, outputs in sorted(_metric_outputs(run).items()):
        per_task = [columns for task in run.tasks.values() if (columns := task.metric(metric)) is not None]
        total = sum(len(columns) for columns in per_task)
        failed = sum(columns.read().failed() for columns in per_task)
        coverage[metric] = {}
        for output in sorted(outputs):
            scored = sum(len(columns.outputs[output]) for columns in per_task if output in columns.outputs)
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
        task = run.tasks[task_id]
        view_values(task, declared, totals, values, task.read())
    return [range_aggregate(f"view.{name}", values.get(name, []), totals[name]) for name in sorted(totals)]


def passk_aggregates(run: RunState) -> list[Aggregate]:
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


def statistics(run: RunState) -> dict[str, Any]:
    result = {}
    for name, measured, unmeasured in key_tallies(run):
        if measured:
            result[name] = {
                "tasks": len(measured),
                "pass_at_k": _entries(by_k(measured, estimates), unmeasured),
                "pass_hat_k": _entries(by_k(measured, hat_estimates), unmeasured),
            }
    return result


def _entries(columns: list[list[float]], unmeasured: int) -> list[dict[str, Any]]:
    result = []
    for k, values in enumerate(columns, start=1):
        middle = center(values, len(values) + unmeasured)
        mean = middle.mean
        stderr = low = high = None
        sample_variance = None if mean is None else spread(middle, mean).sample_variance
        if mean is not None and sample_variance is not None:
            stderr = math.sqrt(sample_variance) / math.sqrt(middle.count)
            margin = t975(middle.count - 1) * stderr
            low, high = clip(mean - margin), clip(mean + margin)
        result.append(
            {
                "k": k,
                "count": middle.count,
                "nan_count": middle.nan_count,
                "mean": mean,
                "stderr": stderr,
                "ci95_low": low,
                "ci95_high": high,
            }
        )
    return result


def reward_stats(attempts: TaskAttempts) -> dict[str, dict[str, list[str]]]:
    made = [
        (seq, name, value, trial_id)
        for lists in attempts.values()
        for name, attempt_list in lists.items()
        for trial_id, value, seq in attempt_list
        if value is not None
    ]
    made.sort(key=lambda attempt: attempt[:2])
    stats: dict[str, dict[str, list[str]]] = {}
    for _, name, value, trial_id in made:
        stats.setdefault(name, {}).setdefault(value_label(value), []).append(trial_id)
    return stats


def harbor_stats(run: RunState, attempts: TaskAttempts) -> dict[str, Any]:
    binary: dict[str, list[tuple[int, int]]] = {}
    eligible = {key_name(key) for key in run.passk}
    broken: set[str] = set()
    # SEMANTICS.md section 6: under "0.26" (the default) a null attempt is not counted.
    rules = run.declarations.harbor_rules if run.declarations else "0.26"
    for lists in attempts.values():
        for name, attempt_list in lists.items():
            n = c = 0
            for _, value, _ in attempt_list:
                if value is None and rules == "0.26":
                    continue
                n += 1
                if value == 1.0:
                    c += 1
                elif value is not None and value != 0.0:
                    broken.add(name)
            if name in eligible and n:
                binary.setdefault(name, []).append((n, c))
    failed = heapq.merge(*(task.failed_trials for task in run.tasks.values() if task.failed_trials))
    exception_stats: dict[str, list[str]] = {}
    for _, error_type, trial_id in failed:
        exception_stats.setdefault(error_type, []).append(trial_id)
    pass_at_k: dict[str, dict[str, float]] = {}
    for name in sorted(binary.keys() - broken):
        tallies = binary[name]
        ks = harbor_k_values(min(n for n, _ in tallies))
        if ks:
            pass_at_k[name] = {
                str(k): compensated_sum(harbor_estimate(n, c, k) for n, c in tallies) / len(tallies) for k in ks
            }
    graded = {trial_id for task in run.tasks.values() for trial_id in task.graded_trials(task.read())}
    return {
        "n_trials": len(graded),
        "n_errors": run.trials_failed,
        "reward_stats": reward_stats(attempts),
        "exception_stats": exception_stats,
        "pass_at_k": pass_at_k,
    }
