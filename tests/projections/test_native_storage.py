"""The native fold's stored form against the Python fold's (`projections.storage`): a task's
record (`NativeRun.task_record`) and the run header (`projections.native_store.header_of`)
byte for byte after every event; a native run restored from the Python fold's stored parts,
hot or archived (a marker, residue, older versions), that goes on exactly as the Python fold
goes on; and the same errors for parts that are damaged or newer than this code."""

from __future__ import annotations

import base64
import gc
import tracemalloc
import zlib
from collections.abc import Callable
from random import Random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.codec import encode
from events.models import InputEvent
from events.synthetic import synthetic_run
from projections import native_store
from projections.fold import run as run_module
from projections.fold.run import RunState
from projections.fold.task import TaskState
from projections.native_events import native_apply
from projections.native_replay import NativeReplayer
from projections.packed.trial_ids import joined
from projections.storage import (
    ArchiveMismatch,
    ArchiveRef,
    NewerStore,
    StoredRun,
    archive_to_bytes,
    archived_run,
    digest_of,
    header_of,
    header_to_bytes,
    marker_to_bytes,
    restore,
    restore_archived,
    stored_run,
    task_from_bytes,
    task_to_bytes,
)
from tests.builders import closed, fold, scored_run
from tests.native import kernels
from tests.projections.test_native_fold import (
    assert_same_run,
    assert_same_summary,
    log_positions,
    logs_of_any_names,
    logs_with_repeats,
    wide_logs,
)
from tests.projections.test_storage import version_3

REF = ArchiveRef(3, 41, "")
"""Where an archive record is said to be (its digest is set per record)."""


MOMENTS = st.sampled_from(
    [
        "2026-12-06T13:14:15Z",
        "2026-12-06T13:14:15.123456+02:00",
        "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59.5Z",
        "2016-12-31T23:59:60Z",
        "2026-12-06t13:14:15.1z",
    ]
)
"""Timestamps whose moments are written as floats of every form: fractions, 0.0, negative."""


@st.composite
def timed(draw: st.DrawFn, logs: st.SearchStrategy[list[InputEvent]]) -> list[InputEvent]:
    """A log of `logs`, some of its events given an `occurred_at` (the first_at and last_at
    of the header and the tasks)."""
    return [
        event.model_copy(update={"occurred_at": draw(MOMENTS)}) if draw(st.booleans()) else event
        for event in draw(logs)
    ]


def assert_same_records(run: RunState, native: Any) -> None:
    """Every task's record and the header, and a marker holding it, are the Python fold's bytes."""
    for task_id, task in run.tasks.items():
        assert native.task_record(task_id) == task_to_bytes(task)
    header = native_store.header_of(native)
    assert header == header_of(run)
    assert header_to_bytes(header) == header_to_bytes(header_of(run))
    assert marker_to_bytes(REF, header) == marker_to_bytes(REF, header_of(run))


def both(run_id: str) -> tuple[RunState, Any]:
    return RunState(run_id), kernels().NativeRun(run_id)


@settings(max_examples=200)
@given(
    timed(st.one_of(logs_with_repeats(), wide_logs(), logs_of_any_names())),
    st.sampled_from(["folded", "offsets", "restored"]),
    st.randoms(use_true_random=False),
)
def test_every_record_is_the_python_fold_s_after_every_event(
    events: list[InputEvent], positions: str, rng: Random
) -> None:
    """After each event (applied, redelivered, refused or ignored), the task it names and every
    other one (a declared task nothing arrived for too), the header and a marker with the
    header: spilled cells, any text, failed trials, late and repeated events."""
    run, native = both(events[0].run_id)
    for event, position in zip(events, log_positions(positions, len(events), rng), strict=True):
        applied = run_module.apply(run, event, position)
        assert native_apply(native, event, position) == applied.outcome.value
        if applied.task_id is not None:
            assert native.task_record(applied.task_id) == task_to_bytes(run.tasks[applied.task_id])
        assert_same_records(run, native)


def test_a_run_without_the_task_has_no_record_of_it() -> None:
    with pytest.raises(KeyError, match="nowhere"):
        kernels().NativeRun("run").task_record("nowhere")


def stored(run: RunState) -> tuple[bytes | None, dict[str, bytes]]:
    """The run's parts as the worker stores them: the header once a run-level event applied,
    a record per task some event named."""
    header = header_to_bytes(header_of(run)) if run.run_events else None
    return header, {task_id: task_to_bytes(task) for task_id, task in run.tasks.items() if task.touched}


def natively(stored: StoredRun) -> Any:
    """The native run of `stored`; the test fails, saying what to do, where the native fold is
    not built."""
    kernels()
    return native_store.restored(stored)


def read(tasks: dict[str, bytes]) -> list[TaskState]:
    return [task_from_bytes(task_id, blob) for task_id, blob in tasks.items()]


