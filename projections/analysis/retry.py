"""What a harness must run again so that every task of a run is measured as often as planned.

A pure function of a `run.summary` and the run's `attempts_per_task`. Per task, on each of its
pass@k keys (those `verdicts` names: the keys pass@k, verdicts and the gate use), the measured
attempts are its non-null ones (NaN is a measured value that did not pass); a dead attempt
(null: the trial died) measured nothing. The task lacks, on a key, attempts_per_task minus its
measured attempts (never below 0), and as a whole the most any of its keys lacks: one more
trial gives each of its metrics one more attempt. A task is listed when it lacks at least one,
so a task with a dead attempt and enough measured ones besides is not.

Trials the harness would not run again (the run's `not_retried` label, `events.not_retried`:
Harbor's rule, a trial is retried only when every exception it recorded is retryable) are
settled: on a key they did not measure, each counts against what the task lacks, as Harbor
would not re-run it. Without the label every unmeasured attempt is one to run again.
"""

from __future__ import annotations

from dataclasses import dataclass

from events import not_retried as not_retried_label
from events.outputs import RunSummary


@dataclass(frozen=True, slots=True)
class KeyShortfall:
    measured: int
    """Non-null attempts."""
    dead: int
    """Null attempts (dead trials)."""
    lacks: int
    not_retried: int = 0
    """Trials that measured nothing on the key and that the harness would not run again."""


@dataclass(frozen=True, slots=True)
class Retry:
    """A task to run again: `lacks` more trials of it."""

    task_id: str
    lacks: int
    dead_trials: tuple[str, ...]
    """Trial ids with a dead attempt on some pass@k key of the task, in the order first seen."""
    keys: dict[str, KeyShortfall]
    """Each pass@k key of the task, sorted."""
    not_retried: tuple[str, ...] = ()
    """The task's trials the harness would not run again (the run's `not_retried` label)."""


def retries(summary: RunSummary, attempts_per_task: int) -> list[Retry]:
    """The tasks of `summary` that lack attempts against `attempts_per_task` (>= 1), in summary
    task order. Raises `ValueError` when attempts_per_task is below 1 or the run's
    `not_retried` label is malformed."""
    if attempts_per_task < 1:
        raise ValueError(f"attempts_per_task is at least 1, got {attempts_per_task}")
    not_retried = not_retried_label.decode(summary.labels)
    found = []
    lists = summary.summary.task_metric_attempts
    for task_id, keys in summary.verdicts.items():
        attempts = lists.get(task_id, {})
        settled = not_retried.get(task_id, ())
        shortfalls = {}
        dead: dict[str, None] = {}
        for key in sorted(keys):
            values = attempts.get(key, [])
            for attempt in values:
                if attempt.value is None:
                    dead[attempt.trial_id] = None
            measuring = {attempt.trial_id for attempt in values if attempt.value is not None}
            measured = sum(1 for attempt in values if attempt.value is not None)
            kept = sum(1 for trial in dict.fromkeys(settled) if trial not in measuring)
            lacks = max(0, attempts_per_task - measured - kept)
            shortfalls[key] = KeyShortfall(measured, len(values) - measured, lacks, kept)
        lacks = max((shortfall.lacks for shortfall in shortfalls.values()), default=0)
        if lacks:
            found.append(Retry(task_id, lacks, tuple(dead), shortfalls, settled))
    return found
