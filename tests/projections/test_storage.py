"""A run stored in parts and restored is the same run: same summary now, same after more events."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.codec import encode_payload
from events.models import InputEvent
from projections.assembly.progress import progress
from projections.assembly.summary import summary
from projections.fold.run import RunState, apply
from projections.fold.task import TaskState
from projections.packed.records import DENSE, NUMERIC, OK, MetricColumns
from projections.packed.trial_ids import joined
from projections.storage import header_of, header_to_bytes, restore, task_from_bytes, task_to_bytes
from tests.builders import fold, score, scored_run, trial
from tests.strategies import run_logs


def stored_and_restored(run: RunState) -> RunState:
    """Through bytes, as a store keeps it: a declared task nothing arrived for has no record."""
    blobs = {task_id: task_to_bytes(task) for task_id, task in run.tasks.items() if task.touched}
    return restore(run.run_id, header_to_bytes(header_of(run)), [task_from_bytes(t, b) for t, b in blobs.items()])


@given(run_logs(), st.data())
def test_a_restored_run_continues_exactly_like_the_original(log: list[InputEvent], data: st.DataObject) -> None:
    split = data.draw(st.integers(0, len(log)))
    original = fold(log[:split])
    restored = stored_and_restored(original)
    assert header_to_bytes(header_of(restored)) == header_to_bytes(header_of(original))
    assert progress(restored, 1) == progress(original, 1)
    for event in [*log[split:], *data.draw(st.lists(st.sampled_from(log), max_size=5))]:
        assert apply(restored, event).outcome == apply(original, event).outcome  # redeliveries included
    assert encode_payload(summary(restored)) == encode_payload(summary(original))
    assert progress(restored, 2) == progress(original, 2)


@pytest.mark.parametrize("rules", ["0.25", "0.26", None])
def test_the_run_header_keeps_the_runs_harbor_rules(rules: str | None) -> None:
    """A dead trial is where the rules differ (SEMANTICS.md section 6): restored, the run
    still reads it by its own rules."""
    run = fold(scored_run("run", {"t1": [1.0, None, 0.0], "t2": [1.0, 1.0]}, harbor_rules=rules)[:-1])
    restored = stored_and_restored(run)
    assert restored.declarations is not None
    assert restored.declarations.harbor_rules == (rules or "0.26")
    assert summary(restored)["harbor"] == summary(run)["harbor"]
    assert summary(restored)["harbor"]["pass_at_k"]["reward.score"]["2"] == (
        (1 - (2 / 3) * (1 / 2) + 1.0) / 2 if rules == "0.25" else (1.0 + 1.0) / 2
    )


def version_3(task: TaskState) -> bytes:
    """The task as version 3's code wrote it: each metric's fields an array of their own."""

    def text(data: bytes) -> str:
        return base64.b64encode(data).decode()

    def metric(columns: MetricColumns) -> dict[str, Any]:
        (trials, statuses, seqs), outputs = columns.stored()
        return {
            "trials": text(trials.tobytes()),
            "statuses": text(statuses),
            "seqs": text(seqs.tobytes()),
            "outputs": {
                name: {"rows": text(rows.tobytes()), "kinds": text(kinds), "values": text(values.tobytes())}
                for name, (rows, kinds, values) in outputs.items()
            },
        }

    stored = orjson.loads(task_to_bytes(task))
    stored["v"] = 3
    stored["metrics"] = {name: metric(columns) for name, columns in task.metrics()}
    return orjson.dumps(stored)


@given(run_logs())
def test_a_task_version_3_wrote_reads_as_the_task_it_was(log: list[InputEvent]) -> None:
    run = fold(log)
    wide = MetricColumns()  # more output names than a record has slots for
    for row in range(DENSE + 3):
        wide.append(0, OK, 10_000 + row, {wide.slot_of(f"out-{row % (DENSE + 2)}"): (NUMERIC, row / 7)})
    tasks = [*run.tasks.values(), TaskState("wide", metrics={"many": wide}, trials=joined(["trial"]))]
    for task in tasks:
        read = task_from_bytes(task.task_id, version_3(task))
        assert task_to_bytes(read) == task_to_bytes(task)
        assert read.metric_names == task.metric_names
        for name, columns in task.metrics():
            stored = read.metric(name)
            assert stored is not None
            assert (stored.packed, stored.spilled) == (columns.packed, columns.spilled)


def test_a_damaged_task_record_is_refused_with_the_fix() -> None:
    run = fold(scored_run("run", {"t1": [1.0, 0.0]}))
    task = next(task for task in run.tasks.values() if task.metric_names)
    stored = orjson.loads(task_to_bytes(task))
    metric = next(iter(stored["metrics"]))
    stored["metrics"][metric]["records"] = base64.b64encode(b"\x00" * 5).decode()
    with pytest.raises(ValueError, match=f"metric '{metric}' is damaged .*; wipe the store and replay the topic"):
        task_from_bytes(task.task_id, orjson.dumps(stored))


def tried(task_id: str, statuses: list[str]) -> TaskState:
    """A task of one trial.finished per status, each trial scored unless it failed."""
    events: list[InputEvent] = []
    for number, status in enumerate(statuses):
        events.append(trial(task_id, f"{task_id}-{number}", status, error_type="Crash" if status == "failed" else None))
        if status == "completed":
            events.append(score(task_id, f"{task_id}-{number}", "reward", {"score": 1.0}))
    return fold(events).tasks[task_id]


@pytest.mark.parametrize(("field", "size"), [("events", 16), ("trial_positions", 8)])
def test_a_task_whose_kept_events_are_not_whole_is_refused_with_the_fix(field: str, size: int) -> None:
    task = tried("t1", ["completed", "failed"])
    stored = orjson.loads(task_to_bytes(task))
    stored[field] = base64.b64encode(base64.b64decode(stored[field])[:-1]).decode()
    with pytest.raises(ValueError, match=f"not whole items of {size}.*; wipe the store and replay the topic"):
        task_from_bytes(task.task_id, orjson.dumps(stored))


def test_a_task_record_keeps_its_counts_and_they_are_derived_when_read() -> None:
    """The stored form still writes touched and the trial counts; read back, the task derives
    them from what it keeps (fingerprints, trial positions, failures), so they agree."""
    task = tried("t1", ["completed", "failed", "completed"])
    stored = orjson.loads(task_to_bytes(task))
    assert (stored["touched"], stored["trials_completed"], stored["trials_failed"]) == (True, 2, 1)
    read = task_from_bytes("t1", task_to_bytes(task))
    assert (read.touched, read.trials_completed, read.trials_failed) == (True, 2, 1)
    assert not TaskState("declared").touched
