"""Coalesced progress: at most one `run.progress` per run per window, within a budget.

A progress event costs a fixed part and O(tasks of its run) (its pass@k equals the
summary's exactly), so the window grows with the work waiting: `interval` while the runs
with unpublished changes have up to `PROGRESS_TASKS` tasks in all, each run's fixed part
counted as `PROGRESS_RUN_TASKS` tasks, proportionally longer above. One big run gets live
progress; ten of them share the same budget, so do thousands of small ones, and progress
takes a bounded share of the worker however many runs are open. At close, and after, a
run's progress is published with each batch whatever the window.
"""

from __future__ import annotations

from collections.abc import Iterable

from events.codec import encode_payload
from projections.assembly.progress import progress
from projections.held import summaries_of
from worker.runtime.cache import CachedRun
from worker.runtime.eval_figures import EvalFigures
from worker.runtime.outputs import Publish

PROGRESS_TASKS = 5000
"""Tasks of progress computed per interval at most, a run's fixed part counted as
`PROGRESS_RUN_TASKS` more (~3 ms of work per 0.2 s, however big the runs)."""
PROGRESS_RUN_TASKS = 16
"""The fixed part of a run's progress event (its statistics' columns, its verdicts, its
encoding), in tasks: what a run of one or two tasks costs is what 10 to 20 more tasks of a big
run cost (`python -m bench.progress --costs`)."""


class Progress:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._pending: dict[str, CachedRun] = {}
        self._pending_tasks = 0
        """Tasks of the runs in `_pending`, as counted when each joined."""
        self.figures = EvalFigures()
        """Each open run's figures as of its last progress event, for /metrics."""

    def changed(self, entries: Iterable[CachedRun], now: float) -> list[Publish]:
        """Make the progress of runs a batch changed pending; the events of those due now."""
        out = []
        for entry in entries:
            if not entry.progress_pending:
                entry.progress_pending = True
                entry.progress_tasks = len(entry.run.tasks) + PROGRESS_RUN_TASKS
                self._pending_tasks += entry.progress_tasks
                self._pending[entry.run.run_id] = entry
            if entry.run.closed or now - entry.progress_at >= self._window():
                out.append(self._publish(entry, now))
        return out

    def due(self, now: float) -> list[tuple[int, Publish]]:
        """(partition, progress event) of each run with unpublished changes whose window is
        over: the window as it stands when called (the runs published shorten it for the next call)."""
        since = now - self._window()
        due = [entry for entry in self._pending.values() if entry.progress_at <= since]
        return [(entry.partition, self._publish(entry, now)) for entry in due]

    def forget(self, partitions: Iterable[int] | None = None) -> None:
        """Drop the pending progress of these partitions' runs (all: None)."""
        dropped = set(partitions) if partitions is not None else None
        for run_id, entry in list(self._pending.items()):
            if dropped is None or entry.partition in dropped:
                entry.progress_pending = False
                self._pending_tasks -= entry.progress_tasks
                del self._pending[run_id]
        self.figures.forget(partitions)

    def _window(self) -> float:
        return self.interval * max(1.0, self._pending_tasks / PROGRESS_TASKS)

    def _publish(self, entry: CachedRun, now: float) -> Publish:
        """The pending progress of `entry` (every caller has it pending), published."""
        run = entry.run
        entry.progress_pending = False
        self._pending_tasks -= entry.progress_tasks
        del self._pending[run.run_id]
        entry.progress_at = now
        # seq = events applied so far: increasing per run, and the same after a restart.
        seq = run.event_count
        payload = progress(run, seq, cache=summaries_of(entry))
        self.figures.update(payload, entry.partition)
        event = encode_payload(payload)
        return Publish("progress", run.run_id.encode(), event, event_id=f"{run.run_id}/progress/{seq}")
