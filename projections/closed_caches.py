"""The summary caches of closed runs that a replay keeps, within a budget of bytes.

Replay holds every run it has seen, since any line may still name it. A run's summary
cache (`projections.assembly.contributions`, the native fold's `NativeRun` keeps its own) is
several times the run's own state (~590 against ~200 bytes a stored attempt on runs of 10
tasks x 5 trials, in the Python fold), and once the run is closed it only speeds up the
revisions its late events make. So the caches of closed runs are kept
while the sum of their estimates (`cache_footprint`) is within the budget, and past it the
cache of the closed run revised least recently is dropped. A run whose cache was dropped
computes its next summary from its state, as a worker does after a restart: the same
bytes, since the cache only holds what the state gives again.

The most recently revised closed run keeps its cache whatever its size, so that the late
events of one big run, which come one after another, each cost what they change.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Protocol

from projections.footprint import cache_footprint
from projections.held import Held

CLOSED_CACHES_BYTES: Final = 64 * 1024 * 1024
"""The default budget, by `cache_footprint`'s estimate (which is from above)."""


class DroppableCache(Protocol):
    """A run's summary cache as the budget sees it: a `NativeRun`, or a `Held` run's (`HeldCache`)."""

    def cache_size(self) -> int:
        """Its estimate in bytes, from above (0: none)."""
        ...

    def drop_cache(self) -> None: ...


@dataclass(frozen=True, slots=True)
class HeldCache:
    """The summary cache of a run of the Python fold, held by `held`."""

    held: Held

    def cache_size(self) -> int:
        return cache_footprint(self.held.run, self.held.summaries)

    def drop_cache(self) -> None:
        self.held.summaries = None


class ClosedCaches:
    """The closed runs holding a summary cache, least recently revised first."""

    __slots__ = ("_held", "budget", "dropped", "held_bytes")

    def __init__(self, budget: int = CLOSED_CACHES_BYTES) -> None:
        self.budget = budget
        self.held_bytes = 0
        """The estimates of the caches held, as taken when each run was last revised."""
        self.dropped = 0
        """Caches dropped so far."""
        self._held: OrderedDict[str, tuple[DroppableCache, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._held

    def revised(self, held: Held) -> None:
        """After an event was applied to `held`'s run (the Python fold's): `used` if it is closed."""
        if held.run.closed:
            self.used(held.run.run_id, HeldCache(held))

    def used(self, run_id: str, cache: DroppableCache) -> None:
        """After closed run `run_id`'s summary was made through `cache`: its cache is now the
        most recently revised, and the oldest are dropped while the caches are over budget."""
        before = self._held.pop(run_id, None)
        if before is not None:
            self.held_bytes -= before[1]
        size = cache.cache_size()
        if not size:
            return
        self._held[run_id] = (cache, size)
        self.held_bytes += size
        while self.held_bytes > self.budget and len(self._held) > 1:
            _, (oldest, size) = self._held.popitem(last=False)
            oldest.drop_cache()
            self.held_bytes -= size
            self.dropped += 1
