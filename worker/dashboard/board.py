"""The dashboard's state: the runs its pages show live, an index of the others, and who wants to
know when they change.

In memory (`RunRecords`: latest progress event and summary) are every open run and the
`recent` closed runs that moved last; a closed run past that bound leaves for the `Index`
(its row, its tasks' verdicts, and where its summary is on the topic), and a page that asks for
it has its summary read back from the topic (`lookup`, bounded in time), the last few kept. So
memory grows with the runs open and the bound, and by about a kilobyte (plus 9 bytes a task)
for each older run, not by their summaries.

A record is kept when it is newer for its run than the one held (`events.latest`'s rule: a
higher `seq` for progress, `revision` for summaries), in memory or in the index. Redelivered
records and older ones change nothing, so the pages never step back. A tombstone on the
compacted summaries topic drops the run's summary; a run with neither record left is gone.

Every change bumps the board's `version` and stamps the run with it, so a page rendered at
version V asks the live stream for what changed after V and misses nothing in between. Event
ids carry the board's `epoch` (when it started): a page that comes back after the dashboard
restarted, or older than the changes the board still remembers (a run's stamp is forgotten
when it leaves memory), is sent everything it shows instead. Each open stream is a `Listener`
holding the set of runs changed since it last looked (not a queue of records), so a slow page
skips intermediate states instead of falling behind, and holds at most one entry per run.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace

from events.outputs import RunProgress, RunSummary
from projections.analysis.history import RunTasks, run_tasks
from worker.dashboard.index import Index, Indexed, Where
from worker.dashboard.lookup import Lookup
from worker.dashboard.views import RunRecords, RunRow, run_row, sort_key

RECENT = 200
"""Closed runs kept in memory by default (EVALSTREAM_DASHBOARD_RECENT_RUNS, `--recent`)."""
LOADED = 16
"""Older runs' summaries kept once read back for a page."""
GONE = 1_000
"""Removed runs whose removal a reconnecting page is still told of one by one."""


class Stamp(int):
    """A board version with its board's epoch. An int wherever the pages take a version (so the
    pages need not know of epochs); written as `EPOCH.VERSION`, in a page and as an event id."""

    epoch: str

    def __new__(cls, version: int, epoch: str) -> Stamp:
        stamp = super().__new__(cls, version)
        stamp.epoch = epoch
        return stamp

    def __str__(self) -> str:
        return f"{self.epoch}.{int(self)}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class Listener:
    """The runs changed since the stream last looked, for one open page."""

    def __init__(self, wants: Callable[[str], bool]) -> None:
        self.wants = wants
        self._changed: dict[str, None] = {}
        self._wake = asyncio.Event()
        self.closed = False

    def mark(self, run_id: str) -> None:
        if self.wants(run_id):
            self._changed[run_id] = None
            self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def changes(self, timeout: float) -> list[str]:
        """The runs changed since the last call, in the order they first changed; waits up to
        `timeout` seconds for one (then: none)."""
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            return []
        self._wake.clear()
        changed, self._changed = list(self._changed), {}
        return changed


