"""A run's state as bytes, in parts, so that a store writes only what an event changed.

Every event changes exactly one part, and that part holds the event's fingerprint with
its effects, so a store that writes one record per event is consistent after any crash:
an event is in the state entirely or not at all.
- one record per task: its trials, score columns, counters, failed trials and the
  fingerprints of its events; written by each event that names the task, O(the task);
- the run header: the applied run.started (declarations are rebuilt from it), the close,
  and the fingerprints of those run-level events; written by run.started and run.closed.
Everything else (the event count, keys per task, pass@k tallies, the redelivery index) is
derived on restore (`run.rederive`), by the same code that maintains it live; trial and
score counts are always summed from the tasks.

Format: orjson objects, version field "v" (2, which added the log positions of trial and
run-level events); arrays are base64 of their bytes in little-endian order.
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Iterable
from typing import Any

import orjson

from events.codec import decode
from events.models import RunStarted
from projections.columns import MetricColumns, OutputColumn
from projections.declarations import Declarations
from projections.run import RunState, rederive
from projections.task import TaskState

VERSION = 2
_HEADER_FIELDS = ("started_event_id", "closed_reason", "closed_position", "first_at", "last_at")
_TASK_FIELDS = ("first_score", "touched", "trials_completed", "trials_failed", "first_at", "last_at")


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
    header["run_positions"] = _pack(run.run_positions)
    header["started"] = run.started_wire.decode() if run.started_wire is not None else None
    return orjson.dumps(header)


def task_to_bytes(task: TaskState) -> bytes:
    return orjson.dumps(
        {
            "v": VERSION,
            **{name: getattr(task, name) for name in _TASK_FIELDS},
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
            "trial_positions": _pack(task.trial_positions),
        }
    )


def task_from_bytes(task_id: str, data: bytes) -> TaskState:
    """A task as stored (its keys are decided again by `restore`)."""
    stored = _checked(orjson.loads(data), f"task {task_id!r}")
    trials = [sys.intern(trial) for trial in stored["trials"]]
    return TaskState(
        task_id,
        **{name: stored[name] for name in _TASK_FIELDS},
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
        trial_positions=_unpack("q", stored["trial_positions"]),
    )


def restore(run_id: str, header: bytes | None, tasks: Iterable[TaskState]) -> RunState:
    """The run as its stored parts say (`header` None: no run-level event was applied)."""
    run = RunState(run_id)
    if header is not None:
        stored = _checked(orjson.loads(header), f"run {run_id!r} header")
        for name in _HEADER_FIELDS:
            setattr(run, name, stored[name])
        run.run_events = _unpack("Q", stored["run_events"])
        run.run_positions = _unpack("q", stored["run_positions"])
        if stored["started"] is not None:
            run.started_wire = stored["started"].encode()
            started = decode(run.started_wire)
            if not isinstance(started, RunStarted):
                raise ValueError(f"stored run.started of run {run_id!r} is a {started.type}; wipe the store and replay")
            run.declarations = Declarations.of(started)
    run.tasks = {task.task_id: task for task in tasks}
    if run.declarations is not None:
        for task_id in run.declarations.tasks:  # a declared task nothing arrived for has no record
            run.tasks.setdefault(task_id, TaskState(task_id))
    rederive(run)
    return run


def _checked(stored: Any, what: str) -> dict[str, Any]:
    if not isinstance(stored, dict) or stored.get("v") != VERSION:
        raise ValueError(f"stored {what} is not version {VERSION} state; wipe the store and replay the topic")
    return stored
