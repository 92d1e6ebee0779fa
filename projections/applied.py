"""The set of event ids a run has applied, kept compact.

Redelivery detection needs every applied event id for the life of the run. A Python set
of strings costs ~110 bytes an id. Instead each applied event's 128-bit BLAKE2b fingerprint,
(hi, lo), is kept with the task (or run header) whose state the event changed, which is what
gets persisted (`TaskState.events`, `RunState.run_events`); this table only indexes them: an
open-addressing array of the fingerprints' `hi` halves (uint64, 0 marks an empty slot: a
fingerprint's hi always has its lowest bit set), 16 to 32 bytes an event at a load of at
most 1/2.

A slot holding the same `hi` is only a candidate: the whole (hi, lo) pair is then looked for
among the kept fingerprints, those of the event's own part first (where a redelivery's is),
then the whole run's. So two distinct ids are taken for one only if all 128 bits collide,
about 1 in 10**26 for a run of a million events; ids that share only `hi` (1 in 2**64 a pair)
cost one search of the run.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable
from hashlib import blake2b

_PAIR = struct.Struct("<QQ")
_MIN_SLOTS = 8


def fingerprint(event_id: str) -> tuple[int, int]:
    """A stable 128-bit digest of an event id, as (hi, lo) with hi never 0."""
    hi, lo = _PAIR.unpack(blake2b(event_id.encode(), digest_size=16).digest())
    return hi | 1, lo


def holds(pairs: array[int], hi: int, lo: int) -> bool:
    """Whether the (hi, lo) pairs of `pairs` include (hi, lo). O(len(pairs)), in C."""
    data = pairs.tobytes()
    needle = array("Q", (hi, lo)).tobytes()
    at = data.find(needle)
    while at >= 0 and at % len(needle):  # a match must start at a pair
        at = data.find(needle, at + 1)
    return at >= 0


class AppliedEvents:
    """The `hi` halves of a run's applied fingerprints: `add` says whether an event is new."""

    __slots__ = ("_limit", "_mask", "_size", "_slots")

    def __init__(self, capacity: int = _MIN_SLOTS // 2) -> None:
        self._size = 0
        self._allocate(capacity)

    def __len__(self) -> int:
        return self._size

    def contains(self, hi: int, lo: int, own: array[int], everything: Callable[[], Iterable[array[int]]]) -> bool:
        """Whether the run has applied the event of fingerprint (hi, lo). `own`: the kept
        fingerprints of the part the event changes; `everything`: all the run's kept
        fingerprints, looked through only when `own` does not have a candidate's pair."""
        return self._free(hi, lo, own, everything) < 0

    def add(self, hi: int, lo: int, own: array[int], everything: Callable[[], Iterable[array[int]]]) -> bool:
        """Index the event of fingerprint (hi, lo), about to be applied (its pair is kept by
        the caller right after); False if the run has applied it (a redelivery)."""
        at = self._free(hi, lo, own, everything)
        if at < 0:
            return False
        self._put(at, hi)
        return True

    def insert(self, hi: int) -> None:
        """Index a fingerprint already kept and known to be distinct (a rebuild from the
        kept fingerprints, which hold each applied event once)."""
        self._put(self._empty(hi), hi)

    def _free(self, hi: int, lo: int, own: array[int], everything: Callable[[], Iterable[array[int]]]) -> int:
        """The free slot for `hi`, or -1 when the pair is kept already (linear probing)."""
        slots, mask = self._slots, self._mask
        at = hi & mask
        candidate = False
        while (stored := slots[at]) != 0:
            candidate = candidate or stored == hi
            at = (at + 1) & mask
        if candidate and (holds(own, hi, lo) or any(holds(pairs, hi, lo) for pairs in everything())):
            return -1
        return at

    def _empty(self, hi: int) -> int:
        slots, mask = self._slots, self._mask
        at = hi & mask
        while slots[at]:
            at = (at + 1) & mask
        return at

    def _put(self, at: int, hi: int) -> None:
        self._slots[at] = hi
        self._size += 1
        if self._size > self._limit:
            self.reserve(self._size * 2)

    def reserve(self, capacity: int) -> None:
        """Make room for `capacity` ids without growing again (a run.started knows its size)."""
        if capacity <= self._limit:
            return
        old = self._slots
        self._allocate(capacity)
        for hi in old:
            if hi:
                self._slots[self._empty(hi)] = hi

    def _allocate(self, capacity: int) -> None:
        slots = _MIN_SLOTS
        while slots < capacity * 2:  # load factor <= 1/2 keeps probes short
            slots *= 2
        self._slots = array("Q", bytes(8 * slots))
        self._mask = slots - 1
        self._limit = slots // 2
