"""The fold's compiled kernels (`projections/native`) against their Python twins
(`projections.kernels`): each name of the seam is the kernel where it is built, and gives what
its twin gives, to the bit, for any input; an input a kernel leaves to Python (it answers
None) is computed by the twin, so the seam's answer is the twin's either way."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from hashlib import blake2b
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections import kernels
from projections.figures import aggregates
from projections.figures.aggregates import center_and_spread, compensated_sum, range_aggregate, squares_sum
from projections.figures.passk import by_k, estimates, hat_estimates
from projections.fold.redelivery import AppliedEvents
from projections.kernels import (
    Keys,
    KeySet,
    digest_of_id,
    fingerprint,
    finite_running_sum,
    finite_running_sum_in_python,
    pairs_with,
    running_sum,
    running_sum_in_python,
    squares_running_sum_in_python,
    transposed,
    transposed_in_python,
    trial_index,
    trial_index_in_python,
    with_pair,
)
from projections.packed.trial_ids import joined
from tests.native import kernels as built
from tests.native import native
from tests.projections.reference import bits

_KERNELS = ("_RUNNING_SUM", "_FINITE_RUNNING_SUM", "_SQUARES_RUNNING_SUM", "_TRANSPOSED", "_TRIAL_INDEX")


@contextmanager
def twins_only() -> Iterator[None]:
    """The seam with every kernel it may leave to Python left out: the twins answer."""
    with pytest.MonkeyPatch.context() as patch:
        for name in _KERNELS:
            patch.setattr(kernels, name, None)
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


def test_the_kernels_are_a_module_of_their_own_the_recogniser_holds_none_of() -> None:
    """`projections/native` (`fold-kernels`) builds `projections._kernels`; `events/native`
    holds the recogniser alone."""
    assert built().__name__ == "projections._kernels"
    assert built().KeyTable.__module__ == "projections._kernels"
    assert not {"event_fingerprint", "with_pair", "KeyTable", "running_sum", "transposed", "trial_index"} & set(
        dir(native())
    )


def test_every_kernel_is_built_and_used() -> None:
    """Where the module is built, the seam takes its kernels (not a test of the twins alone)."""
    module = built()
    assert fingerprint is module.event_fingerprint
    assert with_pair is module.with_pair
    assert kernels.key_table is module.KeyTable
    assert type(AppliedEvents()._keys) is module.KeyTable
    assert kernels._RUNNING_SUM is module.running_sum
    assert kernels._FINITE_RUNNING_SUM is module.finite_running_sum
    assert kernels._SQUARES_RUNNING_SUM is module.squares_running_sum
    assert kernels._TRANSPOSED is module.transposed
    assert kernels._TRIAL_INDEX is module.trial_index


# An event id's fingerprint, and a part's fingerprints with one more.


@given(st.text(min_size=1, max_size=200))
def test_a_fingerprint_is_the_ids_128_bit_blake2b(event_id: str) -> None:
    """The halves of BLAKE2b-128 of the id's UTF-8, hi made odd, by the kernel and its twin alike."""
    hi, lo = struct.unpack("<QQ", blake2b(event_id.encode(), digest_size=16).digest())
    assert built().event_fingerprint(event_id) == digest_of_id(event_id) == (hi | 1, lo)


def test_an_id_that_is_not_utf8_is_refused_by_both() -> None:
    with pytest.raises(UnicodeEncodeError):
        built().event_fingerprint("\ud800")
    with pytest.raises(UnicodeEncodeError):
        digest_of_id("\ud800")


@given(
    st.binary(max_size=64).map(lambda data: data[: len(data) // 16 * 16]),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
)
def test_a_pair_appended_is_the_twins(pairs: bytes, hi: int, lo: int) -> None:
    assert built().with_pair(pairs, hi, lo) == pairs_with(pairs, hi, lo) == pairs + struct.pack("<QQ", hi, lo)


# The table of a run's applied fingerprints.

Operation = tuple[str, int]
HALVES = st.one_of(st.integers(0, 63), st.integers(0, 2**64 - 1))
"""A few `hi` halves, whose keys collide, and any 64-bit one."""
OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["add", "put", "holds"]), HALVES) | st.tuples(st.just("reserve"), st.integers(0, 300)),
    max_size=200,
)


