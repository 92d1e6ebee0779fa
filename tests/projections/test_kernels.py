"""The fold's compiled kernels (`projections/native`) against their Python twins
(`projections.kernels`): each name of the seam is the kernel where it is built, and gives what
its twin gives, to the bit, for any input; an input a kernel leaves to Python (it answers
None) is computed by the twin, so the seam's answer is the twin's either way."""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from hashlib import blake2b
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.synthetic import interleave, synthetic_run
from projections import kernels
from projections.figures import aggregates
from projections.figures.aggregates import center_and_spread, compensated_sum, range_aggregate, squares_sum
from projections.figures.passk import by_k, estimates, hat_estimates, key_figures_of
from projections.figures.t975 import t975
from projections.fold.redelivery import AppliedEvents
from projections.kernels import (
    Keys,
    KeySet,
    column_figures,
    column_figures_in_python,
    digest_of_id,
    encode_float,
    encode_float_in_python,
    fingerprint,
    finite_running_sum,
    finite_running_sum_in_python,
    harbor_pass_at_k,
    harbor_pass_at_k_in_python,
    pairs_with,
    pass_at_k_estimates,
    pass_at_k_estimates_in_python,
    pass_hat_k_estimates,
    pass_hat_k_estimates_in_python,
    percentiles,
    percentiles_in_python,
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
from tests.projections.trace import trace
from tests.strategies import mixed_logs

_KERNELS = (
    "_RUNNING_SUM",
    "_FINITE_RUNNING_SUM",
    "_SQUARES_RUNNING_SUM",
    "_TRANSPOSED",
    "_TRIAL_INDEX",
    "_PASS_AT_K_ESTIMATES",
    "_PASS_HAT_K_ESTIMATES",
    "_COLUMN_FIGURES",
    "_PERCENTILES",
    "_HARBOR_PASS_AT_K",
)


@contextmanager
def twins_only() -> Iterator[None]:
    """The seam with every kernel it may leave to Python left out: the twins answer (and the
    caches of a task's figures are emptied, before and after, so they do too)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in _KERNELS:
            patch.setattr(kernels, name, None)
        estimates.cache_clear()
        hat_estimates.cache_clear()
        try:
            yield
        finally:
            estimates.cache_clear()
            hat_estimates.cache_clear()


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
    assert kernels._PASS_AT_K_ESTIMATES is module.pass_at_k_estimates
    assert kernels._PASS_HAT_K_ESTIMATES is module.pass_hat_k_estimates
    assert kernels._COLUMN_FIGURES is module.column_figures
    assert kernels._PERCENTILES is module.percentiles
    assert kernels._HARBOR_PASS_AT_K is module.harbor_pass_at_k
    assert kernels.encode_float is module.encode_float


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
    assert same(kernels.finished_sum(total, compensation), expected)


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
    assert same(squares_sum(values, mean), kernels.finished_sum(*expected))
    with twins_only():
        assert same(squares_sum(values, mean), kernels.finished_sum(*expected))


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
    """The tasks' figures (cached tuples) moved by reference, with the kernel or its twin."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "_TRANSPOSED", None)
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


# pass@k's and pass^k's figures of a task, from its (n, c).

SMALL_TALLY = st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n)))
HUGE_TALLY = st.integers(1_000, 20_000).flatmap(
    lambda n: st.tuples(st.just(n), st.sampled_from([0, 1, n - 1, n]) | st.integers(0, min(n, 3)))
)
"""Many attempts, with the counts of passes whose figures cost O(n) to compute (every k's
product runs over c terms, or stops at once)."""
NO_ATTEMPT = st.just((0, 0))


@given(SMALL_TALLY | HUGE_TALLY | NO_ATTEMPT)
def test_a_tasks_pass_at_k_and_pass_hat_k_are_the_twins(tally: tuple[int, int]) -> None:
    n, c = tally
    for kernel, twin, seam in (
        (built().pass_at_k_estimates, pass_at_k_estimates_in_python, pass_at_k_estimates),
        (built().pass_hat_k_estimates, pass_hat_k_estimates_in_python, pass_hat_k_estimates),
    ):
        expected = twin(n, c)
        assert type(expected) is tuple
        assert len(expected) == n
        assert same(kernel(n, c), expected)
        assert same(seam(n, c), expected)


@pytest.mark.parametrize(("n", "c"), [(3, 5), (-1, 0), (2, -1), (2**53 + 1, 0), (2**70, 2**70)])
def test_a_tally_past_the_kernels_domain_is_left_to_the_twins(n: int, c: int) -> None:
    """c > n, a negative count, or n past 2^53 (where an int is no longer a double exactly):
    the kernel answers None, the seam the twin's answer."""
    assert built().pass_at_k_estimates(n, c) is None
    assert built().pass_hat_k_estimates(n, c) is None
    if 0 <= n < 10:
        assert same(pass_at_k_estimates(n, c), pass_at_k_estimates_in_python(n, c))
        assert same(pass_hat_k_estimates(n, c), pass_hat_k_estimates_in_python(n, c))


