"""The set of event ids a run has applied, kept compact.

Redelivery detection needs every applied event id for the life of the run. A Python set
of strings costs ~110 bytes an id; this table keeps a 128-bit BLAKE2b fingerprint per id
in an open-addressing array, ~32 bytes an id. Two distinct ids are taken for one only if
their fingerprints collide: about 1 in 10**26 for a run of a million events.

Format (`to_bytes`): the table's slots as uint64 pairs in the machine's byte order
(little-endian on every platform we ship for) (hi, lo); hi = 0
marks an empty slot (fingerprints have their lowest hi bit set, so never 0).
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

    __slots__ = ("_mask", "_size", "_slots")

    def __init__(self, capacity: int = _MIN_SLOTS) -> None:
        slots = _MIN_SLOTS
        while slots < capacity * 2:
            slots *= 2
        self._slots = array("Q", bytes(16 * slots))
        self._mask = slots - 1
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __contains__(self, event_id: str) -> bool:
        hi, lo = fingerprint(event_id)
        return self._find(hi, lo) < 0

    def add(self, event_id: str) -> bool:
        """Record `event_id`; False if it was already there (a redelivery)."""
        hi, lo = fingerprint(event_id)
        slot = self._find(hi, lo)
        if slot < 0:
            return False
        self._slots[slot] = hi
        self._slots[slot + 1] = lo
        self._size += 1
        if self._size * 2 > self._mask + 1:
            self._grow()
        return True

    def _find(self, hi: int, lo: int) -> int:
        """The free slot for (hi, lo), or -1 when it is already stored (linear probing)."""
        slots, mask = self._slots, self._mask
        index = hi & mask
        while True:
            at = index * 2
            stored = slots[at]
            if stored == 0:
                return at
            if stored == hi and slots[at + 1] == lo:
                return -1
            index = (index + 1) & mask

    def _grow(self) -> None:
        old = self._slots
        self._slots = array("Q", bytes(16 * (self._mask + 1) * 2))
        self._mask = self._mask * 2 + 1
        for at in range(0, len(old), 2):
            hi = old[at]
            if hi:
                slot = self._find(hi, old[at + 1])
                self._slots[slot] = hi
                self._slots[slot + 1] = old[at + 1]

    def to_bytes(self) -> bytes:
        return self._slots.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> AppliedEvents:
        table = cls.__new__(cls)
        table._slots = array("Q", data)
        table._mask = len(table._slots) // 2 - 1
        table._size = sum(1 for at in range(0, len(table._slots), 2) if table._slots[at])
        return table
