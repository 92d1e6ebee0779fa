"""The fold's compiled kernels, each beside its Python twin: the one seam to `projections/native`.

A few loops of the fold run in compiled code (Rust, the crate `fold-kernels` in
`projections/native`, built by `make install` into `projections._kernels`; docs/build.md says
when it is used): an event id's fingerprint, the table the run's applied fingerprints are
indexed by, a part's fingerprints with one more, the compensated sums over a list of floats,
the per-k columns of pass@k's per-task figures, a trial id's search among a task's, and the
figures of SEMANTICS.md sections 2, 4, 6 and 8: a task's pass@k and pass^k figures, a key's
column at one k with its section 8 entry, a range aggregate's percentiles, Harbor's pass@k,
and a float's JSON text as orjson writes it. Each name below is the kernel where it is built
and current, else its twin: the Python function written beside it, which says what the kernel
computes and is the reference it is tested against, to the bit
(tests/projections/test_kernels.py). A kernel may leave an input to its twin (it answers None:
a list holding anything but floats, say); the names below then call the twin, so a caller
never knows which answered. The rest of the fold reaches the compiled module through this file
only.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable
from functools import lru_cache
from hashlib import blake2b
from typing import Any, Final, Protocol

import orjson

from events.nonfinite import wire_float
from projections import KERNEL_CRATE
from projections.figures.t975 import t975
from projections.packed.fingerprints import PAIR
from projections.packed.trial_ids import escaped

KERNELS: Final = KERNEL_CRATE.load()
"""`projections._kernels`, when built from the sources as they are (else None: the twins alone)."""


# An event id's fingerprint.

_BLAKE2B_128: Final = blake2b(digest_size=16)
"""Copied for each id: a copy costs less than a constructor's keyword argument."""


def digest_of_id(event_id: str) -> tuple[int, int]:
    """The 128-bit BLAKE2b digest of an event id's UTF-8 bytes, as (hi, lo) read
    little-endian, with hi's lowest bit set (never 0)."""
    hasher = _BLAKE2B_128.copy()
    hasher.update(event_id.encode())
    hi, lo = PAIR.unpack(hasher.digest())
    return hi | 1, lo


fingerprint: Final[Callable[[str], tuple[int, int]]] = digest_of_id if KERNELS is None else KERNELS.event_fingerprint


# A part's fingerprints with one more.


def pairs_with(pairs: bytes, hi: int, lo: int) -> bytes:
    """`pairs` and (hi, lo) after them, as a new `bytes`."""
    return pairs + PAIR.pack(hi, lo)


with_pair: Final[Callable[[bytes, int, int], bytes]] = pairs_with if KERNELS is None else KERNELS.with_pair


# The table of a run's applied fingerprints.

MIN_SLOTS: Final = 8


def slot_bytes(wide: bool) -> int:
    """The bytes of a slot of a table with keys of `wide` width."""
    return 8 if wide else 4


def _key(hi: int, wide: bool) -> int:
    """The key a fingerprint's `hi` half is placed by: never 0, which marks an empty slot."""
    return hi | 1 if wide else (hi >> 33) | 1


class KeySet(Protocol):
    """A table of the keys of fingerprints' `hi` halves: `Keys`, or the kernel's `KeyTable`."""

    def add(self, hi: int) -> bool: ...

    def put(self, hi: int) -> None: ...

    def holds(self, hi: int) -> bool: ...

    def reserve(self, capacity: int) -> None: ...

    @property
    def width(self) -> int: ...

    @property
    def wide(self) -> bool: ...

    def __len__(self) -> int: ...


