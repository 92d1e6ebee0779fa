"""Undo for one step: what an event can change, taken before it is applied, so that a step
that raises leaves its run exactly as it was (the model is quix-streams'
`PartitionTransaction` and eventsourcing's `Follower.process_event`: nothing of a step is
recorded unless the whole step succeeded).

An event changes one of the run's parts (`projections.storage`): a run-level event the run
header, a trial or score the task it names (which may be new). Everything else is derived
from the parts. The savepoint takes that part's fields as they are and its appends as
lengths, so taking it is O(1) whatever the size of the run or the task. Rolling back sets
the fields again, truncates the appends, drops what the event added and derives the rest
again from the parts (`run.rederive`, what a restore does): O(run), paid only by a step
that failed.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Final, cast

from events.models import InputEvent, ScoreEmitted, TrialFinished
from projections.columns import MetricColumns
from projections.run import RunState, rederive
from projections.task import TaskState

_HEADER: Final = (
    "declarations",
    "started_event_id",
    "closed_reason",
    "closed_position",
    "first_at",
    "last_at",
)
_header_fields: Final = attrgetter(*_HEADER)


class Savepoint:
    """The run as it is before `event` is applied: the header's fields and lengths, or the
    task's, as typed fields (in the compiled fold, machine values: no tuple, no boxed int)."""

    __slots__ = (
        "_columns",
        "_completed",
        "_events",
        "_failed",
        "_failures",
        "_first_at",
        "_first_score",
        "_header",
        "_last_at",
        "_metric",
        "_names",
        "_packed",
        "_positions",
        "_spilled",
        "_task",
        "_tasks",
        "_touched",
        "_trials",
    )

    def __init__(self, run: RunState, event: InputEvent) -> None:
        self._tasks = len(run.tasks)
        self._header: tuple[Any, ...] | None = None
        self._task: TaskState | None = None
        kind = event.type  # not isinstance: pydantic's model classes make that a slow check
        if kind in {"run.started", "run.closed"}:
            self._header = (_header_fields(run), len(run.run_events), len(run.run_positions))
            return
        named = cast("ScoreEmitted | TrialFinished", event)
        task = run.tasks.get(named.task_id)
        if task is None:  # a new task: dropped with the tasks added after `_tasks`
            return
        metric = cast("ScoreEmitted", event).metric_type if kind == "score.emitted" else None
        columns = task.metrics.get(metric) if metric is not None else None
        failed = task.failed_trials
        self._task = task
        self._first_score: int = task.first_score
        self._touched: bool = task.touched
        self._completed: int = task.trials_completed
        self._failed: int = task.trials_failed
        self._first_at: float | None = task.first_at
        self._last_at: float | None = task.last_at
        self._trials: str = task.trials
        self._events: int = len(task.events)
        self._positions: int = len(task.trial_positions)
        self._failures: int = -1 if failed is None else len(failed)
        self._metric: str | None = metric
        # A metric's records are immutable bytes: the objects themselves are what to put back.
        self._columns: MetricColumns | None = columns
        self._packed: bytes = b"" if columns is None else columns.packed
        self._names: tuple[str, ...] = () if columns is None else columns.names
        self._spilled: bytes | None = None if columns is None else columns.spilled

    def rollback(self, run: RunState) -> None:
        """Put `run` back as it was when the savepoint was taken, whatever part of the
        event's step ran."""
        if self._header is not None:
            fields, run_events, run_positions = self._header
            for name, value in zip(_HEADER, fields, strict=True):
                setattr(run, name, value)
            del run.run_events[run_events:]
            del run.run_positions[run_positions:]
        # Tasks are only ever added (a new task, run.started's declared ones), at the end.
        for task_id in list(run.tasks)[self._tasks :]:
            del run.tasks[task_id]
        if self._task is not None:
            self._task_back(self._task)
        rederive(run)

    def _task_back(self, task: TaskState) -> None:
        task.first_score = self._first_score
        task.touched = self._touched
        task.trials_completed = self._completed
        task.trials_failed = self._failed
        task.first_at = self._first_at
        task.last_at = self._last_at
        task.trials = self._trials
        del task.events[self._events :]
        del task.trial_positions[self._positions :]
        if self._failures < 0:
            task.failed_trials = None
        elif task.failed_trials is not None:
            del task.failed_trials[self._failures :]
        if self._metric is None:
            return
        columns = self._columns
        if columns is None:
            task.metrics.pop(self._metric, None)
            return
        columns.packed, columns.names, columns.spilled = self._packed, self._names, self._spilled
        task.metrics[self._metric] = columns
