"""Range aggregates (SEMANTICS.md section 4), the one statistic every figure uses.

Computed exactly as the NeMo evaluator SDK computes its range scores, so that figures agree
with it to the last bit: the SDK runs on Python >= 3.12 only, whose built-in `sum()` of
floats is compensated (Neumaier), so sums here are `compensated_sum`, a transcription of
that algorithm (we run on 3.11, whose `sum()` is plain, and `math.fsum` is exact: both give
other last bits). Population variance comes from the mean, percentiles by the SDK's rule.
The order of `values` matters to the last bit: metric outputs come in run log order, views
and pass@k in summary task order.

The arithmetic is IEEE 754 double and never raises (section 4, "Overflow"): a sum or a
difference past the largest double is already Infinity in Python, a square is made so
(`projections.kernels.square`), and the records spell non-finite statistics as the wire strings.
"""

from __future__ import annotations

import math
from bisect import insort_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, final

from events.nonfinite import wire_float
from projections.kernels import (
    finished_sum,
    finite_running_sum,
    percentiles,
    running_sum,
    squares_running_sum,
    variances,
)

Aggregate = dict[str, Any]
"""A JSON-ready range aggregate record (see `events.outputs.RangeAggregate`)."""


def finite(value: float) -> bool:
    """`math.isfinite(value)`. The compiled fold calls `math.isfinite` as a Python function,
    ten times a range aggregate's percentiles; `isinf` and `isnan` it compiles to C."""
    return not (math.isinf(value) or math.isnan(value))


def negative_zero(value: float) -> bool:
    """-0.0: the one finite float that compares equal to another (0.0) and differs from it."""
    return value == 0.0 and math.copysign(1.0, value) < 0.0


def wire_number(value: float | None) -> float | str | None:
    """`events.nonfinite.wire_float` of a value that may be absent: None stays None. Here, in
    the compiled fold, so that a finite value, nearly every one, costs no call of Python."""
    return value if value is None or finite(value) else wire_float(value)


def compensated_sum(values: Iterable[float]) -> float:
    """The sum of floats exactly as CPython 3.12's built-in `sum(values)` computes it.

    Python/bltinmodule.c, builtin_sum_impl, float path: a running sum and a compensation for
    the low-order bits each addition lost (Neumaier), added to the sum once, at the end.
    0.0 for no values (where `sum` gives the int 0, which compares equal).
    """
    total, compensation = running_sum(values, 0.0, 0.0)
    return finished_sum(total, compensation)


@final
class Center:
    """The count, NaN count, sum and mean of a range aggregate: all that progress shows of
    pass@k, without the spread and percentiles that only the summary needs. One is made per
    aggregate and per k of every key's statistics: a plain class with `Final` fields, which
    the compiled fold builds natively (a dataclass's `__init__` is Python code)."""

    __slots__ = ("count", "finite", "mean", "nan_count", "sum")

    def __init__(self, finite: list[float], count: int, nan_count: int, sum: float | None, mean: float | None) -> None:
        self.finite: Final = finite
        self.count: Final = count
        self.nan_count: Final = nan_count
        self.sum: Final = sum
        self.mean: Final = mean


def center(values: Iterable[float], total: int) -> Center:
    """`range_aggregate`'s count, nan_count, sum and mean of `values` among `total`."""
    finite, running, compensation = finite_running_sum(values, 0.0, 0.0)
    return centered(finite, finished_sum(running, compensation), total)


def centered(finite: list[float], summed: float, total: int) -> Center:
    """`center` of the `finite` values among `total`, given their compensated sum."""
    count = len(finite)
    nan_count = max(total - count, 0)
    if not finite:
        return Center(finite, count, nan_count, None, None)
    return Center(finite, count, nan_count, summed, summed / count)


def spread(middle: Center, mean: float) -> Spread:
    """The population and sample variance (None below two values) of `middle`'s finite
    values around their `mean`: the compensated sum of the squared deviations over count
    (sample: count - 1)."""
    variance, sample_variance = variances(squares_sum(middle.finite, mean), middle.count)
    return Spread(variance, sample_variance)


def squares_sum(values: list[float], mean: float) -> float:
    """The compensated sum of the squared deviations of `values` from `mean`."""
    return finished_sum(*squares_running_sum(values, mean))


