"""Undo for one step: what an event can change, taken before it is applied, so that a step
that raises leaves its run exactly as it was (the model is quix-streams'
`PartitionTransaction` and eventsourcing's `Follower.process_event`: nothing of a step is
recorded unless the whole step succeeded).

An event changes one of the run's parts (`projections.storage`): a run-level event the run
header, a trial or score the task it names (which may be new). Everything else is derived
from the parts. The savepoint takes that part's fields as they are (what an event appends to
is immutable, made anew: the objects themselves are what to put back) and the lengths of
its lists, so taking it is O(1) whatever the size of the run or the task. Rolling back sets
the fields again, truncates the lists, drops what the event added and derives the rest
again from the parts (`run.rederive`, what a restore does): O(run), paid only by a step
that failed.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Final, cast

from events.models import InputEvent, ScoreEmitted, TrialFinished
from projections.fold.run import RunState, rederive
from projections.fold.task import TaskState

_HEADER: Final = (
    "declarations",
    "started_event_id",
    "closed_reason",
    "closed_position",
    "first_at",
    "last_at",
    "run_events",
    "run_positions",
)
_header_fields: Final = attrgetter(*_HEADER)


class Savepoint:
    """The run as it is before `event` is applied: the header's fields and lengths, or the
    task's, as typed fields (in the compiled fold, machine values: no tuple, no boxed int)."""

    __slots__ = (
        "_events",
        "_failures",
        "_first_at",
        "_first_score",
        "_header",
        "_last_at",
        "_metric_names",
        "_output_names",
        "_positions",
        "_records",
        "_spilled",
        "_task",
        "_tasks",
        "_trials",
    )

    def __init__(self, run: RunState, event: InputEvent) -> None:
        self._tasks = len(run.tasks)
        self._header: tuple[Any, ...] | None = None
        self._task: TaskState | None = None
        kind = event.type  # not isinstance: pydantic's model classes make that a slow check
        if kind in {"run.started", "run.closed"}:
            self._header = _header_fields(run)
            return
        named = cast("ScoreEmitted | TrialFinished", event)
        task = run.tasks.get(named.task_id)
        if task is None:  # a new task: dropped with the tasks added after `_tasks`
            return
        failed = task.failed_trials
        self._task = task
        self._first_score: int = task.first_score
        self._first_at: float | None = task.first_at
        self._last_at: float | None = task.last_at
        self._trials: str = task.trials
        self._events: bytes = task.events
        self._positions: bytes = task.trial_positions
        self._failures: int = -1 if failed is None else len(failed)
        self._metric_names: tuple[str, ...] = task.metric_names
        self._output_names: tuple[tuple[str, ...], ...] = task.output_names
        self._records: tuple[bytes, ...] = task.records
        self._spilled: tuple[bytes | None, ...] | None = task.spilled

    def rollback(self, run: RunState) -> None:
        """Put `run` back as it was when the savepoint was taken, whatever part of the
        event's step ran."""
        if self._header is not None:
            for name, value in zip(_HEADER, self._header, strict=True):
                setattr(run, name, value)
        # Tasks are only ever added (a new task, run.started's declared ones), at the end.
        for task_id in list(run.tasks)[self._tasks :]:
            del run.tasks[task_id]
        if self._task is not None:
            self._task_back(self._task)
        rederive(run)

    def _task_back(self, task: TaskState) -> None:
        task.first_score = self._first_score
        task.first_at = self._first_at
        task.last_at = self._last_at
        task.trials = self._trials
        task.events = self._events
        task.trial_positions = self._positions
        if self._failures < 0:
            task.failed_trials = None
        elif task.failed_trials is not None:
            del task.failed_trials[self._failures :]
        task.metric_names, task.output_names = self._metric_names, self._output_names
        task.records, task.spilled = self._records, self._spilled
