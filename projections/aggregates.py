"""Range aggregates (SEMANTICS.md section 4), the one statistic every figure uses.

Computed exactly as the NeMo evaluator SDK computes its range scores (plain left-to-right
sums over the values in the order given, population variance from the mean, the same
percentile rule), so that figures agree with it to the last bit. The order of `values`
therefore matters: metric outputs come in run log order, views and pass@k in summary task
order. The sums are written out as loops: from Python 3.12 the built-in `sum()` of floats
is compensated, which would change the last bits with the interpreter version.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

PERCENTILES = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100)

Aggregate = dict[str, Any]
"""A JSON-ready range aggregate record (see `events.outputs.RangeAggregate`)."""


def plain_sum(values: list[float]) -> float:
    """Left to right, one rounding per addition, on every Python version."""
    total = 0.0
    for value in values:
        total += value
    return total


def percentile(ordered: list[float], p: int) -> float:
    """Position p/100 * (n + 1) - 1, clamped to the ends, linear in between."""
    position = p / 100 * (len(ordered) + 1) - 1
    if position <= 0:
        return ordered[0]
    if position >= len(ordered) - 1:
        return ordered[-1]
    below = int(position)
    fraction = position - below
    return ordered[below] + fraction * (ordered[below + 1] - ordered[below])


def range_aggregate(name: str, values: Iterable[float], total: int) -> Aggregate:
    """The aggregate of the finite `values` among `total` (the rest count as NaN)."""
    finite = [value for value in values if math.isfinite(value)]
    count = len(finite)
    record: Aggregate = {"name": name, "score_type": "range", "count": count, "nan_count": max(total - count, 0)}
    if not finite:
        for stat in ("sum", "mean", "min", "max", "variance", "std_dev", "sample_variance", "sample_std_dev"):
            record[stat] = None
        record["percentiles"] = None
        record["median"] = None
        return record
    total_sum = plain_sum(finite)
    mean = total_sum / count
    squares = plain_sum([(value - mean) ** 2 for value in finite])
    variance = squares / count
    sample_variance = squares / (count - 1) if count > 1 else None
    ordered = sorted(finite)
    percentiles = {f"p{p}": percentile(ordered, p) for p in PERCENTILES}
    record.update(
        sum=total_sum,
        mean=mean,
        min=ordered[0],
        max=ordered[-1],
        variance=variance,
        std_dev=math.sqrt(variance),
        sample_variance=sample_variance,
        sample_std_dev=None if sample_variance is None else math.sqrt(sample_variance),
        percentiles=percentiles,
        median=percentiles["p50"],
    )
    return record
