"""How many paired tasks would resolve a difference, at 80% power: Miller's sample-size rule.

Miller, "Adding Error Bars to Evals" (2024), section "Power analysis": to detect a true
difference `delta` between two models with a two-sided test of level alpha and power 1 - beta
on n paired questions, n = ((z_{1-alpha/2} + z_{1-beta}) * sd / delta)^2, sd the standard
deviation of the paired differences (the paper writes its square as the variance of the
difference, sigma_A^2 + sigma_B^2 - 2 cov). Here alpha = 0.05 (two-sided) and power 0.8, so
z_0.975 = 1.959963984540054 and z_0.8 = 0.8416212335729143 (scipy.stats.norm.ppf(0.975),
norm.ppf(0.8)), and sd is the observed sample standard deviation of the per-task differences.

More attempts instead of more tasks (`candidate_attempts_needed`): a task's difference varies
by how its tasks differ (between) and by its attempts' own binomial noise (within: p(1-p)/n a
run, estimated without bias by p^(1-p^)/(n-1)). sd^2 estimates between + the mean within;
more attempts of the candidate shrink only its within part, so the attempts per task K that
bring n paired tasks to the power rule solve between + within_baseline + w/K <= n (effect /
(z_0.975 + z_0.8))^2, w the candidate's per-attempt variance p(1-p) (estimated p^(1-p^)n/(n-1)).
When between and the baseline's noise alone exceed that, no number of attempts will do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from projections.analysis.compare import KeyComparison, TaskDelta
from projections.figures.t975 import NORMAL_975

NORMAL_80 = 0.8416212335729143
"""The 0.8 quantile of the standard normal: power 80%."""


@dataclass(frozen=True, slots=True)
class Power:
    """Paired tasks a difference of `effect` needs at 80% power, against those compared."""

    effect: float
    """The size of difference to resolve (> 0): the observed one or the gate's threshold."""
    tasks_needed: int
    """ceil(((z_0.975 + z_0.8) * sd / effect)^2), at least 2 (an interval needs two)."""
    more_tasks: int
    """tasks_needed minus the paired tasks compared, at least 0."""


def tasks_needed(sd: float, effect: float) -> int:
    """Paired tasks that resolve a true difference `effect` (> 0) at 80% power, two-sided 5%."""
    return max(2, math.ceil(((NORMAL_975 + NORMAL_80) * sd / effect) ** 2))


def power(key: KeyComparison, effect: float | None = None) -> Power | None:
    """`key`'s power figures for a difference of `effect` (None: the observed mean difference's
    size). None when there is no standard deviation (fewer than two paired tasks) or no size
    to resolve (an effect of 0)."""
    if key.sample_std_dev is None or key.mean_difference is None:
        return None
    size = abs(key.mean_difference) if effect is None else effect
    if not size > 0:
        return None
    needed = tasks_needed(key.sample_std_dev, size)
    return Power(size, needed, max(0, needed - len(key.tasks)))


def candidate_attempts_needed(tasks: Sequence[TaskDelta], sd: float, effect: float) -> int | None:
    """Attempts per task of the candidate that would resolve `effect` (> 0) at 80% power on
    the same paired `tasks`, the baseline's as they are; None when no number would (or a run
    has a task of one attempt: its noise cannot be told from the tasks' differences)."""
    count = len(tasks)
    if count < 2 or not effect > 0 or any(min(t.baseline_attempts, t.candidate_attempts) < 2 for t in tasks):
        return None
    per_attempt = sum(_noise(t.candidate) * t.candidate_attempts / (t.candidate_attempts - 1) for t in tasks) / count
    within_candidate = sum(_noise(t.candidate) / (t.candidate_attempts - 1) for t in tasks) / count
    within_baseline = sum(_noise(t.baseline) / (t.baseline_attempts - 1) for t in tasks) / count
    between = max(0.0, sd * sd - within_candidate - within_baseline)
    room = count * (effect / (NORMAL_975 + NORMAL_80)) ** 2 - between - within_baseline
    if not room > 0 or not per_attempt > 0:
        return None
    return max(2, math.ceil(per_attempt / room))


def _noise(rate: float) -> float:
    return rate * (1.0 - rate)
