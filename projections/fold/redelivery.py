"""The set of event ids a run has applied, kept compact.

Redelivery detection needs every applied event id for the life of the run. A Python set
of strings costs ~110 bytes an id. Instead each applied event's 128-bit BLAKE2b fingerprint,
(hi, lo), is kept with the task (or run header) whose state the event changed, which is what
gets persisted (`TaskState.events`, `RunState.run_events`): one `bytes` of `PAIR`s a part,
made anew by each event (`with_pair`), where an `array` was two blocks, its object and its
over-allocated buffer (~130 bytes more a task of 25 events, with its positions'). This
table only indexes them: an open-addressing array of keys taken from the fingerprints' `hi`
halves at a load of at most 3/4. Its size is any number (slots by key modulo the size), not
a power of two, which would leave a sized table anywhere between 3/8 and 3/4 full.

A slot holding the same key is only a candidate: the whole (hi, lo) pair is then looked for
among the kept fingerprints, those of the event's own part first (where a redelivery's is),
then the whole run's. So two distinct ids are taken for one only if all 128 bits collide,
about 1 in 10**26 for a run of a million events. A new event whose key only equals one held
costs one search of the run, O(its events and tasks): 3.5 ms for a run of 200,000 events
and 5,000 tasks.

So the width of a key follows the run's size. Up to `NARROW_KEYS` keys, a key is 4 bytes,
`hi`'s top 31 bits with the lowest set (never 0, which marks an empty slot): a new event
meets an equal key with a chance of (keys held) / 2**31, at most 1 in 32,768, each meeting a
search of at most 65,536 events, ~0.04 us an event averaged. That table is ~5.5 bytes an
event once a run.started has sized it, where 8-byte keys were a tenth of the memory of a run
of 10 tasks x 5 trials. Past `NARROW_KEYS` the table is built again with the whole `hi`, 8
bytes (its lowest bit set, as `fingerprint` makes it anyway): with 4-byte keys a run of a
million events met an equal key once in ~2,150 events (464 searches, each of a run then up
to 16 MB and 25,000 tasks).

The table is `events/native`'s `KeyTable` where that is built, else `Keys`, the same table in
Python and the reference it is tested against: in the compiled fold each of `Keys`' probes
still makes an integer object of the slot it reads (~500 instructions, 3.4 probes an event
on a 40k-trial run), where `KeyTable`'s is a load and a compare.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable, Iterator
from hashlib import blake2b
from typing import Final, Protocol

from events.compiled import NATIVE

PAIR: Final = struct.Struct("<QQ")
"""A kept fingerprint: (hi, lo), little-endian, as the store holds it."""
NO_PAIRS: Final = b""
"""The kept fingerprints of a part without events."""
_BLAKE2B_128: Final = blake2b(digest_size=16)
"""Copied for each id: a copy costs less than a constructor's keyword argument."""
_MIN_SLOTS: Final = 8
NARROW_KEYS: Final = 1 << 16
"""The most keys a table holds 4 bytes wide (`array("I")`: wherever CPython runs on a 32- or
64-bit C int); past them, 8 (`array("Q")`)."""


def digest_of_id(event_id: str) -> tuple[int, int]:
    """A stable 128-bit digest of an event id, as (hi, lo) with hi never 0: `fingerprint`'s
    rule, and `fingerprint` itself where `events/native` is not built."""
    hasher = _BLAKE2B_128.copy()
    hasher.update(event_id.encode())
    hi, lo = PAIR.unpack(hasher.digest())
    return hi | 1, lo


fingerprint: Final[Callable[[str], tuple[int, int]]] = digest_of_id if NATIVE is None else NATIVE.event_fingerprint
"""`digest_of_id`, computed in compiled code when `events/native` is built: one call where
hashlib takes four, 1.3k instructions an event where they took 4.8k (BLAKE2b's rounds in
AVX2 where the CPU has it, chosen at run time; 2.1k without)."""


def _key(hi: int, wide: bool) -> int:
    return hi | 1 if wide else (hi >> 33) | 1


def _slot_bytes(wide: bool) -> int:
    return 8 if wide else 4


def pairs_with(pairs: bytes, hi: int, lo: int) -> bytes:
    """`pairs` and (hi, lo) after them. O(len(pairs)), a copy in C: a part's events are few."""
    return pairs + PAIR.pack(hi, lo)


with_pair: Final[Callable[[bytes, int, int], bytes]] = pairs_with if NATIVE is None else NATIVE.with_pair
"""`pairs_with`, in compiled code where `events/native` is built: the pair written where it
lands, ~600 instructions where packing it first took ~1,400."""


def pair_count(pairs: bytes) -> int:
    return len(pairs) // PAIR.size


def his(pairs: bytes) -> Iterator[int]:
    """The `hi` half of each kept pair, in order."""
    return (hi for hi, _ in PAIR.iter_unpack(pairs))


def holds(pairs: bytes, hi: int, lo: int) -> bool:
    """Whether the kept `pairs` include (hi, lo). O(len(pairs)), in C."""
    needle = PAIR.pack(hi, lo)
    at = pairs.find(needle)
    while at >= 0 and at % PAIR.size:  # a match must start at a pair
        at = pairs.find(needle, at + 1)
    return at >= 0


class KeySet(Protocol):
    """A table of the keys of `hi` halves: `Keys`, or `events/native`'s `KeyTable` where it is built."""

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
    """The table of keys, in Python: an array of slots at a load of at most 3/4, linear
    probing (the reference `events/native`'s `KeyTable` is tested against). `wide`: keys
    are the whole `hi`, 8 bytes, else its top 31 bits, 4 bytes."""

    __slots__ = ("_limit", "_size", "_slots", "wide", "width")
    _slots: array[int]

    def __init__(self, capacity: int, wide: bool = False) -> None:
        self._size = 0
        self.wide = wide
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        """An empty table with room for `capacity` at a load of 3/4: linear probing's inserts
        then average ~2.5 probes over the table's filling, 8.5 at its fullest."""
        self.width = max(_MIN_SLOTS, capacity * 4 // 3 + 1)
        self._slots = array("Q" if self.wide else "I", bytes(_slot_bytes(self.wide)) * self.width)
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
        # The keys placed in a list of machine integers (compiled), then packed: probing
        # the array would box every key it reads and writes.
        width = self.width
        table = [0] * width
        for key in old:
            if key:
                at = key % width
                while table[at]:
                    at = at + 1 if at + 1 < width else 0
                table[at] = key
        self._slots = array(old.typecode, table)


_KEYS: Final[Callable[[int, bool], KeySet]] = Keys if NATIVE is None else NATIVE.KeyTable


class AppliedEvents:
    """Keys of a run's applied fingerprints: `add` says whether an event is new."""

    __slots__ = ("_keys",)

    def __init__(self, capacity: int = _MIN_SLOTS // 2) -> None:
        self._keys = _KEYS(capacity, capacity > NARROW_KEYS)

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
        self._keys = _KEYS(capacity, True)
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
        return _slot_bytes(self._keys.wide) * self._keys.width

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
