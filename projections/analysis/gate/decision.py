"""What a gate decides on a key, from an interval over candidate - baseline and the tolerated
drop `threshold` (>= 0), and what would settle a key it cannot decide.

The four decisions, for an interval [low, high]:
- BLOCK: high < -threshold: a drop beyond the tolerance, beyond chance;
- WARN: -threshold <= high < 0: a real drop (the interval excludes 0), not established to
  exceed the tolerance;
- INCONCLUSIVE: low < -threshold and high >= 0: the interval holds both 0 and -threshold, so
  the data cannot tell "no drop" from "a drop past the tolerance";
- PASS: low >= -threshold and high >= 0: a drop past the tolerance is ruled out.
(An empty interval, low > high, the running intersection of a confidence sequence on its
alpha event, is read by its high end: the safe side.) A gate over several keys decides the
worst of its keys, in the order BLOCK, INCONCLUSIVE, WARN, PASS (an inconclusive key may hide
a block).

Which interval, for a fixed gate over n paired tasks (the rule the README states): below
`EXACT_BELOW` tasks the exact sign-flip interval (`projections.analysis.gate.exact`), which needs no
normality and is what few tasks allow; from `EXACT_BELOW` tasks on, Student's t interval of
`projections.analysis.compare`. One paired task or none: no interval, INCONCLUSIVE. A key with more
verdict regressions than `max_regressions` is BLOCK whatever its interval.

To decide an INCONCLUSIVE key, its interval must shrink to exclude 0 or -threshold; about how
many paired tasks that takes, if the mean difference stays what it is: Miller's 80%-power
rule (`projections.analysis.gate.power`) for an effect of the distance from the mean to the farther of 0
and -threshold (the one the interval can clear first), at least one more than compared and at
least `EXACT_MINIMUM` (the fewest tasks with which the exact interval excludes anything); or, on the same tasks, about
how many attempts per task of the candidate (`power.candidate_attempts_needed`), when more
attempts can do it at all (from `EXACT_MINIMUM` tasks on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from projections.analysis.compare import KeyComparison
from projections.analysis.gate.exact import subset_mean_interval
from projections.analysis.gate.power import candidate_attempts_needed, tasks_needed

PASS: Final = "pass"
WARN: Final = "warn"
INCONCLUSIVE: Final = "inconclusive"
BLOCK: Final = "block"
SEVERITY = (PASS, WARN, INCONCLUSIVE, BLOCK)
"""Least to most severe: a gate decides its most severe key's decision."""
EXACT_BELOW = 20
"""Paired tasks below which the exact interval is used (2^19 subset sums at most)."""
EXACT_MINIMUM = 6
"""The fewest tasks whose exact interval can exclude a value (2^6 x 0.025 >= 1)."""
T, EXACT = "t", "sign-flip"


@dataclass(frozen=True, slots=True)
class KeyDecision:
    key: str
    decision: str
    method: str | None
    """T or EXACT: which interval decided; None without one."""
    interval: tuple[float, float] | None
    reason: str
    tasks_to_decide: int | None = None
    """For INCONCLUSIVE: about how many paired tasks in all would decide (None: unknown)."""
    more_tasks: int | None = None
    """tasks_to_decide minus those compared."""
    attempts_to_decide: int | None = None
    """For INCONCLUSIVE: about how many attempts per task of the candidate would decide on the
    same tasks (None: no number would, or unknown)."""


def decide(interval: tuple[float, float], threshold: float) -> str:
    """The decision an interval over candidate - baseline makes against `threshold`."""
    floor = 0.0 - threshold  # not -threshold: a threshold of 0 would print as -0
    low, high = interval
    if high < floor:
        return BLOCK
    if high < 0.0:
        return WARN
    if low < floor:
        return INCONCLUSIVE
    return PASS


def worst(decisions: list[str]) -> str:
    """The most severe of `decisions` (PASS for none)."""
    return max(decisions, key=SEVERITY.index, default=PASS)


def decide_key(key: KeyComparison, threshold: float, max_regressions: int | None = None) -> KeyDecision:
    """A fixed gate's decision on one compared key, with its interval, method and reason."""
    paired = len(key.tasks)
    method, interval = _interval(key)
    floor = 0.0 - threshold
    if max_regressions is not None and len(key.regressions) > max_regressions:
        count = len(key.regressions)
        reason = f"{count} regression{'' if count == 1 else 's'}, more than the {max_regressions} allowed"
        return KeyDecision(key.key, BLOCK, method, interval, reason)
    if interval is None:
        reason = f"{paired} paired task{'' if paired == 1 else 's'}: too few for an interval"
        return KeyDecision(key.key, INCONCLUSIVE, None, None, reason, *_to_decide(key, threshold))
    decision = decide(interval, threshold)
    shown = f"{_name(method)} 95% interval [{interval[0]:+.4f}, {interval[1]:+.4f}] over {paired} paired tasks"
    if decision == BLOCK:
        reason = f"the {shown} lies below {floor:g}: a drop beyond the tolerance"
    elif decision == WARN:
        settled = "within the tolerance" if interval[0] >= floor else "not shown to exceed the tolerance"
        reason = f"the {shown} lies below 0: a real drop, {settled} ({floor:g})"
    elif decision == INCONCLUSIVE:
        ends = "0" if threshold == 0 else f"both 0 and {floor:g}"
        reason = f"the {shown} holds {ends}: not enough evidence either way"
    else:
        reason = f"the {shown} rules out a drop beyond {floor:g}"
    if decision != INCONCLUSIVE:
        return KeyDecision(key.key, decision, method, interval, reason)
    return KeyDecision(key.key, decision, method, interval, reason, *_to_decide(key, threshold))


def _interval(key: KeyComparison) -> tuple[str | None, tuple[float, float] | None]:
    if len(key.tasks) < 2:
        return None, None
    if len(key.tasks) < EXACT_BELOW:
        return EXACT, subset_mean_interval([task.difference for task in key.tasks])
    return T, key.interval


def _name(method: str | None) -> str:
    return "exact sign-flip" if method == EXACT else "Student's t"


def _to_decide(key: KeyComparison, threshold: float) -> tuple[int | None, int | None, int | None]:
    if key.mean_difference is None or key.sample_std_dev is None:
        return None, None, None
    mean = key.mean_difference
    effect = max(mean + threshold, -mean)
    if not effect > 0:
        return None, None, None
    # One more than compared at least: the rule is the normal one, and the interval that left
    # the key undecided may be the exact one, wider.
    needed = max(EXACT_MINIMUM, len(key.tasks) + 1, tasks_needed(key.sample_std_dev, effect))
    attempts = None
    if len(key.tasks) >= EXACT_MINIMUM:
        attempts = candidate_attempts_needed(key.tasks, key.sample_std_dev, effect)
    return needed, max(0, needed - len(key.tasks)), attempts
