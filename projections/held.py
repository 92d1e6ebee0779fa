"""A run as replay and the worker hold it: its state, and beside it its summary cache.

The state (`projections.fold.run.RunState`) is what the events make and the store keeps;
the cache (`projections.assembly.contributions.SummaryCache`) only saves work, and may be
dropped at any time (a budget, an eviction): the next summary or progress event makes it
again from the state, to the same bytes. So the state never holds it, and whoever holds a
run holds its cache beside it: `Held` in replay, the worker's `CachedRun`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from projections.assembly.contributions import SummaryCache
from projections.fold.run import RunState


class HeldRun(Protocol):
    run: RunState
    summaries: SummaryCache | None
    """None: no cache, or it was dropped."""


@dataclass(slots=True, eq=False)
class Held:
    run: RunState
    summaries: SummaryCache | None = None


def summaries_of(held: HeldRun) -> SummaryCache:
    """The run's summary cache, made when it has none."""
    cache = held.summaries
    if cache is None:
        cache = held.summaries = SummaryCache()
    return cache
