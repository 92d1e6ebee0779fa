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
from typing import Any, cast

from events.models import InputEvent, ScoreEmitted, TrialFinished
from projections.run import RunState, rederive
from projections.task import TaskState

_HEADER = (
    "declarations",
    "started_event_id",
    "closed_reason",
    "closed_position",
    "first_at",
    "last_at",
)
_TASK = ("first_score", "touched", "trials_completed", "trials_failed", "first_at", "last_at")
_header_fields = attrgetter(*_HEADER)


def _task_fields(task: TaskState) -> tuple[Any, ...]:
    """`_TASK`'s fields of `task`, in its order. Read one by one, not by an attrgetter: in the
    compiled fold each read is a field of a C struct, where an attrgetter looks up each name."""
    return (task.first_score, task.touched, task.trials_completed, task.trials_failed, task.first_at, task.last_at)


class Savepoint:
    """The run as it is before `event` is applied: one tuple for the part the event can
    change (the header, or its task), as few operations as possible on the hot path."""

    __slots__ = ("_header", "_task", "_tasks")

    def __init__(self, run: RunState, event: InputEvent) -> None:
        self._tasks = len(run.tasks)
        self._header: tuple[Any, ...] | None = None
        self._task: tuple[Any, ...] | None = None
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
        self._task = (
            task,
            _task_fields(task),
            len(task.trial_ids),
            len(task.events),
            len(task.trial_positions),
            -1 if failed is None else len(failed),
            metric,
            -1 if columns is None else len(columns),
        )

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
            _task_back(self._task)
        rederive(run)


def _task_back(saved: tuple[Any, ...]) -> None:
    task: TaskState
    task, fields, trials, events, positions, failed, metric, rows = saved
    for name, value in zip(_TASK, fields, strict=True):
        setattr(task, name, value)
    del task.trial_ids[trials:]
    del task.events[events:]
    del task.trial_positions[positions:]
    if failed < 0:
        task.failed_trials = None
    elif task.failed_trials is not None:
        del task.failed_trials[failed:]
    if metric is None:
        return
    if rows < 0:
        task.metrics.pop(metric, None)
        return
    task.metrics[metric].truncate(rows)
