"""The fold's compiled kernels, each beside its Python twin: the one seam to `projections/native`.

A few loops of the fold run in compiled code (Rust, the crate `fold-kernels` in
`projections/native`, built by `make install` into `projections._kernels`; docs/build.md says
when it is used): an event id's fingerprint, the table the run's applied
fingerprints are indexed by, a part's fingerprints with one more, the compensated sums over a
list of floats, the per-k columns of pass@k's per-task figures, and a trial id's search among
a task's. Each name below is the kernel where it is built and current, else its twin: the
Python function written beside it, which says what the kernel computes and is the reference
it is tested against, to the bit (tests/projections/test_kernels.py). A kernel may leave an
input to its twin (it answers None: a list holding anything but floats, say); the names
below then call the twin, so a caller never knows which answered. The rest of the fold reaches
the compiled module through this file only.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable
from hashlib import blake2b
from typing import Any, Final, Protocol

from projections import KERNEL_CRATE
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
