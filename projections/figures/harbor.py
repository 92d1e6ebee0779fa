"""Harbor's own figures (SEMANTICS.md section 6): its pass@k estimator and ks, and its reward
labels.

Bit for bit Harbor's: its pass@k estimator multiplies in its own order (not section 2's
product form) and its mean adds as Python >= 3.12's `sum` does (`compensated_sum`).
"""

from __future__ import annotations

import math
from functools import lru_cache

from projections.figures.aggregates import compensated_sum
from projections.figures.passk import Tally


@lru_cache(maxsize=1024)
def harbor_k_values(smallest_n: int) -> tuple[int, ...]:
    """Harbor's ks: 2, 4, 8, ... and 5, 10, 15, ..., up to `smallest_n`; they depend on it
    alone, so they are made once per value."""
    ks = set(range(5, smallest_n + 1, 5))
    k = 2
    while k <= smallest_n:
        ks.add(k)
        k *= 2
    return tuple(sorted(ks))


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


def pass_at_k(tallies: list[Tally]) -> dict[str, float]:
    """Harbor's pass@k per k of a key whose tasks have the (n, c) `tallies`, in task order:
    the mean of the tasks' estimates, added in that order. Each distinct (n, c) is estimated
    once per k: a run's tasks share a few."""
    ks = harbor_k_values(min(n for n, _ in tallies))
    figures = {}
    for k in ks:
        estimated: dict[Tally, float] = {}
        for tally in tallies:
            if tally not in estimated:
                estimated[tally] = harbor_estimate(tally[0], tally[1], k)
        figures[str(k)] = compensated_sum([estimated[tally] for tally in tallies]) / len(tallies)
    return figures


def value_label(value: float) -> str:
    """A value as a reward_stats key: Python's repr, as Harbor's result.json has it, the
    non-finite values too ("nan", "inf", "-inf"; not the wire's "NaN" and "Infinity")."""
    # The usual rewards are spelled out: repr formats a float digit by digit, once per
    # attempt of a summary (0.0 by its sign: -0.0 == 0.0).
    if value == 1.0:
        return "1.0"
    if value == 0.0:
        return "0.0" if math.copysign(1.0, value) > 0.0 else "-0.0"
    return repr(value)
