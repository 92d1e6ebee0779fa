"""The runs that left the board's memory: for each, where its latest summary is on the compacted
summaries topic and the few things the pages need without reading it (its runs-page row, and its
tasks' verdicts for the history page), kept in the runs page's order.

An entry is about 1 KB plus 9 bytes a task and key (`projections.analysis.history.RunTasks`), against
the ~190 KB a closed run of 200 attempts takes as a `RunSummary`. Rows of runs with the same
labels share one labels mapping, and runs of the same tasks one tuple of task ids.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, replace

from projections.analysis.history import RunTasks
from worker.dashboard.views import RunRow, sort_key

Where = tuple[int, int]
"""(partition, offset) of a run's latest summary on the summaries topic."""


@dataclass(frozen=True, slots=True)
class Indexed:
    row: RunRow
    where: Where | None
    """None: the run closed with no summary read (its progress said so)."""
    seq: int
    """Its newest progress event seen (0: none), so that an older one changes nothing."""
    revision: int
    """Its newest summary's revision (0: none)."""
    tasks: RunTasks | None


class Index:
    """Indexed runs by id, and their ids in runs-page order."""

    def __init__(self) -> None:
        self._entries: dict[str, Indexed] = {}
        self._order: list[tuple[str, str]] = []
        self._labels: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._task_ids: dict[tuple[str, ...], tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._entries

    def get(self, run_id: str) -> Indexed | None:
        return self._entries.get(run_id)

    def put(self, entry: Indexed) -> None:
        self.pop(entry.row.run_id)
        labels = self._shared_labels(entry.row.labels)
        tasks = entry.tasks
        if tasks is not None:
            shared = self._task_ids.setdefault(tasks.task_ids, tasks.task_ids)
            tasks = replace(tasks, labels=labels, task_ids=shared)
        entry = replace(entry, row=replace(entry.row, labels=labels), tasks=tasks)
        self._entries[entry.row.run_id] = entry
        bisect.insort(self._order, (sort_key(entry.row), entry.row.run_id))

    def pop(self, run_id: str) -> Indexed | None:
        entry = self._entries.pop(run_id, None)
        if entry is not None:
            place = (sort_key(entry.row), run_id)
            del self._order[bisect.bisect_left(self._order, place)]
        return entry

    def saw_progress(self, run_id: str, seq: int) -> bool:
        """A progress event of an indexed run: kept (its number only) if newer; whether it was."""
        entry = self._entries.get(run_id)
        if entry is None or seq <= entry.seq:
            return False
        self._entries[run_id] = replace(entry, seq=seq)
        return True

    def ordered(self) -> Iterator[tuple[str, RunRow]]:
        """(sort key, row) of every indexed run, in runs-page order."""
        for key, run_id in self._order:
            yield key, self._entries[run_id].row

    def tasks(self) -> Iterator[RunTasks]:
        for entry in self._entries.values():
            if entry.tasks is not None:
                yield entry.tasks

    def _shared_labels(self, labels: dict[str, str]) -> dict[str, str]:
        return self._labels.setdefault(tuple(sorted(labels.items())), labels)
