"""`events/native`'s `transposed` (`transpose.rs`) against `projections.assembly.statistics.by_k`'s
Python: the same columns, holding the very float objects of the per-task figures."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.assembly import statistics
from projections.figures.passk import estimates, hat_estimates
from tests.native import native

TALLIES = st.lists(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), max_size=60)
"""Measured (n, c) of a run's tasks, n differing from task to task or not."""


@contextmanager
def python_transposition() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(statistics, "_TRANSPOSED", None)
        yield


def test_the_module_is_used() -> None:
    assert statistics._TRANSPOSED is native().transposed


@given(TALLIES, st.sampled_from([estimates, hat_estimates]))
def test_by_k_is_the_same_with_the_module(measured: list[tuple[int, int]], estimator: statistics.Estimator) -> None:
    with python_transposition():
        expected = statistics.by_k(measured, estimator)
    columns = statistics.by_k(measured, estimator)
    assert [[id(value) for value in column] for column in columns] == [
        [id(value) for value in column] for column in expected
    ]
    assert all(type(column) is list for column in columns)


@given(st.lists(st.lists(st.floats(allow_nan=False), max_size=6).map(tuple), max_size=20))
def test_columns_take_each_tuple_longer_than_k(figures: list[tuple[float, ...]]) -> None:
    longest = max(map(len, figures), default=0)
    expected = [[row[k] for row in figures if len(row) > k] for k in range(longest)]
    assert native().transposed(figures) == expected


def test_anything_but_tuples_is_left_to_python() -> None:
    assert native().transposed([(0.5,), [0.5]]) is None
