"""Two runs' summaries compared, per pass@k key: did the candidate do worse than the baseline?

A pure function of two `run.summary` records (what `evalstream gate` and the dashboard's two-run
view share), returning a frozen record of plain data.

The statistics, per key, over the tasks both runs have and both measured (a paired design):
- a task's pass rate is c / n over its attempts, an attempt passing as in SEMANTICS.md section 2
  (not null and >= 1.0; NaN and dead trials do not pass);
- the paired difference of a task is candidate rate - baseline rate; the task, not the attempt,
  is the unit, because the attempts of one task are not independent (the clustered, paired
  analysis of Miller, "Adding Error Bars to Evals", 2024);
- the mean difference and its standard error sd(d) / sqrt(n), sd the sample standard deviation
  (n - 1), both from the range aggregate of the differences (SEMANTICS.md section 4's compensated
  sums, `projections.figures.aggregates`);
- the 95% interval mean +- t x SE, t the 0.975 quantile of Student's t with n - 1 degrees of
  freedom (`projections.figures.t975`, SEMANTICS.md section 8): with few tasks the normal 1.96 is too
  narrow (t is 2.26 at n = 10). The interval is not clipped: a difference of pass rates lies in
  [-1, 1], and an interval reaching past that says the data are too few;
- with one paired task there is a mean and no standard error, so no interval; with none, neither.

Also per key: pass@1 .. pass@k of both runs as their summaries state them (over each run's own
tasks, so they need not agree with the paired rates), and the verdicts that changed:
regressions (solved -> flaky or failed, flaky -> failed), fixes (the reverse), tasks only one
run has the key for, and shared tasks unmeasured (no attempt) in either run, which take no part
in the differences. Verdicts are the fold's own rule (`projections.figures.verdicts`) on the attempts.

A run's pass@k keys are those its `verdicts` name (every key some task declares continuous or
boolean). Keys and tasks only one run has are listed, and the rest compared.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from events.nonfinite import read_float
from events.outputs import Attempt, RunSummary
from projections.figures.aggregates import range_aggregate
from projections.figures.passk import passes
from projections.figures.t975 import t975
from projections.figures.verdicts import FAILED, FLAKY, SOLVED, verdict_of

_WORSE = {(SOLVED, FLAKY), (SOLVED, FAILED), (FLAKY, FAILED)}


class NotComparable(ValueError):
    """Keys were asked for that the two runs do not share."""


@dataclass(frozen=True, slots=True)
class PassAt:
    """One `<key>.pass@<k>` aggregate of a summary."""

    k: int
    mean: float | None
    count: int
    nan_count: int


@dataclass(frozen=True, slots=True)
class TaskDelta:
    """A task both runs measured: pass rates and candidate - baseline."""

    task_id: str
    baseline: float
    candidate: float
    difference: float
    baseline_attempts: int
    candidate_attempts: int


@dataclass(frozen=True, slots=True)
class VerdictChange:
    task_id: str
    baseline: str
    candidate: str


@dataclass(frozen=True, slots=True)
class Unmeasured:
    """A task both runs have that one or both measured no attempt of."""

    task_id: str
    baseline: bool
    """Unmeasured in the baseline."""
    candidate: bool


@dataclass(frozen=True, slots=True)
class KeyComparison:
    key: str
    tasks: tuple[TaskDelta, ...]
    """The paired tasks, in the baseline's task order."""
    mean_difference: float | None
    sample_std_dev: float | None
    """Of the paired differences (n - 1); None below two paired tasks."""
    standard_error: float | None
    critical_value: float | None
    """t975(n - 1) for n paired tasks; None below two."""
    interval: tuple[float, float] | None
    """mean +- critical_value x standard error; None below two paired tasks."""
    baseline_pass_at: tuple[PassAt, ...]
    candidate_pass_at: tuple[PassAt, ...]
    regressions: tuple[VerdictChange, ...]
    fixes: tuple[VerdictChange, ...]
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]
    unmeasured: tuple[Unmeasured, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    baseline: str
    baseline_revision: int
    candidate: str
    candidate_revision: int
    keys: tuple[KeyComparison, ...]
    """The keys compared, sorted; empty when the runs share none."""
    only_baseline_keys: tuple[str, ...]
    only_candidate_keys: tuple[str, ...]
    only_baseline_tasks: tuple[str, ...]
    only_candidate_tasks: tuple[str, ...]


def passk_keys(summary: RunSummary) -> list[str]:
    """The run's pass@k-eligible keys, sorted."""
    return sorted({key for keys in summary.verdicts.values() for key in keys})


def compare(baseline: RunSummary, candidate: RunSummary, keys: Iterable[str] | None = None) -> Comparison:
    """Compare `candidate` with `baseline` on `keys` (default: every pass@k key both have).

    Raises `NotComparable` for a key in `keys` that is not a pass@k key of both runs."""
    base_keys, cand_keys = passk_keys(baseline), passk_keys(candidate)
    shared = [key for key in base_keys if key in cand_keys]
    chosen = shared if keys is None else list(dict.fromkeys(keys))
    missing = [key for key in chosen if key not in shared]
    if missing:
        raise NotComparable(
            f"{', '.join(map(repr, missing))} {'is' if len(missing) == 1 else 'are'} not a pass@k key of both runs; "
            f"shared keys: {', '.join(shared) or 'none'}"
        )
    base_tasks = baseline.summary.task_metric_attempts
    cand_tasks = candidate.summary.task_metric_attempts
    return Comparison(
        baseline=baseline.run_id,
        baseline_revision=baseline.revision,
        candidate=candidate.run_id,
        candidate_revision=candidate.revision,
        keys=tuple(_compare_key(baseline, candidate, key) for key in sorted(chosen)),
        only_baseline_keys=tuple(key for key in base_keys if key not in shared),
        only_candidate_keys=tuple(key for key in cand_keys if key not in shared),
        only_baseline_tasks=tuple(task for task in base_tasks if task not in cand_tasks),
        only_candidate_tasks=tuple(task for task in cand_tasks if task not in base_tasks),
    )


def _compare_key(baseline: RunSummary, candidate: RunSummary, key: str) -> KeyComparison:
    base, cand = key_attempts(baseline, key), key_attempts(candidate, key)
    paired: list[TaskDelta] = []
    regressions: list[VerdictChange] = []
    fixes: list[VerdictChange] = []
    unmeasured: list[Unmeasured] = []
    for task_id, base_attempts in base.items():
        cand_attempts = cand.get(task_id)
        if cand_attempts is None:
            continue
        if not base_attempts or not cand_attempts:
            unmeasured.append(Unmeasured(task_id, not base_attempts, not cand_attempts))
            continue
        base_rate, base_verdict = _rate(base_attempts)
        cand_rate, cand_verdict = _rate(cand_attempts)
        paired.append(
            TaskDelta(task_id, base_rate, cand_rate, cand_rate - base_rate, len(base_attempts), len(cand_attempts))
        )
        if (base_verdict, cand_verdict) in _WORSE:
            regressions.append(VerdictChange(task_id, base_verdict, cand_verdict))
        elif (cand_verdict, base_verdict) in _WORSE:
            fixes.append(VerdictChange(task_id, base_verdict, cand_verdict))
    figures = range_aggregate("difference", [task.difference for task in paired], len(paired))
    mean, sd = figures["mean"], figures["sample_std_dev"]
    error = None if sd is None else sd / math.sqrt(len(paired))
    critical = None if error is None else t975(len(paired) - 1)
    return KeyComparison(
        key=key,
        tasks=tuple(paired),
        mean_difference=mean,
        sample_std_dev=sd,
        standard_error=error,
        critical_value=critical,
        interval=None
        if mean is None or error is None or critical is None
        else (mean - critical * error, mean + critical * error),
        baseline_pass_at=_pass_at(baseline, key),
        candidate_pass_at=_pass_at(candidate, key),
        regressions=tuple(regressions),
        fixes=tuple(fixes),
        only_baseline=tuple(task for task in base if task not in cand),
        only_candidate=tuple(task for task in cand if task not in base),
        unmeasured=tuple(unmeasured),
    )


def key_attempts(summary: RunSummary, key: str) -> dict[str, Sequence[Attempt]]:
    """task_id -> the key's attempts, for every task the key is a pass@k key of, in task order."""
    lists = summary.summary.task_metric_attempts
    return {task: lists.get(task, {}).get(key, []) for task, keys in summary.verdicts.items() if key in keys}


def pass_rate(attempts: Sequence[Attempt]) -> float:
    """The pass rate of a non-empty attempt list."""
    return _rate(attempts)[0]


def passed(attempt: Attempt) -> bool:
    """Whether an attempt passes (SEMANTICS.md section 2: full credit; a dead trial does not)."""
    return passes(_value(attempt))


def _rate(attempts: Sequence[Attempt]) -> tuple[float, str]:
    """(pass rate, verdict) of a non-empty attempt list."""
    count = sum(map(passed, attempts))
    return count / len(attempts), verdict_of(len(attempts), count)


def _value(attempt: Attempt) -> float | None:
    return read_float(attempt.value)


def _pass_at(summary: RunSummary, key: str) -> tuple[PassAt, ...]:
    found = []
    for score in summary.summary.scores:
        head, sep, k = score.name.rpartition(".pass@")
        if sep and head == key and k.isdigit():
            found.append(PassAt(int(k), read_float(score.mean), score.count, score.nan_count))
    return tuple(sorted(found, key=lambda figure: figure.k))