class Keys:
    """An open-addressing array of keys at a load of at most 3/4, slots by key modulo the
    width, linear probing. `wide`: keys are the whole `hi` (8 bytes), else its top 31 bits
    (4 bytes)."""

    __slots__ = ("_limit", "_size", "_slots", "wide", "width")
    _slots: array[int]

    def __init__(self, capacity: int, wide: bool = False) -> None:
        self._size = 0
        self.wide = wide
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        """An empty table with room for `capacity` at a load of 3/4: linear probing's inserts
        then average ~2.5 probes over the table's filling, 8.5 at its fullest."""
        self.width = max(MIN_SLOTS, capacity * 4 // 3 + 1)
        self._slots = array("Q" if self.wide else "I", bytes(slot_bytes(self.wide)) * self.width)
        self._limit = self.width * 3 // 4

    def __len__(self) -> int:
        return self._size

    def add(self, hi: int) -> bool:
        """Place `hi`'s key unless a slot holds it already: True when placed."""
        key = _key(hi, self.wide)
        at, seen = self._free(key)
        if not seen:
            self._place(at, key)
        return not seen

    def put(self, hi: int) -> None:
        """Place `hi`'s key, known to stand for a fingerprint not indexed yet, even if a slot holds it."""
        key = _key(hi, self.wide)
        self._place(self._free(key)[0], key)

    def holds(self, hi: int) -> bool:
        """Whether a slot holds `hi`'s key."""
        return self._free(_key(hi, self.wide))[1]

    def _free(self, key: int) -> tuple[int, bool]:
        """The free slot `key` probes to, and whether a slot on the way holds it."""
        slots, width = self._slots, self.width
        at = key % width
        seen = False
        while (stored := slots[at]) != 0:
            seen = seen or stored == key
            at = at + 1 if at + 1 < width else 0
        return at, seen

    def _place(self, at: int, key: int) -> None:
        self._slots[at] = key
        self._size += 1
        if self._size > self._limit:
            self.reserve(self._size * 2)

    def reserve(self, capacity: int) -> None:
        """Make room for `capacity` keys without growing again."""
        if capacity <= self._limit:
            return
        old = self._slots
        self._allocate(capacity)
        # Placed in a list of integers, then packed: probing the array would make an
        # integer object of every key it reads and writes.
        width = self.width
        table = [0] * width
        for key in old:
            if key:
                at = key % width
                while table[at]:
                    at = at + 1 if at + 1 < width else 0
                table[at] = key
        self._slots = array(old.typecode, table)


key_table: Final[Callable[[int, bool], KeySet]] = Keys if KERNELS is None else KERNELS.KeyTable
"""An empty table with room for `capacity` keys, 8 bytes wide or 4."""


# The compensated sums over a list of floats: CPython 3.12's `sum` of floats (Neumaier).

_SUMMED_FROM: Final = 10
"""The kernel sums a list of floats this long or longer; a shorter one costs less to sum
here than the call of the kernel does."""
_FILTERED_FROM: Final = 2
"""The same for the kernels that make a float object a value here (the finite values, the
squares): from two values on, the kernel costs less."""
_RUNNING_SUM: Final[Any] = None if KERNELS is None else KERNELS.running_sum
_FINITE_RUNNING_SUM: Final[Any] = None if KERNELS is None else KERNELS.finite_running_sum
_SQUARES_RUNNING_SUM: Final[Any] = None if KERNELS is None else KERNELS.squares_running_sum


def running_sum(values: Iterable[float], total: float, compensation: float) -> tuple[float, float]:
    """The running sum and compensation after adding `values` to `total` and `compensation`
    (`projections.figures.aggregates.compensated_sum` finishes it)."""
    if _RUNNING_SUM is not None and isinstance(values, list) and len(values) >= _SUMMED_FROM:
        summed: tuple[float, float] | None = _RUNNING_SUM(values, total, compensation)
        if summed is not None:
            return summed
    return running_sum_in_python(values, total, compensation)


def finished_sum(total: float, compensation: float) -> float:
    """The sum `running_sum` was keeping."""
    # As CPython: adding a zero compensation would turn a -0.0 sum into 0.0, and a
    # non-finite one (after an infinite or overflowed sum) would turn the sum into NaN.
    if compensation and not (math.isinf(compensation) or math.isnan(compensation)):
        total += compensation
    return total


def running_sum_in_python(values: Iterable[float], total: float, compensation: float) -> tuple[float, float]:
    """`running_sum`'s twin: Python/bltinmodule.c, builtin_sum_impl, float path."""
    # `sum` starts from the int 0 and takes the first float x as `0 + x`, uncompensated.
    # Starting from 0.0 and compensating x too gives the same result: for a finite x that
    # step adds 0.0 to the compensation, and after a non-finite x the sum stays non-finite,
    # so its compensation is never added.
    for value in values:
        step = total + value
        # abs() written out, with its branches for every double, NaN included (its
        # comparisons are false either way, and its step is NaN on both): the loop runs
        # once per value of every aggregate, and a call costs as much as the arithmetic.
        if (total if total >= 0.0 else -total) >= (value if value >= 0.0 else -value):
            compensation += (total - step) + value
        else:
            compensation += (value - step) + total
        total = step
    return total, compensation


def finite_values(values: Iterable[float]) -> list[float]:
    """The finite ones of `values`, in their order. Written as a loop the compiled fold makes
    C of (`isinf` and `isnan` are C there): `filter(math.isfinite, ...)` would call a Python
    builtin for each value."""
    return [value for value in values if not (math.isinf(value) or math.isnan(value))]


def finite_running_sum(values: Iterable[float], total: float, compensation: float) -> tuple[list[float], float, float]:
    """The finite ones of `values` in their order, and their `running_sum` from `total` and `compensation`."""
    if _FINITE_RUNNING_SUM is not None and isinstance(values, list) and len(values) >= _FILTERED_FROM:
        summed: tuple[list[float], float, float] | None = _FINITE_RUNNING_SUM(values, total, compensation)
        if summed is not None:
            return summed
    return finite_running_sum_in_python(values, total, compensation)


def finite_running_sum_in_python(
    values: Iterable[float], total: float, compensation: float
) -> tuple[list[float], float, float]:
    """`finite_running_sum`'s twin."""
    finite = finite_values(values)
    total, compensation = running_sum_in_python(finite, total, compensation)
    return finite, total, compensation


def squares_running_sum(values: list[float], mean: float) -> tuple[float, float]:
    """The `running_sum` of the squared deviations of `values` from `mean`, from zero."""
    if _SQUARES_RUNNING_SUM is not None and len(values) >= _FILTERED_FROM:
        summed: tuple[float, float] | None = _SQUARES_RUNNING_SUM(values, mean)
        if summed is not None:
            return summed
    return squares_running_sum_in_python(values, mean)


def squares_running_sum_in_python(values: list[float], mean: float) -> tuple[float, float]:
    """`squares_running_sum`'s twin: each square `square`'s."""
    try:
        deviations = [math.pow(value - mean, 2.0) for value in values]  # `square`, written out
    except OverflowError:  # one square past the largest double: each made so by `square`
        deviations = [square(value - mean) for value in values]
    return running_sum_in_python(deviations, 0.0, 0.0)


def square(value: float) -> float:
    """`value ** 2` as Python computes it, and +Infinity where Python raises OverflowError
    (a finite square past the largest double): IEEE's result, which SEMANTICS.md section 4
    asks for. `math.pow(value, 2.0)` is the same C `pow` as `**`, to the bit and with the
    same OverflowError (`value * value` differs from it in the last bit of some values)."""
    try:
        return math.pow(value, 2.0)
    except OverflowError:
        return math.inf


# pass@k's per-task figures as one column per k.

_TRANSPOSED: Final[Any] = None if KERNELS is None else KERNELS.transposed


def transposed(figures: list[tuple[float, ...]]) -> list[list[float]]:
    """Column k (0-based) of `figures` for each k below the longest: the k-th item of each
    tuple longer than k, in the order of `figures` (the very float objects)."""
    if _TRANSPOSED is not None:
        columns: list[list[float]] | None = _TRANSPOSED(figures)
        if columns is not None:
            return columns
    return transposed_in_python(figures)


def transposed_in_python(figures: list[tuple[float, ...]]) -> list[list[float]]:
    """`transposed`'s twin."""
    if not figures:
        return []
    # Up to the shortest tuple every one has an item: those columns are the tuples
    # transposed (most runs give every task the same n). Past it, column k takes the
    # tuples longer than k.
    columns = [list(column) for column in zip(*figures, strict=False)]
    columns += [[row[k] for row in figures if len(row) > k] for k in range(len(columns), max(map(len, figures)))]
    return columns


# A trial id's index among a task's (`projections.packed.trial_ids`).

_TRIAL_INDEX: Final[Any] = None if KERNELS is None else KERNELS.trial_index


def trial_index(held: str, trial_id: str) -> int:
    """The index of `trial_id` among the ids `held`; when it is not held, -1 minus the number
    of ids (so the index it would take is `-1 - trial_index(...)`, without counting them
    again)."""
    if _TRIAL_INDEX is not None:
        found: int | None = _TRIAL_INDEX(held, trial_id)
        if found is not None:
            return found
    return trial_index_in_python(held, trial_id)


def trial_index_in_python(held: str, trial_id: str) -> int:
    """`trial_index`'s twin: one search for the NUL-bounded id, and its index the NULs before it."""
    at = held.find(f"\0{escaped(trial_id)}\0")
    return -held.count("\0") if at < 0 else held.count("\0", 0, at)


# pass@k's and pass^k's figures of a task, from its (n, c) (SEMANTICS.md sections 2 and 8).

_PASS_AT_K_ESTIMATES: Final[Any] = None if KERNELS is None else KERNELS.pass_at_k_estimates
_PASS_HAT_K_ESTIMATES: Final[Any] = None if KERNELS is None else KERNELS.pass_hat_k_estimates


def pass_at_k_estimates(n: int, c: int) -> tuple[float, ...]:
    """A task's pass@k for k = 1..n (`pass_at_k_estimates_in_python`)."""
    if _PASS_AT_K_ESTIMATES is not None:
        figures: tuple[float, ...] | None = _PASS_AT_K_ESTIMATES(n, c)
        if figures is not None:
            return figures
    return pass_at_k_estimates_in_python(n, c)


def pass_at_k_estimates_in_python(n: int, c: int) -> tuple[float, ...]:
    """`pass_at_k_estimates`' twin: 1 - C(n-c, k) / C(n, k) for k = 1..n.

    The product form 1 - prod_{i=n-c+1..n} (1 - k/i), i ascending, as the NeMo evaluator
    computes it, so the floats agree with it to the last bit; 1.0 when n - c < k. (The kernel
    takes 0 <= c <= n <= 2^53, where `k / i` of two ints is one rounding of doubles.)
    """
    figures: list[float] = []
    for k in range(1, n + 1):
        if n - c < k:
            figures.append(1.0)
            continue
        product = 1.0
        for i in range(n - c + 1, n + 1):
            product *= 1.0 - k / i
        figures.append(1.0 - product)
    return tuple(figures)


def pass_hat_k_estimates(n: int, c: int) -> tuple[float, ...]:
    """A task's pass^k for k = 1..n (`pass_hat_k_estimates_in_python`)."""
    if _PASS_HAT_K_ESTIMATES is not None:
        figures: tuple[float, ...] | None = _PASS_HAT_K_ESTIMATES(n, c)
        if figures is not None:
            return figures
    return pass_hat_k_estimates_in_python(n, c)


def pass_hat_k_estimates_in_python(n: int, c: int) -> tuple[float, ...]:
    """`pass_hat_k_estimates`' twin (SEMANTICS.md section 8): prod_{i=0..k-1} (c-i)/(n-i).

    Multiplied in that order, each k's product extending the one before (the same floats as
    computing each k afresh); 0.0 when c < k, where the product would reach -0.0.
    """
    figures: list[float] = []
    product = 1.0
    for i in range(n):
        if c <= i:
            figures.extend([0.0] * (n - i))
            break
        product *= (c - i) / (n - i)
        figures.append(product)
    return tuple(figures)


# A key's column at one k: its center, spread and section 8 entry.

ColumnFigures = tuple[float, float, float, float | None, dict[str, Any]]
"""A column's compensated sum, mean, variance, sample variance (None for one value) and
section 8 entry (`{"k", "count", "nan_count", "mean", "stderr", "ci95_low", "ci95_high"}`)."""

_COLUMN_FIGURES: Final[Any] = None if KERNELS is None else KERNELS.column_figures


def column_figures(values: list[float], total: int, k: int) -> ColumnFigures:
    """The figures of the column at `k` of a key's per-task figures `values` (not empty)
    among `total` tasks (`column_figures_in_python`)."""
    if _COLUMN_FIGURES is not None:
        figures: ColumnFigures | None = _COLUMN_FIGURES(values, total, k)
        if figures is not None:
            return figures
    return column_figures_in_python(values, total, k)


def column_figures_in_python(values: list[float], total: int, k: int) -> ColumnFigures:
    """`column_figures`' twin: the range aggregate's center and spread of `values`, known to
    be finite (`projections.figures.aggregates`: compensated sums, the variances over count
    and count - 1), and section 8's entry from them. The standard error is the sample
    standard deviation over sqrt(count): one figure per task, so it is clustered by task;
    the interval is mean +- t x SE with Student's t at count - 1 degrees of freedom, clipped
    to [0, 1]. The tasks without a figure count as NaN."""
    count = len(values)
    summed = finished_sum(*running_sum(values, 0.0, 0.0))
    mean = summed / count
    variance, sample_variance = variances(finished_sum(*squares_running_sum(values, mean)), count)
    stderr = low = high = None
    if sample_variance is not None:
        # float(): C's sqrt of the count as a float, which `math.sqrt` takes an int as too.
        stderr = math.sqrt(sample_variance) / math.sqrt(float(count))
        margin = t975(count - 1) * stderr
        low, high = clip(mean - margin), clip(mean + margin)
    entry = {
        "k": k,
        "count": count,
        "nan_count": max(total - count, 0),
        "mean": mean,
        "stderr": stderr,
        "ci95_low": low,
        "ci95_high": high,
    }
    return summed, mean, variance, sample_variance, entry


def variances(squares: float, count: int) -> tuple[float, float | None]:
    """The population and sample variance (None below two values) of `count` values whose
    squared deviations from their mean sum to `squares`."""
    return squares / count, squares / (count - 1) if count > 1 else None


def clip(value: float) -> float:
    """`value` within [0, 1] (NaN: 0.0)."""
    return min(1.0, max(0.0, value))


# A range aggregate's percentiles (SEMANTICS.md section 4).

PERCENTILES: Final = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
_LABELS: Final = tuple(f"p{p}" for p in PERCENTILES)
_PERCENTILES: Final[Any] = None if KERNELS is None else KERNELS.percentiles


def percentiles(ordered: list[float]) -> dict[str, float | str]:
    """A range aggregate's `percentiles` record of the sorted, non-empty `ordered`
    (`percentiles_in_python`)."""
    if _PERCENTILES is not None:
        figures: dict[str, float | str] | None = _PERCENTILES(ordered)
        if figures is not None:
            return figures
    return percentiles_in_python(ordered)


def percentiles_in_python(ordered: list[float]) -> dict[str, float | str]:
    """`percentiles`' twin: "p10" to "p100" by section 4's rule, the value at position
    p/100 * (n + 1) - 1 among the n sorted values, the first or last at or past an end, else
    interpolated toward the next value; a non-finite one as its wire string."""
    figures: dict[str, float | str] = {}
    for label, (below, fraction) in zip(_LABELS, _positions(len(ordered)), strict=True):
        value = ordered[below]
        if fraction is not None:
            # Interpolated even at a whole position (fraction 0.0), as section 4's rule
            # reads: 0.0 times an infinite difference is NaN, and -0.0 + 0.0 is 0.0.
            value += fraction * (ordered[below + 1] - value)
        figures[label] = value if not (math.isinf(value) or math.isnan(value)) else wire_float(value)
    return figures


@lru_cache(maxsize=4096)
def _positions(n: int) -> tuple[tuple[int, float | None], ...]:
    """For each of `PERCENTILES`, where section 4 puts it among n sorted values: (that end,
    None) at or past an end, else (the index below, the fraction of the way to the next
    value). They depend on n alone: computed once per n."""
    positions: list[tuple[int, float | None]] = []
    for p in PERCENTILES:
        position = p / 100 * (n + 1) - 1
        if position <= 0:
            positions.append((0, None))
        elif position >= n - 1:
            positions.append((n - 1, None))
        else:
            below = int(position)
            positions.append((below, position - below))
    return tuple(positions)


# Harbor's pass@k (SEMANTICS.md section 6).

_HARBOR_PASS_AT_K: Final[Any] = None if KERNELS is None else KERNELS.harbor_pass_at_k


def harbor_pass_at_k(tallies: list[tuple[int, int]]) -> dict[str, float]:
    """Harbor's pass@k per k of a key whose tasks have the (n, c) `tallies` (not empty), in
    task order (`harbor_pass_at_k_in_python`)."""
    if _HARBOR_PASS_AT_K is not None:
        figures: dict[str, float] | None = _HARBOR_PASS_AT_K(tallies)
        if figures is not None:
            return figures
    return harbor_pass_at_k_in_python(tallies)


def harbor_pass_at_k_in_python(tallies: list[tuple[int, int]]) -> dict[str, float]:
    """`harbor_pass_at_k`'s twin: for each of Harbor's ks, the mean of the tasks' estimates,
    added in task order as Python >= 3.12's `sum` adds, keyed by str(k). Each distinct
    (n, c) is estimated once per k: a run's tasks share a few."""
    ks = harbor_k_values(min(n for n, _ in tallies))
    figures = {}
    for k in ks:
        estimated: dict[tuple[int, int], float] = {}
        for tally in tallies:
            if tally not in estimated:
                estimated[tally] = harbor_estimate(tally[0], tally[1], k)
        total, compensation = running_sum([estimated[tally] for tally in tallies], 0.0, 0.0)
        figures[str(k)] = finished_sum(total, compensation) / len(tallies)
    return figures


@lru_cache(maxsize=1024)
def harbor_k_values(smallest_n: int) -> tuple[int, ...]:
    """Harbor's ks: 2, 4, 8, ... and 5, 10, 15, ..., up to `smallest_n`; they depend on it
    alone, so they are made once per value."""
    ks = set(range(5, smallest_n + 1, 5))
    k = 2
    while k <= smallest_n:
        ks.add(k)
        k *= 2
    return tuple(sorted(ks))


@lru_cache(maxsize=65_536)
def harbor_estimate(n: int, c: int, k: int) -> float:
    """Harbor's per-task pass@k: 1 - prod(i = 0..k-1) (n-c-i)/(n-i), multiplied in that
    order (not section 2's product form); 1.0 when n - c < k."""
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(k):
        product *= (n - c - i) / (n - i)
    return 1.0 - product


# A float's JSON text, as orjson writes it.


def encode_float_in_python(value: float) -> bytes:
    """`encode_float`'s twin: `orjson.dumps(value)` of a finite float (a ValueError for NaN
    and the infinities, which JSON has no text for; orjson writes them as null)."""
    if math.isinf(value) or math.isnan(value):
        raise ValueError(f"{value} is not a finite float: JSON has no text for it")
    return orjson.dumps(value)


encode_float: Final[Callable[[float], bytes]] = encode_float_in_python if KERNELS is None else KERNELS.encode_float
"""The JSON text of a finite float, byte for byte orjson's (for an encoder of summaries
written natively; orjson formats with the `zmij` crate, and so does the kernel)."""


# The native fold: a run's state, its events applied from their bytes or their models, and
# its summary, in Rust (`projections/native/src/fold`), held to the Python fold by
# tests/projections/test_native_fold.py. None where the kernels are not built: the Python
# fold is then the only one.


def native_fold() -> Any | None:
    """The kernels' module, which holds the native fold (its `NativeRun` and `FoldReader`);
    None where the kernels are not built."""
    return KERNELS