def run_on(table: KeySet, operations: list[Operation]) -> list[object]:
    said: list[object] = []
    for name, argument in operations:
        said.append((getattr(table, name)(argument), len(table), table.width))
    return said


@given(st.integers(0, 100), st.booleans(), OPERATIONS)
def test_the_key_table_does_what_its_twin_does(capacity: int, wide: bool, operations: list[Operation]) -> None:
    """Same answers, sizes and widths (so the same `table_bytes`) for any operations,
    growth included, narrow or wide."""
    table = built().KeyTable(capacity, wide)
    assert table.wide is wide
    assert run_on(table, operations) == run_on(Keys(capacity, wide), operations)


@given(st.booleans(), OPERATIONS)
def test_the_twin_key_table_is_a_set_of_keys_with_puts_counted(wide: bool, operations: list[Operation]) -> None:
    """`add` places a key not held, `put` places one anyway, `holds` says whether any slot
    has it; the table holds what it was given at a load of at most 3/4."""
    table, placed = Keys(4, wide), []
    for name, hi in operations:
        key = kernels._key(hi, wide)
        if name == "add":
            new = key not in placed
            assert table.add(hi) is new
            if new:
                placed.append(key)
        elif name == "put":
            table.put(hi)
            placed.append(key)
        elif name == "holds":
            assert table.holds(hi) is (key in placed)
        else:
            table.reserve(hi)
        assert len(table) == len(placed) <= table.width * 3 // 4


def test_a_narrow_key_is_the_top_31_bits_and_a_wide_one_the_whole_half() -> None:
    hi = 0x1234_5678_9ABC_DEF1
    assert kernels._key(hi, False) == hi >> 33 | 1 < 2**31
    assert kernels._key(hi, True) == hi
    assert kernels._key(2, True) == 3  # never 0, an empty slot


# The compensated sums over a list of floats.

SPECIAL = st.sampled_from([1e16, -1e16, 1e308, -1e308, 1.0, -0.0, 0.0, 5e-324, math.inf, -math.inf, math.nan])
FLOATS = st.floats() | SPECIAL
ANY_LENGTH = st.lists(FLOATS, max_size=120)
"""Lists over the whole double range, of lengths the seam sums in either."""


@given(ANY_LENGTH, FLOATS, FLOATS)
def test_running_sum_is_the_twin(values: list[float], total: float, compensation: float) -> None:
    expected = running_sum_in_python(values, total, compensation)
    assert same(built().running_sum(values, total, compensation), expected)
    assert same(running_sum(values, total, compensation), expected)


@given(ANY_LENGTH, st.data())
def test_a_sum_resumed_in_the_kernel_is_the_sum_at_once(values: list[float], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(values)))
    with twins_only():
        expected = compensated_sum(values)
    total, compensation = built().running_sum(values[:cut], 0.0, 0.0)
    total, compensation = built().running_sum(values[cut:], total, compensation)
    assert same(aggregates.finished_sum(total, compensation), expected)


@given(ANY_LENGTH, FLOATS, FLOATS)
def test_finite_running_sum_is_the_twin(values: list[float], total: float, compensation: float) -> None:
    expected = finite_running_sum_in_python(values, total, compensation)
    finite, summed, compensated = built().finite_running_sum(values, total, compensation)
    assert same((finite, summed, compensated), expected)
    assert all(kept is value for kept, value in zip(finite, (v for v in values if math.isfinite(v)), strict=True))
    assert same(finite_running_sum(values, total, compensation), expected)


def test_the_finite_values_are_a_list_of_their_own() -> None:
    """`Growing` keeps the list and the caller's goes on growing: they are not the same list."""
    values = [float(at) for at in range(40)]
    finite, _, _ = built().finite_running_sum(values, 0.0, 0.0)
    values.append(1.0)
    assert finite is not values
    assert len(finite) == 40


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False) | SPECIAL.filter(math.isfinite), max_size=120), FLOATS)
def test_the_squares_sum_is_the_twins(values: list[float], mean: float) -> None:
    """Squares past the largest double included (`math.pow` raises, `square` gives +Infinity),
    and means that are infinite (a sum of finite values past the largest double)."""
    expected = squares_running_sum_in_python(values, mean)
    assert same(built().squares_running_sum(values, mean), expected)
    assert same(squares_sum(values, mean), aggregates.finished_sum(*expected))
    with twins_only():
        assert same(squares_sum(values, mean), aggregates.finished_sum(*expected))


