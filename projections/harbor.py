"""The run as Harbor's per-dataset stats (SEMANTICS.md section 6).

Figures are Harbor's own, bit for bit: its pass@k estimator multiplies in its own order
(not section 2's product form) and its mean adds as Python >= 3.12's `sum` does.
"""

from __future__ import annotations

import heapq
from functools import lru_cache
from typing import Any

from events.nonfinite import wire_float
from projections.aggregates import compensated_sum
from projections.attempts import TaskAttempts
from projections.declarations import key_name
from projections.run import RunState


def harbor_k_values(smallest_n: int) -> list[int]:
    """Harbor's ks: 2, 4, 8, ... and 5, 10, 15, ..., up to `smallest_n`."""
    ks = set(range(5, smallest_n + 1, 5))
    k = 2
    while k <= smallest_n:
        ks.add(k)
        k *= 2
    return sorted(ks)


@lru_cache(maxsize=65_536)
def harbor_estimate(n: int, c: int, k: int) -> float:
    """Harbor's per-task pass@k: 1 - prod(i = 0..k-1) (n-c-i)/(n-i), multiplied in that
    order; 1.0 when n - c < k."""
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(k):
        product *= (n - c - i) / (n - i)
    return 1.0 - product


def value_label(value: float) -> str:
    """A value as a reward_stats key: Python's repr, non-finite as on the wire."""
    wire = wire_float(value)
    return wire if isinstance(wire, str) else repr(wire)


def reward_stats(attempts: TaskAttempts) -> dict[str, dict[str, list[str]]]:
    """key -> value label -> trial ids, from the non-null attempts in log order of the
    scores that made them (the attempts of one score, one per key, by key name)."""
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
    """`attempts`: every task's attempt lists, tasks in summary order, keys sorted."""
    binary: dict[str, list[tuple[int, int]]] = {}
    eligible = {key_name(key) for key in run.passk}
    broken: set[str] = set()
    for lists in attempts.values():
        for name, attempt_list in lists.items():
            n = c = 0
            for _, value, _ in attempt_list:
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
        tallies = binary[name]  # in summary task order, the order Harbor adds them in
        ks = harbor_k_values(min(n for n, _ in tallies))
        if ks:
            pass_at_k[name] = {
                str(k): compensated_sum(harbor_estimate(n, c, k) for n, c in tallies) / len(tallies) for k in ks
            }
    graded = {trial_id for task in run.tasks.values() for trial_id in task.graded_trials()}
    return {
        "n_trials": len(graded),
        "n_errors": run.trials_failed,
        "reward_stats": reward_stats(attempts),
        "exception_stats": exception_stats,
        "pass_at_k": pass_at_k,
    }
