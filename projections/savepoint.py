"""Undo for one step: what an event can change, taken before it is applied, so that a step
that raises leaves its run exactly as it was (the model is quix-streams'
`PartitionTransaction` and eventsourcing's `Follower.process_event`: nothing of a step is
recorded unless the whole step succeeded).

An event changes at most two of the run's parts (`projections.storage`): the run header and
the one task it names. Their fields are taken as they are and their appends as lengths, so
taking a savepoint is O(1) whatever the size of the run or the task. Rolling back sets the
fields again, truncates the appends and derives the rest again from the parts
(`run.rederive`, what a restore does): O(run), paid only by a step that failed.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import attrgetter

from events.models import InputEvent, ScoreEmitted, TrialFinished
from projections.run import RunState, rederive
from projections.task import TaskState

_HEADER = (
    "declarations",
    "started_event_id",
    "started_wire",
    "closed_reason",
    "closed_position",
    "first_at",
    "last_at",
)
_TASK = ("first_score", "touched", "trials_completed", "trials_failed", "first_at", "last_at")
_header_fields = attrgetter(*_HEADER)
_task_fields = attrgetter(*_TASK)


class Savepoint:
    """The run (and the task `event` names) as they are before `event` is applied."""

    __slots__ = (
        "_failed",
        "_header",
        "_metric",
        "_rows",
        "_run_events",
        "_run_positions",
        "_task",
        "_task_events",
        "_task_fields",
        "_tasks",
        "_trial_id",
        "_trial_positions",
        "_trials",
    )

    def __init__(self, run: RunState, event: InputEvent) -> None:
        self._header = _header_fields(run)
        self._run_events = len(run.run_events)
        self._run_positions = len(run.run_positions)
        self._tasks = len(run.tasks)
        self._task: TaskState | None = None
        if not isinstance(event, ScoreEmitted | TrialFinished):
            return
        task = self._task = run.tasks.get(event.task_id)
        if task is None:  # a new task goes with the tasks added after `_tasks`
            return
        self._trial_id = event.trial_id
        self._metric = event.metric_type if isinstance(event, ScoreEmitted) else None
        self._task_fields = _task_fields(task)
        self._trials = len(task.trial_ids)
        self._task_events = len(task.events)
        self._trial_positions = len(task.trial_positions)
        self._failed = -1 if task.failed_trials is None else len(task.failed_trials)
        columns = task.metrics.get(self._metric) if self._metric is not None else None
        self._rows = -1 if columns is None else len(columns.statuses)

    def rollback(self, run: RunState) -> None:
        """Put `run` back as it was when the savepoint was taken, whatever part of the
        event's step ran."""
        for name, value in zip(_HEADER, self._header, strict=True):
            setattr(run, name, value)
        del run.run_events[self._run_events :]
        del run.run_positions[self._run_positions :]
        # Tasks are only ever added (a new task, run.started's declared ones), at the end.
        for task_id in list(run.tasks)[self._tasks :]:
            del run.tasks[task_id]
        if self._task is not None:
            self._task_back(self._task)
        rederive(run)

    def _task_back(self, task: TaskState) -> None:
        for name, value in zip(_TASK, self._task_fields, strict=True):
            setattr(task, name, value)
        del task.trial_ids[self._trials :]
        if task.trial_index.get(self._trial_id, -1) >= self._trials:
            del task.trial_index[self._trial_id]
        del task.events[self._task_events :]
        del task.trial_positions[self._trial_positions :]
        if self._failed < 0:
            task.failed_trials = None
        elif task.failed_trials is not None:
            del task.failed_trials[self._failed :]
        if self._metric is None:
            return
        if self._rows < 0:
            task.metrics.pop(self._metric, None)
            return
        columns = task.metrics[self._metric]
        rows = self._rows
        del columns.trials[rows:]
        del columns.statuses[rows:]
        del columns.seqs[rows:]
        for name, column in list(columns.outputs.items()):
            # An output's rows ascend: those before `rows` are the ones it had.
            kept = bisect_left(column.rows, rows)
            if not kept:  # made by this event
                del columns.outputs[name]
                continue
            del column.rows[kept:]
            del column.kinds[kept:]
            del column.values[kept:]
