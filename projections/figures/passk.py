"""pass@k and pass^k (SEMANTICS.md sections 2 and 8): per task from its (n, c), and per k over
a key's measured tasks.

A task's per-k figures depend on its (n, c) alone and are cached (`estimates`,
`hat_estimates`). A key's figures are one column per k (`by_k`: the figures of the tasks with
n >= k, in summary task order), each with the center and spread of the range aggregate
(`projections.figures.aggregates`): the center's mean is the run's pass@k (or pass^k) at k,
and the summary's `<key>.pass@<k>` aggregate and section 8's entry are both made from the one
column (`projections.kernels.column_figures`), so they agree to the bit. Summed afresh from the
columns rather than kept as a running float total, which would drift from that sum by an ulp:
progress must say exactly what the summary would.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, final

import orjson

from projections.figures.aggregates import Center, Spread
from projections.kernels import column_figures, pass_at_k_estimates, pass_hat_k_estimates, transposed

Tally = tuple[int, int]
"""(n, c): a task's attempts for a key, and how many of them pass."""

Estimator = Callable[[int, int], tuple[float, ...]]
"""A task's per-k figures for k = 1..n from its (n, c)."""


def passes(value: float | None) -> bool:
    """Full credit: not null and >= 1.0 (NaN never passes)."""
    return value is not None and value >= 1.0


estimates: Final = lru_cache(maxsize=65_536)(pass_at_k_estimates)
"""Per-task pass@k for k = 1..n from (n, c): section 2's product form, as the NeMo evaluator
multiplies (`projections.kernels.pass_at_k_estimates_in_python`)."""

hat_estimates: Final = lru_cache(maxsize=65_536)(pass_hat_k_estimates)
"""Per-task pass^k for k = 1..n from (n, c): section 8's product, each k's extending the one
before (`projections.kernels.pass_hat_k_estimates_in_python`)."""


@final
class Column:
    """One k's per-task figures of an eligible key (pass@k's or pass^k's, in summary task
    order: `middle.finite`, the figures being never NaN nor infinite), their center and
    spread, and section 8's entry they give."""

    __slots__ = ("aggregate", "entry", "middle", "spreads")

    def __init__(self, middle: Center, spreads: Spread | None, entry: dict[str, Any]) -> None:
        self.middle: Final = middle
        self.spreads: Final = spreads
        self.entry: Final = entry
        self.aggregate: orjson.Fragment | None = None
        """pass@k's `<key>.pass@<k>` aggregate, encoded when a summary first asks for it
        (`projections.assembly.key_figures.pass_at_k_aggregates`): progress shows none."""

    @property
    def values(self) -> list[float]:
        return self.middle.finite


@final
class KeyFigures:
    """One eligible key's pass@k and pass^k columns and its section 8 entry (None: no
    measured task), for the (n, c) list they were computed from."""

    __slots__ = ("at_k", "hat_k", "measured", "moves", "statistics", "unmeasured")

    def __init__(
        self,
        measured: list[Tally],
        unmeasured: int,
        at_k: list[Column],
        hat_k: list[Column],
        statistics: dict[str, Any] | None,
    ) -> None:
        self.measured: Final = measured
        self.unmeasured: Final = unmeasured
        self.at_k: Final = at_k
        self.hat_k: Final = hat_k
        """Empty when no task is measured."""
        self.statistics: Final = statistics
        self.moves = 0
        """The key's `KeyTally.moves` when the list was taken: while it is the same, so is the list."""


def key_figures_of(measured: list[Tally], unmeasured: int, before: KeyFigures | None) -> KeyFigures:
    """A key's pass@k and pass^k columns and section 8 entry, from the (n, c) of its measured
    tasks in summary task order and the count of its unmeasured ones, over one center and
    spread per k. A k whose per-task figures are those of `before` (a task's (n, c) moved
    without moving them: 1.0 stays 1.0 while every attempt passes) keeps its column, and
    pass^k's column at k is pass@k's when their figures are the same (each task passing all
    or none of its attempts)."""
    if before is not None and before.unmeasured != unmeasured:
        before = None
    at_k = _columns(by_k(measured, estimates), unmeasured, before.at_k if before else [])
    hat_k = _columns(by_k(measured, hat_estimates), unmeasured, before.hat_k if before else [], at_k)
    if not measured:
        return KeyFigures(measured, unmeasured, at_k, hat_k, None)
    figures = {
        "tasks": len(measured),
        "pass_at_k": [column.entry for column in at_k],
        "pass_hat_k": [column.entry for column in hat_k],
    }
    return KeyFigures(measured, unmeasured, at_k, hat_k, figures)


def _columns(figures: list[list[float]], unmeasured: int, *known: list[Column]) -> list[Column]:
    """Each k's column of `figures` (`by_k`'s): a column of one of the `known` lists at the
    same k where it has the same figures (its entry is then the same too), else a new one.
    The figures are never NaN, infinite nor -0.0 (products of positive ratios at most 1.0,
    1.0 minus one, or 0.0 written as such), so == on them is equality to the bit, and each
    column's center keeps its list as the finite values it is."""
    columns = []
    for index, values in enumerate(figures):
        k = index + 1
        for kept in known:
            if k <= len(kept) and kept[k - 1].values == values:
                columns.append(kept[k - 1])
                break
        else:
            summed, mean, variance, sample_variance, entry = column_figures(values, len(values) + unmeasured, k)
            middle = Center(values, entry["count"], entry["nan_count"], summed, mean)
            columns.append(Column(middle, Spread(variance, sample_variance), entry))
    return columns


def by_k(measured: list[Tally], estimator: Estimator) -> list[list[float]]:
    """For k = 1..the largest n, the figures of the tasks with n >= k, in the order of
    `measured` (summary task order: it orders the compensated sums)."""
    return transposed([estimator(n, c) for n, c in measured])
