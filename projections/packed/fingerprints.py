"""The fingerprints of the events a part (a task, or the run header) has applied, kept as one
`bytes` of `PAIR`s, in the order applied: what the store holds with the part, and what the
run's redelivery index (`projections.fold.redelivery`) is rebuilt from on restore.

An event's fingerprint is the 128-bit BLAKE2b digest of its id, as (hi, lo)
(`projections.kernels.fingerprint`); a part's pairs are made anew by each event
(`projections.kernels.with_pair`): one block, where an `array` was two, its object and its
over-allocated buffer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

PAIR: Final = struct.Struct("<QQ")
"""A kept fingerprint: (hi, lo), little-endian, as the store holds it."""
NO_PAIRS: Final = b""
"""The kept fingerprints of a part without events."""


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