def test_the_figures_are_the_product_forms() -> None:
    """Section 2's example (n = 3, c = 1: pass@1 = 1 - (1 - 1/3)) and pass^k's product."""
    assert built().pass_at_k_estimates(3, 1) == (1 - (1 - 1 / 3), 1 - (1 - 2 / 3), 1.0)
    assert built().pass_hat_k_estimates(3, 2) == (2 / 3, 2 / 3 * (1 / 2), 0.0)
    assert built().pass_at_k_estimates(4, 0) == (0.0,) * 4
    assert built().pass_hat_k_estimates(4, 4) == (1.0,) * 4


# A key's column at one k: its center, spread and section 8 entry.

FIGURES = st.floats(0.0, 1.0)
"""Per-task figures as the fold makes them."""
HUGE = st.sampled_from([sys.float_info.max, -sys.float_info.max, 1e308, 8.98846567431158e307, 1.3407807929942596e154])
"""Values whose sums or squares pass the largest double."""


@given(
    st.lists(FIGURES, min_size=1, max_size=80) | st.lists(FLOATS | HUGE, min_size=1, max_size=40),
    st.integers(0, 5),
    st.integers(1, 1_200),
)
def test_a_columns_figures_are_the_twins(values: list[float], unmeasured: int, k: int) -> None:
    """Figures as the fold makes them, and any doubles, near overflow, -0.0, NaN and the
    infinities included (the kernel does the same IEEE arithmetic whatever the input)."""
    total = len(values) + unmeasured
    expected = column_figures_in_python(values, total, k)
    assert same(built().column_figures(values, total, k), expected)
    assert same(column_figures(values, total, k), expected)
    assert list(expected[4]) == ["k", "count", "nan_count", "mean", "stderr", "ci95_low", "ci95_high"]


@given(st.lists(FIGURES | st.floats(allow_nan=False, allow_infinity=False) | HUGE, min_size=1, max_size=60))
def test_a_columns_center_and_spread_are_its_range_aggregates(values: list[float]) -> None:
    """The `<key>.pass@<k>` aggregate's count, sum, mean and variances and section 8's entry
    come from the one computation: the column's are the range aggregate's of its values."""
    summed, mean, variance, sample_variance, entry = column_figures(values, len(values) + 2, 1)
    middle, spreads = center_and_spread(values, len(values) + 2)
    assert spreads is not None
    assert same((middle.sum, middle.mean, middle.count, middle.nan_count), (summed, mean, entry["count"], 2))
    assert same((spreads.variance, spreads.sample_variance), (variance, sample_variance))
    assert same(entry["mean"], mean)


def test_one_figure_has_no_interval_and_two_have_students_t() -> None:
    assert built().column_figures([0.5], 3, 1)[4] == {
        "k": 1,
        "count": 1,
        "nan_count": 2,
        "mean": 0.5,
        "stderr": None,
        "ci95_low": None,
        "ci95_high": None,
    }
    _, mean, _, sample_variance, entry = built().column_figures([1.0, 0.0], 2, 2)
    stderr = math.sqrt(sample_variance) / math.sqrt(2.0)
    assert (entry["stderr"], entry["ci95_low"], entry["ci95_high"]) == (stderr, 0.0, 1.0)
    assert mean + t975(1) * stderr > 1.0  # clipped


@pytest.mark.parametrize("values", [[], [0.5, 1], [True]], ids=["empty", "an int", "a bool"])
def test_a_column_the_kernel_does_not_read_is_left_to_the_twin(values: list[Any]) -> None:
    assert built().column_figures(values, len(values), 1) is None


def test_students_t_is_the_tables() -> None:
    """Every df of the table, past it the normal quantile, and none for df 0."""
    for df in [*range(1, 1_100), 10**6, 2**63]:
        assert bits(built().t975(df)) == bits(t975(df))
    with pytest.raises(ValueError, match="at least one degree of freedom"):
        built().t975(0)


@given(TALLIES, st.integers(0, 4))
def test_a_keys_columns_in_rust_are_the_folds(measured: list[tuple[int, int]], unmeasured: int) -> None:
    """The crate's own columns (`by_k` and a column per k, for a fold written in Rust) are
    `key_figures_of`'s, value by value and figure by figure."""
    with twins_only():
        expected = key_figures_of(measured, unmeasured, None)
    at_k, hat_k = built().key_figures(measured, unmeasured)
    for columns, made in ((expected.at_k, at_k), (expected.hat_k, hat_k)):
        assert len(columns) == len(made)
        for column, (values, (summed, mean, variance, sample_variance, entry)) in zip(columns, made, strict=True):
            assert column.spreads is not None
            assert same(values, column.values)
            assert same((summed, mean), (column.middle.sum, column.middle.mean))
            assert same((variance, sample_variance), (column.spreads.variance, column.spreads.sample_variance))
            assert same(entry, column.entry)


