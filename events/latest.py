"""Each run's newest output record, and the rule for what counts as new.

A run's summaries carry a `revision` (1, 2, ...) and its progress events a `seq`, both growing
per run. A record is new when its number is above the highest seen for its run: a redelivered
record (a worker that restarted publishes revisions again) or an older one changes nothing. Gaps
are normal: a compacted topic keeps only a run's last record, and progress is coalesced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from events.outputs import RunProgress, RunSummary

R = TypeVar("R", RunSummary, RunProgress)


def revision(summary: RunSummary) -> int:
    return summary.revision


def seq(progress: RunProgress) -> int:
    return progress.seq


class Latest(Mapping[str, R]):
    """run_id -> the newest record seen of that run, in the order runs were first seen."""

    def __init__(self, order: Callable[[R], int]) -> None:
        self._order: Callable[[R], int] = order
        self._records: dict[str, R] = {}

    def offer(self, record: R) -> bool:
        """Keep `record` if it is newer than what its run has; whether it was."""
        known = self._records.get(record.run_id)
        if known is not None and self._order(known) >= self._order(record):
            return False
        self._records[record.run_id] = record
        return True

    def forget(self, run_id: str) -> None:
        """Drop a run (its key was deleted: a tombstone on a compacted topic)."""
        self._records.pop(run_id, None)

    def __getitem__(self, run_id: str) -> R:
        return self._records[run_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)
