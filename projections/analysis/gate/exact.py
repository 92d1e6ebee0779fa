"""An exact 95% interval for the mean paired difference over few tasks: the sign-flip
(paired permutation) interval of Hartigan's subset means.

Hartigan, "Using subsample values as typical values", JASA 1969: for n values drawn from a
distribution symmetric about theta, the 2^n - 1 means of the non-empty subsets cut the line
into 2^n intervals, each holding theta with probability exactly 1/2^n. So the interval from the
k-th smallest to the k-th largest subset mean holds theta with probability at least
1 - 2k/2^n, with no assumption of normality; k = floor(0.025 x 2^n) keeps it at 95% or more.
It is the inversion of the exact paired permutation test that flips the signs of the
differences (under no change on any task, candidate and baseline are exchangeable within
each task, so each sign is a fair coin). Below 6 tasks (2^5 x 0.025 < 1) no such interval
excludes anything: it is the whole range of a difference of pass rates, [-1, 1].

Cost: 2^n subset sums, so it is for few tasks (`projections.analysis.gate.decision` says how few).
"""

from __future__ import annotations

from collections.abc import Sequence

LEVEL_TAIL = 0.025
"""Each tail's share: a two-sided 95% interval."""


def subset_mean_interval(differences: Sequence[float]) -> tuple[float, float]:
    """The exact interval of `differences` (each in [-1, 1]): [-1, 1] when they are too few."""
    count = len(differences)
    cut = int(LEVEL_TAIL * 2**count)  # floor: the coverage stays at least 95%
    if cut == 0:
        return -1.0, 1.0
    sums = [0.0]
    sizes = [0]
    for difference in differences:
        sums += [total + difference for total in sums]
        sizes += [size + 1 for size in sizes]
    means = sorted([total / size for total, size in zip(sums[1:], sizes[1:], strict=True)])
    return means[cut - 1], means[-cut]
