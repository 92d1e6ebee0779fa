"""SEMANTICS.md section 4, arithmetic: sums add as CPython 3.12's built-in `sum` of floats."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.figures.aggregates import compensated_sum
from projections.kernels import finished_sum, running_sum
from tests.projections.reference import bits, cpython_312_sum

INF = math.inf


def plain(values: list[float]) -> float:
    total = 0.0
    for value in values:
        total += value
    return total


@pytest.mark.parametrize(
    ("values", "expected", "why"),
    [
        ([], 0.0, "nothing to add"),
        ([1e16, 1.0, -1e16], 1.0, "1e16 + 1.0 loses the 1.0, the compensation keeps it (plain: 0.0)"),
        ([1.0, 1e100, 1.0, -1e100], 2.0, "Neumaier, not Kahan: the larger term's low bits are the ones kept"),
        ([0.1] * 10, 1.0, "ten roundings compensated (plain: 0.9999999999999999)"),
        ([0.1, 0.2, 0.3], 0.6, "plain: 0.6000000000000001"),
        ([-0.0], 0.0, "the start is the int 0, and 0 + -0.0 is 0.0"),
        ([INF, 1.0], INF, "the compensation turned NaN (inf - inf) and is not added"),
        ([1e16, 1.0, 1e-16], 1e16, "the compensation is one float, 1.0 + 1e-16 rounds (fsum: 1e16 + 2)"),
        ([1e308, 1e308, -1e308], INF, "overflow stays: the compensation, -inf, is not added"),
        ([INF, -INF], math.nan, "as IEEE addition"),
        ([math.nan, 1.0], math.nan, "as IEEE addition"),
    ],
)
def test_worked_sums(values: list[float], expected: float, why: str) -> None:
    assert bits(compensated_sum(values)) == bits(expected), why


@given(st.lists(st.floats() | st.sampled_from([1e16, -1e16, 1e308, -1e308, 1.0, -0.0, 5e-324]), max_size=30))
def test_equals_cpython_312_sum_on_any_floats(values: list[float]) -> None:
    assert bits(compensated_sum(values)) == bits(cpython_312_sum(values))


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300), max_size=30))
def test_a_generator_sums_like_the_list(values: list[float]) -> None:
    """Callers pass generators too: the sum does not depend on the iterable's kind."""
    assert bits(compensated_sum(value for value in values)) == bits(compensated_sum(values))


ANY_FLOATS = st.lists(st.floats() | st.sampled_from([1e16, -1e16, 1e308, -1e308, 1.0, -0.0, 5e-324]), max_size=30)


@given(ANY_FLOATS, st.data())
def test_a_sum_resumed_where_it_stopped_is_the_sum_at_once(values: list[float], data: st.DataObject) -> None:
    """What the growing aggregates rely on: a running sum carried over any cuts."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(values)), max_size=4)))
    total, compensation = 0.0, 0.0
    for start, end in zip([0, *cuts], [*cuts, len(values)], strict=True):
        total, compensation = running_sum(values[start:end], total, compensation)
    assert bits(finished_sum(total, compensation)) == bits(compensated_sum(values))


def test_the_worked_cases_tell_it_from_plain_and_exact_sums() -> None:
    """Guards the table above: each alternative gives another figure on one of its cases."""
    assert plain([1e16, 1.0, -1e16]) == 0.0
    assert plain([0.1] * 10) != 1.0
    assert math.fsum([1e16, 1.0, 1e-16]) == 1e16 + 2