class Board:
    def __init__(self, recent: int = RECENT, lookup: Lookup | None = None, epoch: str | None = None) -> None:
        self.version = 0
        self.epoch = epoch if epoch is not None else format(time.time_ns() // 1_000_000, "x")
        self.recent = recent
        self._lookup = lookup
        self._runs: dict[str, RunRecords] = {}
        self._rows: dict[str, RunRow] = {}
        self._keys: dict[str, str] = {}
        """Each row's `sort_key`, made once per change: eviction and the runs page look at them often."""
        self._closed: set[str] = set()
        self._where: dict[str, Where] = {}
        self._tasks: dict[str, RunTasks] = {}
        self._index = Index()
        self._loaded: OrderedDict[str, RunRecords] = OrderedDict()
        self._versions: dict[str, int] = {}
        self._gone: dict[str, int] = {}
        self._floor = 0
        """Changes up to this version may be forgotten (their runs left memory)."""
        self._listeners: set[Listener] = set()

    @property
    def stamp(self) -> Stamp:
        """The board's state: its version, in its epoch."""
        return Stamp(self.version, self.epoch)

    def __len__(self) -> int:
        return len(self._runs) + len(self._index)

    def in_memory(self) -> int:
        return len(self._runs)

    def get(self, run_id: str) -> RunRecords | None:
        """The run's records if in memory (or read back lately: `load`)."""
        return self._runs.get(run_id) or self._loaded.get(run_id)

    def row(self, run_id: str) -> RunRow | None:
        row = self._rows.get(run_id)
        if row is None and (entry := self._index.get(run_id)) is not None:
            return entry.row
        return row

    def rows(self) -> Iterator[RunRow]:
        """Every run's row in runs-page order (`views.sort_key`)."""
        held = sorted(((self._keys[run_id], row) for run_id, row in self._rows.items()), key=lambda pair: pair[0])
        for _, row in heapq.merge(held, self._index.ordered(), key=lambda pair: pair[0]):
            yield row

    def tasks(self) -> list[RunTasks]:
        """Every run with a summary, reduced for `projections.analysis.history`."""
        return [*self._tasks.values(), *self._index.tasks()]

    async def load(self, run_id: str) -> RunRecords | None:
        """The run's records; an indexed run's summary is read back from the topic (at most
        `lookup.READ_TIMEOUT` seconds). None: no such run, or its summary could not be read."""
        held = self.get(run_id)
        if held is not None:
            if run_id in self._loaded:
                self._loaded.move_to_end(run_id)
            return held
        entry = self._index.get(run_id)
        if entry is None or entry.where is None or self._lookup is None:
            return None
        summary = await self._lookup.read(*entry.where)
        if self.get(run_id) is not None:
            return self.get(run_id)  # it came back into memory meanwhile
        if summary is None or summary.run_id != run_id or self._index.get(run_id) is not entry:
            return None
        records = RunRecords(run_id, summary=summary, summary_at=entry.row.moved_at, first_at=entry.row.first_at)
        self._loaded[run_id] = records
        while len(self._loaded) > LOADED:
            self._loaded.popitem(last=False)
        return records

    def offer_progress(self, record: RunProgress, at: float) -> bool:
        """Keep `record` (published at `at`) if it is the run's newest; whether it was. An
        indexed run keeps the number only: its page shows its summary."""
        run_id = record.run_id
        if run_id in self._index:
            return self._index.saw_progress(run_id, record.seq)
        held = self._runs.get(run_id)
        if held is not None and held.progress is not None and held.progress.seq >= record.seq:
            return False
        held = held or RunRecords(run_id, first_at=at)
        self._set(replace(held, progress=record, progress_at=at, first_at=min(at, held.first_at or at)))
        return True

    def offer_summary(self, record: RunSummary, at: float, where: Where | None = None) -> bool:
        """Keep `record` (published at `at`, found at `where` on the topic) if it is the run's newest."""
        run_id = record.run_id
        entry = self._index.get(run_id)
        if entry is not None:
            if record.revision <= entry.revision:
                return False
            self._index.pop(run_id)
            self._loaded.pop(run_id, None)
            held = RunRecords(run_id, first_at=entry.row.first_at)
        else:
            held = self._runs.get(run_id) or RunRecords(run_id, first_at=at)
            if held.summary is not None and held.summary.revision >= record.revision:
                return False
        if where is not None:
            self._where[run_id] = where
        self._tasks[run_id] = run_tasks(record, at)
        self._set(replace(held, summary=record, summary_at=at, first_at=min(at, held.first_at or at)))
        return True

    def drop_summary(self, run_id: str) -> None:
        """The run's summary was deleted (a tombstone)."""
        self._loaded.pop(run_id, None)
        if self._index.pop(run_id) is not None:
            self._changed(run_id)
            self._remove(run_id)
            return
        held = self._runs.get(run_id)
        if held is None or held.summary is None:
            return
        self._where.pop(run_id, None)
        self._tasks.pop(run_id, None)
        if held.progress is None:
            del self._runs[run_id]
            del self._rows[run_id]
            del self._keys[run_id]
            self._closed.discard(run_id)
            self._changed(run_id)
            self._remove(run_id)
        else:
            self._set(replace(held, summary=None, summary_at=None))

    def changed_since(self, event_id: str | None) -> list[str] | None:
        """The runs changed after the state `event_id` names (`stamp`), the earliest first
        (removed runs too); None: the board cannot tell (another epoch, or changes it has
        forgotten since), so the page needs everything it shows."""
        epoch, _, number = (event_id or "").rpartition(".")
        if epoch != self.epoch or not number.isdigit() or not self._floor <= int(number) <= self.version:
            return None
        after = int(number)
        changed = [(at, run) for run, at in (*self._versions.items(), *self._gone.items()) if at > after]
        return [run for _, run in sorted(changed)]

    def listen(self, wants: Callable[[str], bool]) -> Listener:
        listener = Listener(wants)
        self._listeners.add(listener)
        return listener

    def forget(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def close(self) -> None:
        """Wake every stream for the last time: the server is stopping."""
        for listener in self._listeners:
            listener.close()

    def _set(self, records: RunRecords) -> None:
        run_id = records.run_id
        self._runs[run_id] = records
        row = self._rows[run_id] = run_row(records)
        self._keys[run_id] = sort_key(row)
        if row.status == "closed":
            self._closed.add(run_id)
        else:
            self._closed.discard(run_id)
        self._changed(run_id)
        while len(self._closed) > self.recent:
            self._evict(max(self._closed, key=self._keys.__getitem__))

    def _evict(self, run_id: str) -> None:
        """A closed run leaves memory for the index."""
        records = self._runs.pop(run_id)
        self._closed.discard(run_id)
        del self._keys[run_id]
        self._index.put(
            Indexed(
                row=self._rows.pop(run_id),
                where=self._where.pop(run_id, None),
                seq=records.progress.seq if records.progress is not None else 0,
                revision=records.summary.revision if records.summary is not None else 0,
                tasks=self._tasks.pop(run_id, None),
            )
        )
        self._floor = max(self._floor, self._versions.pop(run_id, 0))

    def _remove(self, run_id: str) -> None:
        """A run is gone: a page still showing it hears of it, while it is among the last `GONE`."""
        self._gone[run_id] = self._versions.pop(run_id)
        while len(self._gone) > GONE:
            forgotten = next(iter(self._gone))
            self._floor = max(self._floor, self._gone.pop(forgotten))

    def _changed(self, run_id: str) -> None:
        self.version += 1
        self._versions[run_id] = self.version
        self._gone.pop(run_id, None)
        for listener in self._listeners:
            listener.mark(run_id)