def go_on(run: RunState, native: Any, events: list[InputEvent], places: list[int | None]) -> None:
    """Apply the rest of the log to both: the same outcome, state, records and summary each time."""
    for event, position in zip(events, places, strict=True):
        assert native_apply(native, event, position) == run_module.apply(run, event, position).outcome.value
        assert_same_run(run, native)
        assert_same_records(run, native)
        assert_same_summary(run, native)


@st.composite
def split_logs(draw: st.DrawFn) -> tuple[list[InputEvent], int, list[InputEvent]]:
    """A log, where it is stored, and events given again after the restore (redeliveries of
    events stored or not, the same with another id)."""
    events = draw(timed(st.one_of(logs_with_repeats(), wide_logs())))
    again = draw(st.lists(st.sampled_from(events), max_size=4))
    return events, draw(st.integers(0, len(events))), again


@settings(max_examples=150)
@given(split_logs(), st.sampled_from(["folded", "offsets", "restored"]), st.randoms(use_true_random=False))
def test_a_native_run_restored_from_the_python_fold_s_records_goes_on_as_it_does(
    split: tuple[list[InputEvent], int, list[InputEvent]], positions: str, rng: Random
) -> None:
    """Stored by the Python fold at any point, restored natively (`native_store.restored`) and
    by the Python fold (`storage.restore`): the same state at once (counts, keys, tallies, the
    revision, the index of applied events), then the same outcomes, records and summaries for
    the rest of the log and events given again."""
    events, split_at, again = split
    places = log_positions(positions, len(events) + len(again), rng)
    original = RunState("run")
    for event, position in zip(events[:split_at], places, strict=False):
        run_module.apply(original, event, position)
    header, tasks = stored(original)
    run = restore("run", header, read(tasks))
    native = natively(stored_run("run", header, read(tasks)))
    assert_same_run(run, native)
    assert_same_records(run, native)
    assert_same_summary(run, native)
    go_on(run, native, [*events[split_at:], *again], places[split_at:])


@st.composite
def archived_logs(draw: st.DrawFn) -> tuple[list[InputEvent], int, int]:
    """A log, where its run is archived, and where late events stop being written beside the
    marker (then the rest comes after the restore)."""
    events = draw(timed(logs_with_repeats()))
    archived = draw(st.integers(0, len(events)))
    return events, archived, draw(st.integers(archived, len(events)))


@settings(max_examples=150)
@given(archived_logs())
def test_a_native_run_restored_from_an_archive_goes_on_as_the_python_fold_does(
    log: tuple[list[InputEvent], int, int],
) -> None:
    """The run's parts in an archive record (`archive_to_bytes`), then late events written
    beside it (the marker holding the header, the tasks they changed as residue): restored from
    them natively (`archived_run`) and by the Python fold (`restore_archived`), the same run, and
    the same after the rest of the log."""
    events, archived, restored_at = log
    original = fold(events[:archived])
    header, tasks = stored(original)
    archive = archive_to_bytes(header or header_to_bytes(header_of(original)), tasks.items())
    ref = REF._replace(digest=digest_of(archive))
    residue: dict[str, bytes] = {}
    marker = marker_to_bytes(ref)
    for event in events[archived:restored_at]:
        applied = run_module.apply(original, event)
        if applied.task_id is not None:
            residue[applied.task_id] = task_to_bytes(original.tasks[applied.task_id])
        elif applied.outcome is run_module.Outcome.APPLIED:
            marker = marker_to_bytes(ref, header_of(original))
    run = restore_archived("run", ref, archive, marker, read(residue))
    native = natively(archived_run("run", ref, archive, marker, read(residue)))
    assert_same_run(run, native)
    assert_same_records(run, native)
    go_on(run, native, events[restored_at:], [None] * (len(events) - restored_at))


@settings(max_examples=50)
@given(logs_with_repeats(), st.data())
def test_records_of_version_3_restore_natively_as_the_python_fold_restores_them(
    events: list[InputEvent], data: st.DataObject
) -> None:
    """Parts of an older version are upgraded by storage (`_checked`) before either fold sees
    them: the native run restored from them is the Python fold's."""
    original = fold(events[: data.draw(st.integers(0, len(events)))])
    header, tasks = stored(original)
    older = {task_id: version_3(task_from_bytes(task_id, blob)) for task_id, blob in tasks.items()}
    old_header = None if header is None else header.replace(b'"v":5', b'"v":3', 1)
    run = restore("run", old_header, read(older))
    native = natively(stored_run("run", old_header, read(older)))
    assert_same_run(run, native)
    assert_same_records(run, native)
    assert_same_summary(run, native)


def closed_run() -> RunState:
    return fold(scored_run("run", {"t1": [1.0, None, 0.0], "t2": [1.0, 1.0]}))


