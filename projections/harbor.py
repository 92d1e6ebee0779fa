"""The run as Harbor's per-dataset stats (SEMANTICS.md section 6)."""

from __future__ import annotations

import heapq
from typing import Any

from events.nonfinite import wire_float
from projections.aggregates import compensated_sum
from projections.attempts import TaskAttempts
from projections.declarations import key_name
from projections.passk import estimates
from projections.run import RunState


def harbor_k_values(smallest_n: int) -> list[int]:
    """Harbor's ks: 2, 4, 8, ... and 5, 10, 15, ..., up to `smallest_n`."""
    ks = set(range(5, smallest_n + 1, 5))
    k = 2
    while k <= smallest_n:
        ks.add(k)
        k *= 2
    return sorted(ks)


def value_label(value: float) -> str:
    """A value as a reward_stats key: Python's repr, non-finite as on the wire."""
    wire = wire_float(value)
    return wire if isinstance(wire, str) else repr(wire)


def harbor_stats(run: RunState, attempts: TaskAttempts) -> dict[str, Any]:
    """`attempts`: every task's attempt lists, tasks in summary order, keys sorted."""
    reward_stats: dict[str, dict[str, list[str]]] = {}
    binary: dict[str, list[tuple[int, int]]] = {}
    eligible = {key_name(key) for key in run.passk}
    broken: set[str] = set()
    for lists in attempts.values():
        for name, attempt_list in lists.items():
            n = c = 0
            for trial_id, value in attempt_list:
                n += 1
                if value is None:
                    continue
                reward_stats.setdefault(name, {}).setdefault(value_label(value), []).append(trial_id)
                if value == 1.0:
                    c += 1
                elif value != 0.0:
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
                str(k): compensated_sum(estimates(n, c)[k - 1] for n, c in tallies) / len(tallies) for k in ks
            }
    return {
        "n_trials": run.trials_completed,
        "n_errors": run.trials_failed,
        "reward_stats": reward_stats,
        "exception_stats": exception_stats,
        "pass_at_k": pass_at_k,
    }
