"""An anytime-valid confidence sequence for the mean of paired differences in [-1, 1].

A confidence sequence (CS) is a sequence of intervals C_1, C_2, ... that all hold the mean at
once with probability >= 1 - alpha, so it may be looked at after every observation and acted on
the first time it excludes a value, with no inflation of the error rate (a fixed-n interval
looked at repeatedly excludes a true mean far more often than alpha: `bench/gate.py` measures
both).

The method is the predictable plug-in empirical-Bernstein CS (PrPl-EB) of Waudby-Smith and
Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 2024 (arXiv
2010.09686), Theorem 2 with the tuning of their eq. (13)-(15), an empirical-Bernstein
supermartingale CS of the kind of Howard, Ramdas, McAuliffe and Sekhon, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", Annals of Statistics 2021. For
observations x_i in [0, 1] (here x = (d + 1) / 2 for a difference d in [-1, 1]):

    mu_t     = (1/2 + sum_{i<=t} x_i) / (t + 1)
    sigma2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)
    lambda_t = min(sqrt(2 log(2/alpha) / (sigma2_{t-1} t log(1 + t))), 1/2)
    v_t      = 4 (x_t - mu_{t-1})^2,  psi(l) = (-log(1 - l) - l) / 4
    C_t      = sum lambda_i x_i / sum lambda_i  +-  (log(2/alpha) + sum v_i psi(lambda_i)) / sum lambda_i

intersected with every earlier C_s (still a CS) and with [0, 1]. It is nonasymptotic: the
guarantee holds from the first observation, for any distribution on [0, 1]. What it needs is
that each observation's conditional mean given the earlier ones is the same mean mu (the
`projections.analysis.gate.live` docstring says when that holds). Its width adapts to the observed
variance, which for paired differences of pass rates is far below the worst case of the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LAMBDA_CAP = 0.5
"""The largest bet (c in the paper; 1/2 or 3/4 are its suggestions)."""


@dataclass(slots=True)
class ConfidenceSequence:
    """The CS of the observations `add`ed so far, at level 1 - `alpha`, on the [-1, 1] scale."""

    alpha: float = 0.05
    count: int = 0
    total: float = 0.0
    """sum x_i (on the [0, 1] scale), for the plug-in mean."""
    squares: float = 0.0
    """sum (x_i - mu_i)^2, for the plug-in variance."""
    weights: float = 0.0
    """sum lambda_i."""
    weighted: float = 0.0
    """sum lambda_i x_i."""
    penalty: float = 0.0
    """sum v_i psi(lambda_i)."""
    low: float = 0.0
    high: float = 1.0
    """The running intersection, on the [0, 1] scale."""

    def add(self, difference: float) -> None:
        """Take one observation `difference` in [-1, 1]."""
        if not -1.0 <= difference <= 1.0:
            raise ValueError(f"a paired difference lies in [-1, 1], got {difference!r}")
        x = (difference + 1.0) / 2.0
        t = self.count + 1
        mean_before = (0.5 + self.total) / t
        variance_before = (0.25 + self.squares) / t
        log_term = math.log(2.0 / self.alpha)
        bet = min(math.sqrt(2.0 * log_term / (variance_before * t * math.log1p(t))), LAMBDA_CAP)
        self.weights += bet
        self.weighted += bet * x
        self.penalty += (x - mean_before) ** 2 * (-math.log1p(-bet) - bet)  # v_t psi(lambda_t): the 4s cancel
        self.total += x
        self.squares += (x - (0.5 + self.total) / (t + 1)) ** 2
        self.count = t
        center = self.weighted / self.weights
        radius = (log_term + self.penalty) / self.weights
        self.low = max(self.low, center - radius)
        self.high = min(self.high, center + radius)

    @property
    def interval(self) -> tuple[float, float]:
        """The CS on the [-1, 1] scale of the differences: (-1, 1) before any observation."""
        return 2.0 * self.low - 1.0, 2.0 * self.high - 1.0

    @property
    def mean(self) -> float | None:
        """The plain mean of the observations (None before any)."""
        return None if self.count == 0 else 2.0 * self.total / self.count - 1.0