def edited(data: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    document = orjson.loads(data)
    change(document)
    return orjson.dumps(document)


def damaged_header(change: Callable[[dict[str, Any]], None]) -> Callable[[RunState], dict[str, Any]]:
    """A hot restore whose header `change` made."""

    def parts(run: RunState) -> dict[str, Any]:
        header, tasks = stored(run)
        assert header is not None
        return {"header": edited(header, change), "tasks": tasks}

    return parts


def cut(field: str) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        document[field] = base64.b64encode(base64.b64decode(document[field])[:-1]).decode()

    return change


def archived(change: Callable[[bytes], bytes] = lambda archive: archive, digest: bool = True) -> Callable[..., Any]:
    """An archive restore of the run, its record changed by `change` (its digest the changed
    record's when `digest`, as a newer worker's would be, else the record's before)."""

    def parts(run: RunState) -> dict[str, Any]:
        header, tasks = stored(run)
        assert header is not None
        record = archive_to_bytes(header, tasks.items())
        changed = change(record)
        return {"ref": REF._replace(digest=digest_of(changed if digest else record)), "archive": changed}

    return parts


def newer_archive(record: bytes) -> bytes:
    return zlib.compress(edited(zlib.decompress(record), lambda document: document.update(v=99)))


def marker_instead(run: RunState) -> dict[str, Any]:
    _, tasks = stored(run)
    return {"header": marker_to_bytes(REF), "tasks": tasks}


DAMAGE = {
    "older-than-readable": (ValueError, damaged_header(lambda document: document.update(v=1))),
    "newer-header": (NewerStore, damaged_header(lambda document: document.update(v=99))),
    "header-events-not-whole": (ValueError, damaged_header(cut("run_events"))),
    "header-positions-not-whole": (ValueError, damaged_header(cut("run_positions"))),
    "started-not-a-run-started": (
        ValueError,
        damaged_header(lambda document: document.update(started=encode(closed("run")).decode())),
    ),
    "started-not-valid": (
        ValueError,
        damaged_header(lambda document: document.update(started='{"type": "run.started", "run_id": 7}')),
    ),
    "a-marker-where-a-header-is": (ValueError, marker_instead),
    "archive-changed": (ArchiveMismatch, archived(lambda record: record[:-1] + bytes([record[-1] ^ 1]), False)),
    "newer-archive": (NewerStore, archived(newer_archive)),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_and_newer_parts_raise_for_the_native_run_what_they_raise_for_the_python_fold(case: str) -> None:
    error, make = DAMAGE[case]
    parts = make(closed_run())
    if "archive" in parts:
        with pytest.raises(error) as python:
            restore_archived("run", parts["ref"], parts["archive"])
        with pytest.raises(error) as native:
            natively(archived_run("run", parts["ref"], parts["archive"]))
    else:
        with pytest.raises(error) as python:
            restore("run", parts["header"], read(parts["tasks"]))
        with pytest.raises(error) as native:
            natively(stored_run("run", parts["header"], read(parts["tasks"])))
    assert str(native.value) == str(python.value)
    assert (
        "wipe the store and replay" in str(native.value)
        or "newer evalstream" in str(native.value)
        or ("restore it from its archive record" in str(native.value))
    )


def test_records_that_name_a_trial_the_task_has_not_are_refused_natively() -> None:
    """The native fold reads a record's trial by its index: one out of the task's trials
    (bytes the store's checks let through: whole records, of a trial no id is kept for) is
    a ValueError naming the task and metric, never a crash."""
    run = closed_run()
    task = next(task for task in run.tasks.values() if task.metric_names)
    bare = TaskState(task.task_id, metrics=dict(task.metrics()), trials=joined([]), events=task.events)
    with pytest.raises(ValueError, match=f"task '{task.task_id}', metric 'reward' is damaged .*a trial"):
        natively(stored_run("run", None, [bare]))


def natively_folded(replayer: NativeReplayer, tasks: int, attempts: int, *, close: bool, events: int | None) -> Any:
    lines = [orjson.dumps(event) for event in synthetic_run("measured", tasks=tasks, attempts=attempts, seed=3)]
    lines = lines[:events] if events is not None else lines if close else lines[:-1]
    for line in lines:
        replayer.apply(line)
    return replayer.runs["measured"]


@pytest.mark.parametrize(
    ("tasks", "attempts", "close", "events"),
    [
        (2, 5, False, None),  # a small open run
        (2, 5, True, None),
        (20, 1, True, None),
        (40, 5, True, None),
        (300, 5, False, None),
        (2000, 5, False, None),
        (1000, 50, False, 1),  # run.started alone: declared tasks and the reserved index
    ],
)
def test_a_native_run_s_footprint_is_never_below_its_measured_memory_nor_far_above(
    tasks: int, attempts: int, close: bool, events: int | None
) -> None:
    """The native fold's memory comes from Python's raw allocator, which tracemalloc traces
    (`events/native/src/allocator.rs`): the estimate is held to it as the Python fold's is
    (`tests/projections/test_footprint.py`)."""
    natively_folded(NativeReplayer(), 2, 2, close=True, events=None)  # shared names and declarations made outside
    replayer = NativeReplayer()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run = natively_folded(replayer, tasks, attempts, close=close, events=events)
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert run.closed() is close
    assert measured <= run.footprint() <= 2 * measured
