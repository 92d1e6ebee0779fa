"""`events/native`'s loops over a list of floats (`sums.rs`) against the Python loops of
`projections.figures.aggregates` they stand for: the same bits for any floats, NaN and infinities
included, and the Python loops where a list holds anything but floats."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.figures import aggregates
from projections.figures.aggregates import (
    center_and_spread,
    compensated_sum,
    finite_running_sum,
    range_aggregate,
    running_sum,
    squares_sum,
)
from tests.native import native
from tests.projections.reference import bits

SPECIAL = st.sampled_from([1e16, -1e16, 1e308, -1e308, 1.0, -0.0, 0.0, 5e-324, math.inf, -math.inf, math.nan])
FLOATS = st.floats() | SPECIAL
ANY_LENGTH = st.lists(FLOATS, max_size=120)
"""Lists over the whole double range, of lengths the fold sums here and in the module."""


@contextmanager
def python_loops() -> Iterator[None]:
    """`projections.figures.aggregates` with the module's loops left out: the reference."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("_RUNNING_SUM", "_FINITE_RUNNING_SUM", "_SQUARES_RUNNING_SUM"):
            patch.setattr(aggregates, name, None)
        yield


def same(left: Any, right: Any) -> bool:
    """Equal to the bit, float by float, through tuples, lists and dicts (every NaN alike)."""
    if isinstance(left, float) and isinstance(right, float):
        return bits(left) == bits(right)
    if isinstance(left, (tuple, list)) and isinstance(right, (tuple, list)):
        return type(left) is type(right) and len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(same(left[key], right[key]) for key in left)
    return type(left) is type(right) and left == right


def test_the_module_is_built_and_used() -> None:
    """Where it is built, the fold takes its loops (not a test run on the Python ones alone)."""
    module = native()
    assert aggregates._RUNNING_SUM is module.running_sum
    assert aggregates._FINITE_RUNNING_SUM is module.finite_running_sum
    assert aggregates._SQUARES_RUNNING_SUM is module.squares_running_sum


@given(ANY_LENGTH, FLOATS, FLOATS)
def test_running_sum_is_the_python_loop(values: list[float], total: float, compensation: float) -> None:
    with python_loops():
        expected = running_sum(values, total, compensation)
    assert same(native().running_sum(values, total, compensation), expected)
    assert same(running_sum(values, total, compensation), expected)


@given(ANY_LENGTH, st.data())
def test_a_sum_resumed_in_the_module_is_the_sum_at_once(values: list[float], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(values)))
    with python_loops():
        expected = compensated_sum(values)
    total, compensation = native().running_sum(values[:cut], 0.0, 0.0)
    total, compensation = native().running_sum(values[cut:], total, compensation)
    assert same(aggregates.finished_sum(total, compensation), expected)


@given(ANY_LENGTH, FLOATS, FLOATS)
def test_finite_running_sum_is_the_python_loops(values: list[float], total: float, compensation: float) -> None:
    with python_loops():
        expected = finite_running_sum(values, total, compensation)
    finite, summed, compensated = native().finite_running_sum(values, total, compensation)
    assert same((finite, summed, compensated), expected)
    assert all(kept is value for kept, value in zip(finite, (v for v in values if math.isfinite(v)), strict=True))
    assert same(finite_running_sum(values, total, compensation), expected)


def test_the_finite_values_are_a_list_of_their_own() -> None:
    """`Growing` keeps the list and the caller's goes on growing: they are not the same list."""
    values = [float(at) for at in range(40)]
    finite, _, _ = native().finite_running_sum(values, 0.0, 0.0)
    values.append(1.0)
    assert finite is not values
    assert len(finite) == 40


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False) | SPECIAL.filter(math.isfinite), max_size=120), FLOATS)
def test_squares_sum_is_the_python_loop(values: list[float], mean: float) -> None:
    """Squares past the largest double included (`math.pow` raises, `square` gives +Infinity),
    and means that are infinite (a sum of finite values past the largest double)."""
    with python_loops():
        expected = squares_sum(values, mean)
    total, compensation = native().squares_running_sum(values, mean)
    assert same(aggregates.finished_sum(total, compensation), expected)
    assert same(squares_sum(values, mean), expected)


@pytest.mark.parametrize("value", [-834.4018745313673, -213.78370474343592, -329.655741390696, -721.4074814104423])
def test_a_square_is_pow_not_a_product(value: float) -> None:
    """With glibc, `pow(x, 2.0)` and `x * x` differ in the last bit for these doubles: the
    module squares with the C library's `pow`, as `math.pow` does, and no optimiser turned
    one into the other."""
    total, compensation = native().squares_running_sum([value], 0.0)
    assert (bits(total), compensation) == (bits(math.pow(value, 2.0)), 0.0)


@pytest.mark.parametrize(
    "odd", [1, True, 2**80, type("Sub", (float,), {})(1.5)], ids=["int", "bool", "big int", "float subclass"]
)
def test_a_list_holding_anything_but_floats_is_summed_in_python(odd: object) -> None:
    values: list[Any] = [0.5] * aggregates._SUMMED_FROM + [odd]
    assert native().running_sum(values, 0.0, 0.0) is None
    assert native().finite_running_sum(values, 0.0, 0.0) is None
    assert native().squares_running_sum(values, 0.0) is None
    with python_loops():
        expected = (running_sum(values, 0.0, 0.0), finite_running_sum(values, 0.0, 0.0), squares_sum(values, 0.25))
    assert same(
        (running_sum(values, 0.0, 0.0), finite_running_sum(values, 0.0, 0.0), squares_sum(values, 0.25)), expected
    )


@given(ANY_LENGTH, st.integers(0, 5))
def test_a_range_aggregate_is_the_same_with_the_module(values: list[float], missing: int) -> None:
    total = len(values) + missing
    with python_loops():
        expected = range_aggregate("m", values, total)
        middle, spreads = center_and_spread(values, total)
    assert same(range_aggregate("m", values, total), expected)
    got_middle, got_spreads = center_and_spread(values, total)
    assert same(
        (got_middle.finite, got_middle.count, got_middle.nan_count, got_middle.sum, got_middle.mean),
        (middle.finite, middle.count, middle.nan_count, middle.sum, middle.mean),
    )
    assert (got_spreads is None) == (spreads is None)
    if got_spreads is not None and spreads is not None:
        assert same((got_spreads.variance, got_spreads.sample_variance), (spreads.variance, spreads.sample_variance))


@given(st.lists(ANY_LENGTH, max_size=4))
def test_a_growing_aggregate_is_the_same_with_the_module(batches: list[list[float]]) -> None:
    def grown() -> Any:
        growing = aggregates.Growing()
        for batch in batches:
            growing.extend(batch)
        return growing.aggregate("m", growing.taken)

    with python_loops():
        expected = grown()
    assert same(grown(), expected)
