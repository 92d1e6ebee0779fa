"""SEMANTICS.md section 4 (range aggregates) transcribed from its words, for tests: the
independent reference the fold's aggregates are checked against. It imports nothing of
`projections`; every float is Python's own IEEE 754 double arithmetic."""

from __future__ import annotations

import math
import struct
from typing import Any


def cpython_312_sum(values: list[float]) -> float:
    """Python/bltinmodule.c builtin_sum_impl for a list of floats, step by step: the int
    start 0 meets the first float on the generic path (`0 + x`), the float loop takes over
    from that result, and the compensation is added at the end only when nonzero and finite."""
    if not values:
        return 0.0
    f_result = 0 + values[0]
    c = 0.0
    for x in values[1:]:
        t = f_result + x
        if math.fabs(f_result) >= math.fabs(x):
            c += (f_result - t) + x
        else:
            c += (x - t) + f_result
        f_result = t
    if c and math.isfinite(c):
        f_result += c
    return f_result


def bits(value: float) -> bytes:
    """The float's bytes: tells -0.0 from 0.0; every NaN alike (NaN payloads do not matter)."""
    return b"nan" if math.isnan(value) else struct.pack("<d", value)


def squared(value: float) -> float:
    """`value ** 2` "computed as Python computes it, and +Infinity where Python would raise
    OverflowError"."""
    try:
        return value**2
    except OverflowError:
        return math.inf


def percentile_of(ordered: list[float], p: int) -> float:
    """ "Position p/100 * (n + 1) - 1; at or below 0 take the first value, at or above n - 1
    the last, otherwise interpolate linearly between the two neighbours"."""
    n = len(ordered)
    position = p / 100 * (n + 1) - 1
    if position <= 0:
        return ordered[0]
    if position >= n - 1:
        return ordered[n - 1]
    lower = math.floor(position)
    return ordered[lower] + (position - lower) * (ordered[lower + 1] - ordered[lower])


def range_aggregate(name: str, values: list[float], total: int) -> dict[str, Any]:
    """The section 4 aggregate, with floats (not yet spelled as wire strings)."""
    finite = [value for value in values if math.isfinite(value)]  # "only finite values count"
    count = len(finite)
    record: dict[str, Any] = {
        "name": name,
        "score_type": "range",
        "count": count,
        "nan_count": max(total - count, 0),
    }
    if count == 0:  # "with no finite value every statistic is null"
        stats = ("sum", "mean", "min", "max", "variance", "std_dev", "sample_variance", "sample_std_dev")
        return record | dict.fromkeys(stats) | {"percentiles": None, "median": None}
    total_sum = cpython_312_sum(finite)
    mean = total_sum / count
    squares = cpython_312_sum([squared(value - mean) for value in finite])
    sample_variance = squares / (count - 1) if count >= 2 else None
    ordered = sorted(finite)
    percentiles = {f"p{p}": percentile_of(ordered, p) for p in range(10, 101, 10)}
    return record | {
        "sum": total_sum,
        "mean": mean,
        "min": ordered[0],
        "max": ordered[-1],
        "variance": squares / count,
        "std_dev": math.sqrt(squares / count),
        "sample_variance": sample_variance,
        "sample_std_dev": None if sample_variance is None else math.sqrt(sample_variance),
        "percentiles": percentiles,
        "median": percentiles["p50"],
    }
