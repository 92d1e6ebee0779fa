"""A run's state as bytes, in parts, so that a store writes only what an event changed.

Parts of run R (the store chooses the keys):
- the header: counters, close, and the fingerprints of run.started/run.closed; small,
  rewritten by every event;
- the declarations: the `run.started` event itself, written once;
- one blob per task: its trials, score columns, failed trials and the fingerprints of the
  events applied to it; rewritten by the events that name the task, O(size of the task).
Derived state (keys per task, pass@k tallies, the redelivery index) is not stored: it is
rebuilt from the parts on restore, by the same code that builds it live.

Format: orjson objects, version field "v" (1); arrays are base64 of their bytes in
little-endian order.
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Iterable
from typing import Any

import orjson

from events.models import RunStarted
from projections.applied import AppliedEvents
from projections.columns import MetricColumns, OutputColumn
from projections.declarations import Declarations
from projections.run import RunState, rekey_run
from projections.task import TaskState

VERSION = 1
_HEADER_FIELDS = (
    "started_event_id",
    "closed_reason",
    "closed_at",
    "event_count",
    "trials_completed",
    "trials_failed",
    "score_count",
    "first_at",
    "last_at",
)


def _pack(values: array[Any]) -> str:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode()


def _unpack(typecode: str, text: str) -> array[Any]:
    values = array(typecode, base64.b64decode(text))
    if sys.byteorder == "big":
        values.byteswap()
    return values


def header_to_bytes(run: RunState) -> bytes:
    header: dict[str, Any] = {"v": VERSION, **{name: getattr(run, name) for name in _HEADER_FIELDS}}
    header["run_events"] = _pack(run.run_events)
    return orjson.dumps(header)


def task_to_bytes(task: TaskState) -> bytes:
    return orjson.dumps(
        {
            "v": VERSION,
            "first_score": task.first_score,
            "touched": task.touched,
            "trials": task.trial_ids,
            "metrics": {
                metric: {
                    "trials": _pack(columns.trials),
                    "statuses": base64.b64encode(columns.statuses).decode(),
                    "seqs": _pack(columns.seqs),
                    "outputs": {
                        output: {
                            "rows": _pack(column.rows),
                            "kinds": base64.b64encode(column.kinds).decode(),
                            "values": _pack(column.values),
                        }
                        for output, column in columns.outputs.items()
                    },
                }
                for metric, columns in task.metrics.items()
            },
            "failed": task.failed_trials,
            "events": _pack(task.events),
        }
    )


def task_from_bytes(task_id: str, data: bytes) -> TaskState:
    """A task as stored (its keys are decided again by `restore`)."""
    stored = _checked(orjson.loads(data), f"task {task_id!r}")
    trials = [sys.intern(trial) for trial in stored["trials"]]
    return TaskState(
        task_id,
        first_score=stored["first_score"],
        touched=stored["touched"],
        trial_ids=trials,
        trial_index={trial: index for index, trial in enumerate(trials)},
        metrics={
            sys.intern(metric): MetricColumns(
                trials=_unpack("i", columns["trials"]),
                statuses=bytearray(base64.b64decode(columns["statuses"])),
                seqs=_unpack("q", columns["seqs"]),
                outputs={
                    sys.intern(output): OutputColumn(
                        rows=_unpack("i", column["rows"]),
                        kinds=bytearray(base64.b64decode(column["kinds"])),
                        values=_unpack("d", column["values"]),
                    )
                    for output, column in columns["outputs"].items()
                },
            )
            for metric, columns in stored["metrics"].items()
        },
        failed_trials=[tuple(entry) for entry in stored["failed"]] if stored["failed"] else None,
        events=_unpack("Q", stored["events"]),
    )


def restore(run_id: str, header: bytes, started: RunStarted | None, tasks: Iterable[TaskState]) -> RunState:
    """The run as it was when its parts were written."""
    stored = _checked(orjson.loads(header), f"run {run_id!r} header")
    run = RunState(run_id, **{name: stored[name] for name in _HEADER_FIELDS})
    run.run_events = _unpack("Q", stored["run_events"])
    run.tasks = {task.task_id: task for task in tasks}
    run.declarations = Declarations.of(started) if started else None
    fingerprints = [run.run_events, *(task.events for task in run.tasks.values())]
    run.applied = AppliedEvents(sum(len(pairs) // 2 for pairs in fingerprints))
    for pairs in fingerprints:
        for at in range(0, len(pairs), 2):
            run.applied.add_fingerprint(pairs[at], pairs[at + 1])
    rekey_run(run)
    return run


def _checked(stored: Any, what: str) -> dict[str, Any]:
    if not isinstance(stored, dict) or stored.get("v") != VERSION:
        raise ValueError(f"stored {what} is not version {VERSION} state; wipe the store and replay the topic")
    return stored
