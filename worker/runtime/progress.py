"""Coalesced progress: at most one `run.progress` per run per window, within a budget, and
every run of a partition in the same checkpoint.

A progress event costs a fixed part and O(tasks of its run) (its pass@k equals the
summary's exactly), so the window grows with the work waiting: `interval` while the runs
with unpublished changes have up to `PROGRESS_TASKS` tasks in all, each run's fixed part
counted as `PROGRESS_RUN_TASKS` tasks, proportionally longer above. One big run gets live
progress; ten of them share the same budget, so do thousands of small ones, and progress
takes a bounded share of the worker however many runs are open. At close, and after, a
run's progress is published with each batch whatever the window.

**One window a partition.** A progress event is readable once the checkpoint that holds it
commits, and the engine seals a checkpoint as soon as it holds progress
(`worker.runtime.engine`). So the window is kept per events partition, not per run: when a
partition's window is over, the progress of every run of it with unpublished changes is
made at once, with the batch that finds it over (`changed`) or before the next fetch
(`due`). A partition's open runs then start one checkpoint a window however many they are,
where windows of their own, each ending at another instant, would start one at every
instant. A partition idle for a window publishes the progress of its next change at once.
A partition's windows are at least a window apart, and so are two progress events of one
of its open runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from projections.held import progress_bytes, task_count
from worker.runtime.cache import CachedRun
from worker.runtime.eval_figures import EvalFigures
from worker.runtime.outputs import Publish

PROGRESS_TASKS = 5000
"""Tasks of progress computed per interval at most, a run's fixed part counted as
`PROGRESS_RUN_TASKS` more (~3 ms of work a window, however big the runs)."""
PROGRESS_RUN_TASKS = 16
"""The fixed part of a run's progress event (its statistics' columns, its verdicts, its
encoding), in tasks: what a run of one or two tasks costs is what 10 to 20 more tasks of a big
run cost (`python -m bench.progress --costs`)."""


class Progress:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._pending: dict[int, dict[str, CachedRun]] = {}
        """Partition -> its runs with unpublished changes, by run id."""
        self._pending_tasks = 0
        """Tasks of the runs in `_pending`, as counted when each joined."""
        self._published: dict[int, float] = {}
        """Partition -> when its last window's progress was made (the worker's monotonic clock)."""
        self.figures = EvalFigures()
        """Each open run's figures as of its last progress event, for /metrics."""

    def changed(self, entries: Iterable[CachedRun], now: float) -> list[Publish]:
        """Make the progress of runs a batch changed pending; the events of those closed,
        then, for each of their partitions whose window is over, of every run of it waiting."""
        out = []
        partitions = set()
        for entry in entries:
            if not entry.progress_pending:
                entry.progress_pending = True
                entry.progress_tasks = task_count(entry.run) + PROGRESS_RUN_TASKS
                self._pending_tasks += entry.progress_tasks
                self._pending.setdefault(entry.partition, {})[entry.run.run_id] = entry
            if entry.run.closed:
                out.append(self._publish(entry))
            partitions.add(entry.partition)
        return out + [item for _, item in self.due(now, partitions)]

    def due(self, now: float, partitions: Iterable[int] | None = None) -> list[tuple[int, Publish]]:
        """(partition, progress event) of every run with unpublished changes of each partition
        whose window is over (of `partitions`; None: all): the window as it stands when called
        (the runs published shorten it for the next call)."""
        since = now - self._window()
        out = []
        for partition in self._pending if partitions is None else partitions:
            runs = self._pending.get(partition)
            if runs and self._published.get(partition, -math.inf) <= since:
                self._published[partition] = now
                out += [(partition, self._publish(entry)) for entry in list(runs.values())]
        return out

    def window_end(self, partition: int) -> float | None:
        """When the partition's window ends, as it stands, if runs of it wait for progress
        (None: none waits)."""
        if not self._pending.get(partition):
            return None
        return self._published.get(partition, -math.inf) + self._window()

    def forget(self, partitions: Iterable[int] | None = None) -> None:
        """Drop the pending progress of these partitions' runs (all: None)."""
        dropped = {*self._pending, *self._published} if partitions is None else set(partitions)
        for partition in dropped:
            for entry in self._pending.pop(partition, {}).values():
                entry.progress_pending = False
                self._pending_tasks -= entry.progress_tasks
            self._published.pop(partition, None)
        self.figures.forget(partitions)

    def _window(self) -> float:
        return self.interval * max(1.0, self._pending_tasks / PROGRESS_TASKS)

    def _publish(self, entry: CachedRun) -> Publish:
        """The pending progress of `entry` (every caller has it pending), published."""
        run = entry.run
        entry.progress_pending = False
        self._pending_tasks -= entry.progress_tasks
        del self._pending[entry.partition][run.run_id]
        # seq = events applied so far: increasing per run, and the same after a restart.
        seq = run.event_count
        event = progress_bytes(entry, seq)
        self.figures.update(run.run_id, event, run.closed, entry.partition)
        return Publish("progress", run.run_id.encode(), event, event_id=f"{run.run_id}/progress/{seq}")
