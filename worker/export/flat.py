"""A `run.summary` as the flat rows and named figures the exporters write: pure, no I/O.

- Attempts: one row per attempt of SEMANTICS.md section 1, in summary order: task, key, the
  attempt's index in its list (0 first), trial id, value (null: a dead trial; NaN stays NaN)
  and whether it passes (section 2: not null and >= 1.0, so a reader never has to know that
  NaN sorts above every number in some SQL engines).
- Figures: per pass@k key, section 8's pass@k and pass^k for each k with its standard error
  and 95% interval bounds (`figure` "pass@k" and "pass^k"), its measured tasks ("tasks") and
  its verdict counts ("verdicts.solved", ... "verdicts.unmeasured"); per metric output and view
  aggregate of `summary.scores`, its mean ("mean"; the `<key>.pass@<k>` aggregates are the
  pass@k figures already, to the bit, so they are not repeated). A figure without a value
  (a mean over no finite value) is left out.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from events.nonfinite import read_float
from events.outputs import Interval, RunSummary
from projections.figures.passk import passes
from projections.figures.verdicts import FAILED, FLAKY, SOLVED, UNMEASURED

PASS_AT, PASS_HAT, TASKS, MEAN = "pass@k", "pass^k", "tasks", "mean"
VERDICTS = tuple(f"verdicts.{verdict}" for verdict in (SOLVED, FLAKY, FAILED, UNMEASURED))


@dataclass(frozen=True, slots=True)
class AttemptRow:
    task_id: str
    key: str
    attempt: int
    trial_id: str
    value: float | None
    passed: bool


@dataclass(frozen=True, slots=True)
class Figure:
    key: str
    """A pass@k key, or an aggregate's name for a "mean"."""
    figure: str
    k: int | None
    value: float
    stderr: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    count: int | None = None
    nan_count: int | None = None


def run_key(run_id: str) -> str:
    """A run id as 32 hex digits: a name for files and a tag value any filter can hold."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def attempt_rows(summary: RunSummary) -> Iterator[AttemptRow]:
    for task_id, keys in summary.summary.task_metric_attempts.items():
        for key, attempts in keys.items():
            for index, attempt in enumerate(attempts):
                value = read_float(attempt.value)
                yield AttemptRow(task_id, key, index, attempt.trial_id, value, passes(value))


def figures(summary: RunSummary) -> list[Figure]:
    found: list[Figure] = []
    for key, statistics in summary.statistics.items():
        found += _intervals(key, PASS_AT, statistics.pass_at_k)
        found += _intervals(key, PASS_HAT, statistics.pass_hat_k)
        found.append(Figure(key, TASKS, None, float(statistics.tasks)))
    counts: dict[str, Counter[str]] = {}
    for keys in summary.verdicts.values():
        for key, verdict in keys.items():
            counts.setdefault(key, Counter())[verdict] += 1
    for key in sorted(counts):
        found += [Figure(key, name, None, float(counts[key][name.partition(".")[2]])) for name in VERDICTS]
    for aggregate in summary.summary.scores:
        head, sep, k = aggregate.name.rpartition(".pass@")
        mean = read_float(aggregate.mean)
        if (sep and k.isdigit() and head in counts) or mean is None:
            continue
        found.append(Figure(aggregate.name, MEAN, None, mean, count=aggregate.count, nan_count=aggregate.nan_count))
    return found


def _intervals(key: str, figure: str, entries: list[Interval]) -> Iterator[Figure]:
    for entry in entries:
        if entry.mean is not None:
            yield Figure(
                key,
                figure,
                entry.k,
                entry.mean,
                entry.stderr,
                entry.ci95_low,
                entry.ci95_high,
                entry.count,
                entry.nan_count,
            )


def attempts_per_task(summary: RunSummary) -> str:
    """The attempts a task has on a key, over every task and key with one: "3", or "2-5" when
    they differ; "0" when nothing was measured."""
    sizes = {len(attempts) for keys in summary.summary.task_metric_attempts.values() for attempts in keys.values()}
    sizes.discard(0)
    if not sizes:
        return "0"
    low, high = min(sizes), max(sizes)
    return str(low) if low == high else f"{low}-{high}"
