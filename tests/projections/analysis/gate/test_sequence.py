"""The confidence sequence (projections.analysis.gate.sequence): against the paper's formulas written out
plainly, its laws, and the decision rule."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.analysis.gate.sequence import ConfidenceSequence

differences = st.lists(st.sampled_from([-1.0, -0.6, -0.2, 0.0, 0.2, 0.4, 1.0]), min_size=1, max_size=60)


def reference(observed: list[float], alpha: float = 0.05) -> tuple[float, float]:
    """Waudby-Smith and Ramdas's PrPl-EB CS (Theorem 2, eq. 13-15), list by list, on x = (d + 1) / 2,
    intersected over time and with [0, 1], mapped back to [-1, 1]."""
    xs = [(d + 1) / 2 for d in observed]
    means = [(0.5 + sum(xs[:t])) / (t + 1) for t in range(len(xs) + 1)]  # means[t] = mu_t, mu_0 = 1/2
    variances = [(0.25 + sum((xs[i] - means[i + 1]) ** 2 for i in range(t))) / (t + 1) for t in range(len(xs) + 1)]
    low, high = 0.0, 1.0
    lambdas, penalties = [], []
    for t in range(1, len(xs) + 1):
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (variances[t - 1] * t * math.log(1 + t))), 0.5)
        lambdas.append(lam)
        penalties.append(4 * (xs[t - 1] - means[t - 1]) ** 2 * (-math.log(1 - lam) - lam) / 4)
        center = sum(lam * x for lam, x in zip(lambdas, xs, strict=False)) / sum(lambdas)
        radius = (math.log(2 / alpha) + sum(penalties)) / sum(lambdas)
        low, high = max(low, center - radius), min(high, center + radius)
    return 2 * low - 1, 2 * high - 1


@given(differences)
def test_it_is_the_papers_sequence(observed: list[float]) -> None:
    sequence = ConfidenceSequence()
    for d in observed:
        sequence.add(d)
    assert sequence.interval == pytest.approx(reference(observed), abs=1e-9)
    assert sequence.count == len(observed)
    assert sequence.mean == pytest.approx(sum(observed) / len(observed))


@given(differences)
def test_it_only_narrows_and_holds_a_constant_mean(observed: list[float]) -> None:
    sequence, constant = ConfidenceSequence(), ConfidenceSequence()
    before = sequence.interval
    for d in observed:
        sequence.add(d)
        constant.add(observed[0])
        low, high = sequence.interval
        assert before[0] <= low
        assert high <= before[1]
        before = (low, high)
        assert constant.interval[0] <= observed[0] <= constant.interval[1]


def test_it_starts_uninformative_and_narrows_with_evidence() -> None:
    sequence = ConfidenceSequence()
    assert sequence.interval == (-1.0, 1.0)
    assert sequence.mean is None
    sequence.add(0.0)
    assert sequence.interval == (-1.0, 1.0)  # one observation: the radius log(40) / 0.5 covers everything
    for _ in range(400):
        for d in (-0.2, 0.0, 0.2, -0.4):
            sequence.add(d)
    low, high = sequence.interval
    assert low < -0.1 < high < 0.0  # mean -0.1, a spread of 0.22: resolved below 0, not below -0.1
    with pytest.raises(ValueError, match=r"a paired difference lies in \[-1, 1\], got 1.5"):
        sequence.add(1.5)
