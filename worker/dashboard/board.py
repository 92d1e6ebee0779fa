"""The dashboard's state: each run's latest progress event and summary, and who wants to know
when they change.

A record is kept when it is newer for its run than the one held (`events.latest`: a higher
`seq` for progress, `revision` for summaries, the rule the subscribers use). Redelivered
records (a restarted worker publishes outputs again with the same numbers) and older ones
change nothing, so the pages never step back. A tombstone on the compacted summaries topic
drops the run's summary; a run with neither record left is gone.

Every change bumps the board's `version` and stamps the run with it, so a page rendered at
version V asks the live stream for what changed after V and misses nothing in between. Each
open stream is a `Listener` holding the set of runs changed since it last looked (not a queue
of records), so a slow page skips intermediate states instead of falling behind, and holds at
most one entry per run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import replace

from events.latest import Latest, revision, seq
from events.outputs import RunProgress, RunSummary
from worker.dashboard.views import RunRecords


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
    def __init__(self) -> None:
        self.version = 0
        self._runs: dict[str, RunRecords] = {}
        self._versions: dict[str, int] = {}
        self._progress: Latest[RunProgress] = Latest(seq)
        self._summaries: Latest[RunSummary] = Latest(revision)
        self._listeners: set[Listener] = set()

    def __iter__(self) -> Iterator[RunRecords]:
        return iter(list(self._runs.values()))

    def __len__(self) -> int:
        return len(self._runs)

    def get(self, run_id: str) -> RunRecords | None:
        return self._runs.get(run_id)

    def offer_progress(self, record: RunProgress, at: float) -> bool:
        """Keep `record` (published at `at`) if it is the run's newest; whether it was."""
        if not self._progress.offer(record):
            return False
        held = self._runs.get(record.run_id) or RunRecords(record.run_id, first_at=at)
        self._set(replace(held, progress=record, progress_at=at, first_at=min(at, held.first_at or at)))
        return True

    def offer_summary(self, record: RunSummary, at: float) -> bool:
        if not self._summaries.offer(record):
            return False
        held = self._runs.get(record.run_id) or RunRecords(record.run_id, first_at=at)
        self._set(replace(held, summary=record, summary_at=at, first_at=min(at, held.first_at or at)))
        return True

    def drop_summary(self, run_id: str) -> None:
        """The run's summary was deleted (a tombstone)."""
        self._summaries.forget(run_id)
        held = self._runs.get(run_id)
        if held is None or held.summary is None:
            return
        if held.progress is None:
            del self._runs[run_id]
            self._changed(run_id)
        else:
            self._set(replace(held, summary=None, summary_at=None))

    def changed_since(self, version: int) -> list[str]:
        """The runs changed after `version`, the earliest first (removed runs too, once)."""
        return sorted((run for run, at in self._versions.items() if at > version), key=self._versions.__getitem__)

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
        self._runs[records.run_id] = records
        self._changed(records.run_id)

    def _changed(self, run_id: str) -> None:
        self.version += 1
        self._versions[run_id] = self.version
        for listener in self._listeners:
            listener.mark(run_id)
