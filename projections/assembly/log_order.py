"""Items in run log order, kept as items land out of order (late events, tasks refreshed in
any order): a metric output's numeric values, a reward label's trial ids."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from operator import itemgetter
from typing import Any, Final, final


@final
class InOrder:
    """Items in run log order: `seqs` ascending, one item each (seqs are unique)."""

    __slots__ = ("items", "rearranged", "seqs")

    def __init__(self) -> None:
        self.seqs = array("q")
        self.items: list[Any] = []
        self.rearranged = 0
        """How many times items were put before others (anything but appended)."""

    def add(self, new: list[tuple[int, Any]]) -> None:
        """Put the (seq, item) pairs `new` (at least one) in their places: appended when they
        all come after the items there (a run's first summary, an event at the end of the
        log), one by one when few (a late event's), else in one sort."""
        # Seqs are unique, so pairs are sorted by seq alone: a sort of the pairs themselves
        # would compare each pair's heads for equality before it ordered them.
        if not _ascending(new):  # they mostly are (a task's rows are in log order)
            new = sorted(new, key=_seq_of)
        seqs, items = self.seqs, self.items
        if not seqs or new[0][0] > seqs[-1]:
            seqs.fromlist([seq for seq, _ in new])  # sized once, where extend grows per item
            items.extend([item for _, item in new])
            return
        self.rearranged += 1
        if len(new) <= _FEW:
            for seq, item in new:
                at = bisect_right(seqs, seq)
                seqs.insert(at, seq)
                items.insert(at, item)
            return
        merged = sorted([*zip(seqs, items, strict=True), *new], key=_seq_of)
        self.seqs = array("q", [seq for seq, _ in merged])
        self.items = [item for _, item in merged]


def _ascending(pairs: list[tuple[int, Any]]) -> bool:
    """Whether the (seq, item) `pairs` are in ascending order of seq."""
    return all(pairs[at - 1][0] <= pairs[at][0] for at in range(1, len(pairs)))


_seq_of: Final = itemgetter(0)
_FEW: Final = 64
"""Past this many new items at once, one sort of all beats inserting each."""
