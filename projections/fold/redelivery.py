"""The set of event ids a run has applied, kept compact.

Redelivery detection needs every applied event id for the life of the run. A Python set
of strings costs ~110 bytes an id. Instead each applied event's 128-bit BLAKE2b fingerprint,
(hi, lo), is kept with the task (or run header) whose state the event changed, which is what
gets persisted (`TaskState.events`, `RunState.run_events`, `projections.packed.fingerprints`).
This table only indexes them: an open-addressing array of keys taken from the fingerprints'
`hi` halves at a load of at most 3/4 (`projections.kernels.key_table`). Its size is any
number (slots by key modulo the size), not a power of two, which would leave a sized table
anywhere between 3/8 and 3/4 full.

A slot holding the same key is only a candidate: the whole (hi, lo) pair is then looked for
among the kept fingerprints, those of the event's own part first (where a redelivery's is),
then the whole run's. So two distinct ids are taken for one only if all 128 bits collide,
about 1 in 10**26 for a run of a million events. A new event whose key only equals one held
costs one search of the run, O(its events and tasks).

So the width of a key follows the run's size. Up to `NARROW_KEYS` keys, a key is 4 bytes,
`hi`'s top 31 bits with the lowest set (never 0, which marks an empty slot): a new event
meets an equal key with a chance of (keys held) / 2**31, at most 1 in 32,768, each meeting a
search of at most 65,536 events. That table is ~5.5 bytes an event once a run.started has
sized it, where 8-byte keys were a tenth of the memory of a run of 10 tasks x 5 trials. Past
`NARROW_KEYS` the table is built again with the whole `hi`, 8 bytes (its lowest bit set, as
a fingerprint has it anyway): with 4-byte keys a run of a million events met an equal key
once in ~2,150 events, each a search of a run of up to 16 MB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from projections.kernels import MIN_SLOTS, key_table, slot_bytes
from projections.packed.fingerprints import his, holds

NARROW_KEYS: Final = 1 << 16
"""The most keys a table holds 4 bytes wide; past them, 8."""


class AppliedEvents:
    """Keys of a run's applied fingerprints: `add` says whether an event is new."""

    __slots__ = ("_keys",)

    def __init__(self, capacity: int = MIN_SLOTS // 2) -> None:
        self._keys = key_table(capacity, capacity > NARROW_KEYS)

    @classmethod
    def of_kept(cls, everything: Callable[[], Iterable[bytes]], capacity: int) -> AppliedEvents:
        """The index of a run's kept fingerprints (`everything`, which hold each applied event
        once), with room for `capacity`: what a restore or an undo rebuilds."""
        index = cls(capacity)
        index._index_kept(everything)
        return index

    def __len__(self) -> int:
        return len(self._keys)

    def contains(self, hi: int, lo: int, own: bytes, everything: Callable[[], Iterable[bytes]]) -> bool:
        """Whether the run has applied the event of fingerprint (hi, lo). `own`: the kept
        fingerprints of the part the event changes; `everything`: all the run's kept
        fingerprints, looked through only when `own` does not have a candidate's pair."""
        return self._keys.holds(hi) and _kept(hi, lo, own, everything)

    def add(self, hi: int, lo: int, own: bytes, everything: Callable[[], Iterable[bytes]]) -> bool:
        """Index the event of fingerprint (hi, lo), about to be applied (its pair is kept by
        the caller right after); False if the run has applied it (a redelivery)."""
        keys = self._keys
        if not keys.add(hi):
            if _kept(hi, lo, own, everything):
                return False
            keys.put(hi)  # only its key is shared
        if len(keys) > NARROW_KEYS and not keys.wide:
            self._widen(2 * len(keys), everything)
            self._keys.put(hi)
        return True

    def _widen(self, capacity: int, everything: Callable[[], Iterable[bytes]]) -> None:
        """Index the kept fingerprints again with 8-byte keys, in a table with room for `capacity`."""
        self._keys = key_table(capacity, True)
        self._index_kept(everything)

    def _index_kept(self, everything: Callable[[], Iterable[bytes]]) -> None:
        """Place the key of every kept fingerprint: each stands for a distinct applied event."""
        keys = self._keys
        for pairs in everything():
            for hi in his(pairs):
                keys.put(hi)

    @property
    def table_bytes(self) -> int:
        """The memory of the table: a run.started reserves it for the whole plan."""
        return slot_bytes(self._keys.wide) * self._keys.width

    def reserve(self, capacity: int, everything: Callable[[], Iterable[bytes]]) -> None:
        """Make room for `capacity` ids without growing again (a run.started knows its size);
        `everything`: all the run's kept fingerprints, indexed again if the keys widen."""
        if capacity > NARROW_KEYS and not self._keys.wide:
            self._widen(capacity, everything)
        else:
            self._keys.reserve(capacity)


def _kept(hi: int, lo: int, own: bytes, everything: Callable[[], Iterable[bytes]]) -> bool:
    """Whether the pair is kept: by the event's own part first, where a redelivery's is."""
    return holds(own, hi, lo) or any(holds(pairs, hi, lo) for pairs in everything())
