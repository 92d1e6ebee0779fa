"""The reducers of views (SEMANTICS.md section 4, "View aggregate"): per trial, several
signal values to one. `mean` and `weighted` add with the same compensated sum as the
aggregates, signals in declaration order. A declaration holds its views' reducers
(`projections.fold.declarations.DeclaredView`), made once for every task that shares it."""

from __future__ import annotations

from collections.abc import Callable

from events.models import ViewSpec
from projections.figures.aggregates import compensated_sum
from projections.kernels import finite_values

Reduce = Callable[[list[float]], float | None]
"""A view's reducer over one trial's signal values, in declaration order (all present);
None when it has nothing to give."""


def reducer_of(view: ViewSpec) -> Reduce:
    """The view's reducer. `weighted` divides by the compensated sum of the view's weights,
    the same for every trial (a trial is reduced only when it has every signal), so it is
    added once per view, not once per trial."""
    if view.reducer == "single":
        return _first
    if view.reducer == "all":
        return min
    if view.reducer == "any":
        return max
    if view.reducer == "mean":
        return _finite_mean
    weights = [signal.weight for signal in view.signals]
    weight_sum = compensated_sum(weights)
    if not weight_sum:
        return _nothing

    def weighted(values: list[float]) -> float:
        # One value per signal, so `values` and `weights` have the same length.
        return compensated_sum([values[at] * weights[at] for at in range(len(weights))]) / weight_sum

    return weighted


def _nothing(values: list[float]) -> None:
    return None


def _first(values: list[float]) -> float:
    return values[0]


def _finite_mean(values: list[float]) -> float | None:
    finite = finite_values(values)
    return compensated_sum(finite) / len(finite) if finite else None
