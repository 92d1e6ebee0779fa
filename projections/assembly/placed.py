"""Per key name, the (n, c) at some places of a run's summary task order, in that order, moved
place by place as tasks change: what Harbor's pass@k and section 8's figures are summed over,
kept between revisions so that one changed task costs its places, not a gather of every task."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import final

from projections.figures.passk import Tally


@final
class PlacedTallies:
    """A plain class, made natively by the compiled fold."""

    __slots__ = ("places", "tallies")

    def __init__(self) -> None:
        self.tallies: dict[str, list[Tally]] = {}
        """Key name -> its (n, c) at its places, in place order."""
        self.places: dict[str, array[int]] = {}
        """Key name -> those places, ascending."""

    def append(self, name: str, place: int, tally: Tally) -> None:
        """Give the key `tally` at `place`, past all of its places (a gather in place order)."""
        places = self.places.get(name)
        if places is None:
            self.places[name] = array("q", [place])
            self.tallies[name] = [tally]
        else:
            places.append(place)
            self.tallies[name].append(tally)

    def put(self, name: str, place: int, had: bool, tally: Tally | None) -> None:
        """Make the key's (n, c) at `place` `tally` (None: none there), where it `had` one."""
        if not had and tally is None:
            return
        places = self.places.get(name)
        if places is None:
            places = self.places[name] = array("q")
            self.tallies[name] = []
        tallies = self.tallies[name]
        at = bisect_left(places, place)
        if not had:
            assert tally is not None
            places.insert(at, place)
            tallies.insert(at, tally)
        elif tally is not None:
            tallies[at] = tally
        else:
            del places[at], tallies[at]
            if not places:
                del self.places[name], self.tallies[name]
