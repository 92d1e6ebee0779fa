"""The set of event ids a run has applied, kept compact.

Redelivery detection needs every applied event id for the life of the run. A Python set
of strings costs ~110 bytes an id; this table keeps a 128-bit BLAKE2b fingerprint per id
in an open-addressing array of (hi, lo) uint64 pairs (hi = 0 marks an empty slot; a
fingerprint's hi always has its lowest bit set), 32 to 64 bytes an id. Two distinct ids
are taken for one only if their fingerprints collide: about 1 in 10**26 for a run of a
million events. The table is an index: the fingerprints themselves are kept with the
task (or run) state of the event they belong to, which is what gets persisted.
"""

from __future__ import annotations

import struct
from array import array
from hashlib import blake2b

_PAIR = struct.Struct("<QQ")
_MIN_SLOTS = 8


def fingerprint(event_id: str) -> tuple[int, int]:
    """A stable 128-bit digest of an event id, as (hi, lo) with hi never 0."""
    hi, lo = _PAIR.unpack(blake2b(event_id.encode(), digest_size=16).digest())
    return hi | 1, lo


class AppliedEvents:
    """Fingerprints of applied event ids: `add` says whether the id is new."""

    __slots__ = ("_limit", "_mask", "_size", "_slots")

    def __init__(self, capacity: int = _MIN_SLOTS // 2) -> None:
        self._size = 0
        self._allocate(capacity)

    def __contains__(self, event_id: str) -> bool:
        return self._probe(*fingerprint(event_id)) < 0

    def add_fingerprint(self, hi: int, lo: int) -> bool:
        """Record an id by its fingerprint; False if it was already there (a redelivery)."""
        at = self._probe(hi, lo)
        if at < 0:
            return False
        self._slots[at] = hi
        self._slots[at + 1] = lo
        self._size += 1
        if self._size > self._limit:
            self.reserve(self._size * 2)
        return True

    def _probe(self, hi: int, lo: int) -> int:
        """The free slot for (hi, lo), or -1 when it is there already (linear probing)."""
        slots, wrap = self._slots, self._mask << 1 | 1
        at = (hi & self._mask) << 1
        while (stored := slots[at]) != 0:
            if stored == hi and slots[at + 1] == lo:
                return -1
            at = (at + 2) & wrap
        return at

    def reserve(self, capacity: int) -> None:
        """Make room for `capacity` ids without growing again (a run.started knows its size)."""
        if capacity <= self._limit:
            return
        old = self._slots
        self._allocate(capacity)
        for at in range(0, len(old), 2):
            if old[at]:
                new = self._probe(old[at], old[at + 1])
                self._slots[new] = old[at]
                self._slots[new + 1] = old[at + 1]

    def _allocate(self, capacity: int) -> None:
        slots = _MIN_SLOTS
        while slots < capacity * 2:  # load factor <= 1/2 keeps probes short
            slots *= 2
        self._slots = array("Q", bytes(16 * slots))
        self._mask = slots - 1
        self._limit = slots // 2
