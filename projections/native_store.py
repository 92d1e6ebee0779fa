"""The native fold's runs in the stored form (`projections.storage`, whose functions serve
both folds): a native run's header parts (`header_of`, for `header_to_bytes` and
`marker_to_bytes`), and a native run made of the parts storage read and checked (`restored`,
of `stored_run` or `archived_run`: the same versions, upgrades and errors as the Python
fold's restore). A task's record is written natively: `NativeRun.task_record(task_id)` is
`task_to_bytes` of the Python fold's task, byte for byte (tests/projections/test_native_storage.py).
"""

from __future__ import annotations

from typing import Any

from projections.fold.task import TaskState
from projections.native_events import NATIVE, declaration_args
from projections.packed.trial_ids import listed
from projections.storage import StoredHeader, StoredRun


def header_of(run: Any) -> StoredHeader:
    """The header parts of the `NativeRun` `run`."""
    header = run.header()
    return StoredHeader(
        header["started_event_id"],
        header["closed_reason"],
        header["closed_position"],
        header["first_at"],
        header["last_at"],
        header["run_events"],
        header["run_positions"],
        run.started(),
    )


def restored(stored: StoredRun) -> Any:
    """The `NativeRun` of `stored`'s parts, the rest derived natively as `storage.run_of`
    derives the Python fold's; a ValueError if a part cannot be what it claims."""
    assert NATIVE is not None, "the native fold is not built"
    header = stored.header
    fields = None
    if header is not None:
        fields = (
            header.started_event_id,
            header.closed_reason,
            header.closed_position,
            header.first_at,
            header.last_at,
            header.run_events,
            header.run_positions,
        )
    declarations = None if stored.declarations is None else declaration_args(stored.declarations)
    tasks = [_task_args(task) for task in stored.tasks.values()]
    return NATIVE.NativeRun.restored(stored.run_id, fields, declarations, tasks)


def _task_args(task: TaskState) -> tuple[Any, ...]:
    """The task as `NativeRun.restored` takes it (its records as the fold holds them)."""
    metrics = [(name, list(columns.names), columns.packed, columns.spilled) for name, columns in task.metrics()]
    return (
        task.task_id,
        task.first_score,
        listed(task.trials),
        metrics,
        task.failed_trials,
        task.events,
        task.trial_positions,
        task.first_at,
        task.last_at,
    )