# A range aggregate's percentiles.


@given(st.lists(FLOATS | HUGE, min_size=1, max_size=300).map(sorted) | st.lists(FLOATS, min_size=1, max_size=30))
def test_the_percentiles_are_the_twins(ordered: list[float]) -> None:
    """Sorted lists of any length (every position of section 4's rule), NaN, the
    infinities (0.0 times an infinite difference) and -0.0 included; and lists not sorted,
    which both read at the same places."""
    expected = percentiles_in_python(ordered)
    assert len(expected) == 10
    assert same(built().percentiles(ordered), expected)
    assert same(percentiles(ordered), expected)


def test_the_percentiles_read_only_their_places() -> None:
    """An item the rule does not read may be anything; one it reads must be a float, or the
    twin answers; and an empty list has none."""
    ordered: list[Any] = [float(at) for at in range(99)]
    ordered[3] = "not read"
    assert built().percentiles(ordered) == percentiles_in_python(ordered)
    ordered[98] = 98  # read: p100
    assert built().percentiles(ordered) is None
    assert percentiles(ordered) == percentiles_in_python(ordered)
    assert built().percentiles([]) is None


# Harbor's pass@k.

HARBOR_TALLIES = st.lists(
    st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.sampled_from([0, n]) | st.integers(0, n))),
    min_size=1,
    max_size=60,
) | st.lists(st.sampled_from([(2_000, 0), (2_000, 2_000), (2_000, 1), (2_500, 3)]), min_size=1, max_size=5)


@given(HARBOR_TALLIES)
def test_harbors_pass_at_k_is_the_twins(tallies: list[tuple[int, int]]) -> None:
    expected = harbor_pass_at_k_in_python(tallies)
    assert same(built().harbor_pass_at_k(tallies), expected)
    assert same(harbor_pass_at_k(tallies), expected)


def test_harbors_ks_are_its_own() -> None:
    assert list(built().harbor_pass_at_k([(20, 10)])) == ["2", "4", "5", "8", "10", "15", "16", "20"]
    assert built().harbor_pass_at_k([(1, 1)]) == {}


@pytest.mark.parametrize("tallies", [[], [(3, 4)], [(2**54, 0)], [(2, 1), (3, "1")]], ids=str)
def test_tallies_the_harbor_kernel_does_not_read_are_left_to_the_twin(tallies: list[Any]) -> None:
    assert built().harbor_pass_at_k(tallies) is None


# A float's JSON text.

FINITE_DOUBLES = (
    st.integers(0, 2**64 - 1).map(lambda word: struct.unpack("<d", struct.pack("<Q", word))[0]).filter(math.isfinite)
)
"""Every finite double alike, by its bits: subnormals and huge exponents as often as the rest."""
ROUND_NUMBERS = st.sampled_from(
    [0.0, -0.0, 1e16, 1e15, 1e17, 1e-7, 1e-5, 1e-4, 2.5e-5, 5e-324, 2.2250738585072014e-308, sys.float_info.max, 0.1]
) | st.integers(-(2**63), 2**63).map(float)


@given(st.floats(allow_nan=False, allow_infinity=False) | FINITE_DOUBLES | ROUND_NUMBERS)
def test_a_floats_text_is_orjsons(value: float) -> None:
    """Shortest round-trip digits, ".0" on an integer's, orjson's exponent form ("1e+16",
    "1e-7") past its bounds, "-0.0": the very bytes."""
    expected = orjson.dumps(value)
    assert built().encode_float(value) == expected
    assert encode_float_in_python(value) == expected
    assert encode_float(value) == expected
    assert float(built().encode_float(value)) == value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_float_without_json_text_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="not a finite float"):
        built().encode_float(value)
    with pytest.raises(ValueError, match="not a finite float"):
        encode_float_in_python(value)


# The fold's every output, with the kernels and with their twins.


@given(mixed_logs(late=True))
def test_a_logs_trace_is_the_same_with_the_kernels_or_their_twins(log: bytes) -> None:
    """Every step's outcome and summary revision, every run's stored form, progress and
    summary: the same bytes whichever answers."""
    with twins_only():
        expected = trace(log)
    assert trace(log) == expected


def test_a_log_of_big_runs_is_the_same_with_the_kernels_or_their_twins() -> None:
    sources = [synthetic_run(f"run-{i}", tasks=60, attempts=5, seed=i) for i in range(3)]
    log = b"".join(orjson.dumps(event) + b"\n" for event in interleave(sources, 3))
    with twins_only():
        expected = trace(log)
    assert trace(log) == expected