@final
class Spread:
    """The population and sample variance of an aggregate's finite values. A plain class,
    built natively by the compiled fold (a NamedTuple's constructor is Python code), one per
    aggregate and per k of every key's statistics."""

    __slots__ = ("sample_variance", "variance")

    def __init__(self, variance: float, sample_variance: float | None) -> None:
        self.variance: Final = variance
        self.sample_variance: Final = sample_variance


def center_and_spread(values: Iterable[float], total: int) -> tuple[Center, Spread | None]:
    """`center` of `values` among `total`, and their `spread` around its mean (None: no
    finite value)."""
    middle = center(values, total)
    return middle, None if middle.mean is None else spread(middle, middle.mean)


def range_aggregate(name: str, values: Iterable[float], total: int) -> Aggregate:
    """The aggregate of the finite `values` among `total` (the rest count as NaN)."""
    return aggregate_of(name, *center_and_spread(values, total))


def aggregate_of(name: str, middle: Center, spreads: Spread | None, ordered: list[float] | None = None) -> Aggregate:
    """`range_aggregate`'s record from its center and spread (None: no finite value), for
    a caller that needs them too (section 8 takes pass@k's from the very same); `ordered`:
    the finite values sorted, when the caller keeps them so."""
    count, mean = middle.count, middle.mean
    if mean is None or spreads is None:
        return {"name": name, "score_type": "range", "count": count, "nan_count": middle.nan_count, **_EMPTY}
    variance, sample_variance = spreads.variance, spreads.sample_variance
    if ordered is None:
        ordered = sorted(middle.finite)
    figures = percentiles(ordered)
    return {
        "name": name,
        "score_type": "range",
        "count": count,
        "nan_count": middle.nan_count,
        "sum": wire_number(middle.sum),
        "mean": wire_number(mean),
        "min": ordered[0],
        "max": ordered[-1],
        "variance": wire_number(variance),
        "std_dev": wire_number(math.sqrt(variance)),
        "sample_variance": wire_number(sample_variance),
        "sample_std_dev": None if sample_variance is None else wire_number(math.sqrt(sample_variance)),
        "percentiles": figures,
        "median": figures["p50"],
    }


@dataclass(slots=True, init=False)
class Growing:
    """A range aggregate's values that only ever grow at the end (a metric output's, in run
    log order), kept ready as they come: the finite ones in order and sorted, and their
    running sum. A record then costs the spread alone, the one figure that every value
    moves (the squared deviations are from the new mean): O(values) once, not a sort."""

    # Its __init__ is written out: a dataclass's generated one runs as Python even in the
    # compiled fold (one is made per metric output of every run's summary).

    taken: int
    """The values given so far, finite or not."""
    finite: list[float]
    ordered: list[float]
    """`finite` sorted, equal values in their order there: what `sorted` gives them."""
    total: float
    compensation: float

    def __init__(self) -> None:
        self.taken = 0
        self.finite = []
        self.ordered = []
        self.total = 0.0
        self.compensation = 0.0

    def extend(self, values: list[float]) -> None:
        """The values that come after those given so far."""
        self.taken += len(values)
        new, total, compensation = finite_running_sum(values, self.total, self.compensation)
        if not new:
            return
        self.finite += new
        self.total, self.compensation = total, compensation
        if len(new) > _INSERTED or not self.ordered:
            self.ordered = sorted(self.finite)
            return
        for value in new:
            # After the values equal to it, which came before it: a stable sort's place
            # (-0.0 and 0.0 are equal, and keep their order).
            insort_right(self.ordered, value)

    def aggregate(self, name: str, total: int) -> Aggregate:
        """`range_aggregate(name, <the values given>, total)`."""
        middle = centered(self.finite, finished_sum(self.total, self.compensation), total)
        return aggregate_of(name, middle, None if middle.mean is None else spread(middle, middle.mean), self.ordered)


_INSERTED: Final = 64
"""Past this many new values at once, one sort beats inserting each."""


_EMPTY: Final[Aggregate] = {
    **dict.fromkeys(("sum", "mean", "min", "max", "variance", "std_dev", "sample_variance", "sample_std_dev")),
    "percentiles": None,
    "median": None,
}
