"""The runs a worker holds in memory: a cache over the stored state, with two bounds.

Once their changes are written, at most `capacity` runs stay, and runs whose estimated
memory (`projections.footprint`) comes to at most `budget` bytes in all. Past either, the least
recently used runs leave, closed runs first (a closed run gets only late events; an open
one is about to get its next). The byte bound is the one that matters: many small runs
fit where a few big ones do, so a worker with thousands of small runs open holds them
all instead of reading each back from the store at its next event. A run whose changes
are not in the store yet (changed since its partition's last checkpoint, or in a
checkpoint still waiting for its outputs) or whose progress is not published yet is
pinned: it stays until they are out, since the store would restore it without them. So
the cache holds those bounds plus the runs touched by the events of each partition's last
two checkpoints, which the engine's backpressure bounds (`worker.runtime.engine`). A run
that left is restored from the store on its next event.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from projections.assembly.contributions import SummaryCache
from projections.fold.declarations import Declarations
from projections.footprint import footprint, footprints
from projections.held import FoldState
from projections.storage import ArchiveRef


@dataclass(slots=True, eq=False)
class CachedRun:
    run: FoldState
    partition: int
    """The events partition the run's events come from (its key's), where its records go."""
    summaries: SummaryCache | None = None
    """What its summaries and progress keep between events (`projections.held`): dropped with it."""
    unwritten: int = 0
    """Checkpoints (being gathered, or taken and not yet written) that hold changes of the run."""
    progress_pending: bool = False
    """Changes not yet in a published progress event."""
    progress_tasks: int = 0
    """Its tasks when it joined the runs with unpublished progress, plus the fixed part of a
    progress event (the processor's budget counts both)."""
    closed: bool = False
    """Whether the cache files it with the closed runs."""
    retired: ArchiveRef | None = None
    """The archive record the store's marker names in place of the run's header: its next
    change writes the tasks it changed and the marker again (`worker.runtime.changes`)."""
    retired_with: Declarations | None = None
    """The declarations the archive record holds: a change of them (a first run.started after
    the retirement) writes the whole run back instead."""
    whole: bool = False
    """It changed while its retirement was being written, from parts the marker has replaced
    since: its next change writes every part back."""

    @property
    def pinned(self) -> bool:
        return self.unwritten > 0 or self.progress_pending


class RunCache:
    def __init__(self, capacity: int, budget: int) -> None:
        """`capacity`: most runs held; `budget`: most bytes of runs held, by `footprint`."""
        self.capacity = capacity
        self.budget = budget
        self.evicted = 0
        """Runs that left, since the worker started."""
        self.held_bytes = 0
        """The footprint of the runs held after the last `evict`."""
        self._open: OrderedDict[str, CachedRun] = OrderedDict()
        self._closed: OrderedDict[str, CachedRun] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open) + len(self._closed)

    def __iter__(self) -> Iterator[CachedRun]:
        yield from self._open.values()
        yield from self._closed.values()

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._open or run_id in self._closed

    def peek(self, run_id: str) -> CachedRun | None:
        """The run if held, leaving its place in the order as it is."""
        return self._open.get(run_id) or self._closed.get(run_id)

    def get(self, run_id: str) -> CachedRun | None:
        """The run, now the most recently used, if held."""
        for held in (self._open, self._closed):
            entry = held.get(run_id)
            if entry is not None:
                held.move_to_end(run_id)
                return entry
        return None

    def add(self, entry: CachedRun) -> None:
        """Hold a run (eviction waits for `evict`, so an entry in use is never dropped)."""
        entry.closed = entry.run.closed
        (self._closed if entry.closed else self._open)[entry.run.run_id] = entry

    def refile(self, entry: CachedRun) -> None:
        """File a run that has just closed with the closed runs."""
        if entry.run.closed and not entry.closed:
            del self._open[entry.run.run_id]
            self.add(entry)

    def evict(self) -> list[str]:
        """Drop unpinned runs, least recently used first, closed before open, down to
        `capacity` runs and `budget` bytes; returns their ids. Footprints are taken afresh
        (runs grow between two calls): O(runs held), once a checkpoint."""
        count, total = len(self), footprints(self)
        gone: list[str] = []
        for held in (self._closed, self._open):
            victims = []
            for run_id, entry in held.items():
                if count <= self.capacity and total <= self.budget:
                    break
                if not entry.pinned:
                    victims.append(run_id)
                    count -= 1
                    total -= footprint(entry.run, entry.summaries)
            for run_id in victims:
                del held[run_id]
            gone += victims
        self.evicted += len(gone)
        self.held_bytes = total
        return gone

    def drop(self, partitions: set[int]) -> None:
        """Drop the runs of these events partitions, pinned or not (their changes are redone
        by whoever reads the partitions next)."""
        for held in (self._open, self._closed):
            for run_id in [run_id for run_id, entry in held.items() if entry.partition in partitions]:
                del held[run_id]

    def clear(self) -> None:
        self._open.clear()
        self._closed.clear()