@pytest.mark.parametrize("value", [-834.4018745313673, -213.78370474343592, -329.655741390696, -721.4074814104423])
def test_a_square_is_pow_not_a_product(value: float) -> None:
    """With glibc, `pow(x, 2.0)` and `x * x` differ in the last bit for these doubles: the
    kernel squares with the C library's `pow`, as `math.pow` does, and no optimiser turned
    one into the other."""
    total, compensation = built().squares_running_sum([value], 0.0)
    assert (bits(total), compensation) == (bits(math.pow(value, 2.0)), 0.0)


@pytest.mark.parametrize(
    "odd", [1, True, 2**80, type("Sub", (float,), {})(1.5)], ids=["int", "bool", "big int", "float subclass"]
)
def test_a_list_holding_anything_but_floats_is_left_to_the_twins(odd: object) -> None:
    values: list[Any] = [0.5] * kernels._SUMMED_FROM + [odd]
    assert built().running_sum(values, 0.0, 0.0) is None
    assert built().finite_running_sum(values, 0.0, 0.0) is None
    assert built().squares_running_sum(values, 0.0) is None
    with twins_only():
        expected = (running_sum(values, 0.0, 0.0), finite_running_sum(values, 0.0, 0.0), squares_sum(values, 0.25))
    assert same(
        (running_sum(values, 0.0, 0.0), finite_running_sum(values, 0.0, 0.0), squares_sum(values, 0.25)), expected
    )


@given(ANY_LENGTH, st.integers(0, 5))
def test_a_range_aggregate_is_the_same_with_the_kernels(values: list[float], missing: int) -> None:
    total = len(values) + missing
    with twins_only():
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
def test_a_growing_aggregate_is_the_same_with_the_kernels(batches: list[list[float]]) -> None:
    def grown() -> Any:
        growing = aggregates.Growing()
        for batch in batches:
            growing.extend(batch)
        return growing.aggregate("m", growing.taken)

    with twins_only():
        expected = grown()
    assert same(grown(), expected)


# pass@k's per-task figures as one column per k.

TALLIES = st.lists(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), max_size=60)
"""Measured (n, c) of a run's tasks, n differing from task to task or not."""


@given(TALLIES, st.sampled_from([estimates, hat_estimates]))
def test_by_k_holds_the_very_figures_either_way(measured: list[tuple[int, int]], estimator: Any) -> None:
    with twins_only():
        expected = by_k(measured, estimator)
    columns = by_k(measured, estimator)
    assert [[id(value) for value in column] for column in columns] == [
        [id(value) for value in column] for column in expected
    ]
    assert all(type(column) is list for column in columns)


@given(st.lists(st.lists(st.floats(allow_nan=False), max_size=6).map(tuple), max_size=20))
def test_columns_take_each_tuple_longer_than_k(figures: list[tuple[float, ...]]) -> None:
    longest = max(map(len, figures), default=0)
    expected = [[row[k] for row in figures if len(row) > k] for k in range(longest)]
    assert built().transposed(figures) == transposed_in_python(figures) == expected
    assert transposed(figures) == expected


def test_anything_but_tuples_is_left_to_the_twin() -> None:
    mixed: list[Any] = [(0.5,), [0.5]]
    assert built().transposed(mixed) is None
    assert transposed(mixed) == transposed_in_python(mixed) == [[0.5, 0.5]]


# A trial id's index among a task's.


@given(st.lists(st.text(alphabet="ab\0\1\xe9", min_size=1, max_size=3), unique=True, max_size=6), st.data())
def test_the_kernel_finds_what_the_twin_finds(trial_ids: list[str], data: st.DataObject) -> None:
    """Where it answers: ids holding NUL or SOH (which the held string escapes) and
    characters past one byte are left to the twin."""
    held = joined(trial_ids)
    other = data.draw(st.sampled_from([*trial_ids, "a"]) | st.text(alphabet="ab\0\1\xe9\u0100", min_size=1, max_size=3))
    expected = trial_ids.index(other) if other in trial_ids else -1 - len(trial_ids)
    assert trial_index_in_python(held, other) == expected
    assert built().trial_index(held, other) in (None, expected)
    if other.isalpha() and all(ord(character) < 256 for character in held + other):
        assert built().trial_index(held, other) == expected
    assert trial_index(held, other) == expected
