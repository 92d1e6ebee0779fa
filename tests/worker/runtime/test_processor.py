"""The worker's decisions without Kafka: dead letters, admission, snapshots, the bounded
cache and progress windows (the crash law over all of it: `test_engine.py`), with the runs
held in each fold the machine has."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Sequence
from functools import partial

import orjson
import pytest

from events.codec import encode
from events.models import InputEvent
from projections.footprint import footprint
from projections.native_events import NATIVE
from projections.storage import checkpoint_to_bytes
from tests import builders
from tests.worker.runtime.engine_harness import Store
from worker.runtime import processor as processor_module
from worker.runtime.keys import checkpoint_key
from worker.runtime.outputs import Publish
from worker.runtime.processor import Admission, Processor, Record
from worker.runtime.progress import PROGRESS_RUN_TASKS, PROGRESS_TASKS

FOLDS = ["python", *(["native"] if NATIVE is not None else [])]


@pytest.fixture(autouse=True, params=FOLDS)
def fold_of_runs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Processor` here holds its runs in the fold the test is run for."""
    held = partial(processor_module.Processor, native=request.param == "native")
    monkeypatch.setattr(sys.modules[__name__], "Processor", held)


def records(events: Sequence[InputEvent], first: int = 0) -> list[Record]:
    return [Record(offset, event.run_id.encode(), encode(event)) for offset, event in enumerate(events, first)]


def summaries(processor: Processor, batch: list[Record], now: float = 0.0) -> list[bytes]:
    return [item.value for item in processor.handle(0, batch, now) if item.stream == "summary"]


def stored(processor: Processor, store: Store) -> None:
    """Write partition 0's snapshot into `store`, as a checkpoint does."""
    snapshot = processor.snapshot(0)
    assert snapshot is not None
    for key, value in (*snapshot.records, snapshot.checkpoint):
        store.partitions.setdefault(0, {})[key] = value
    processor.written(snapshot, {})


def small_run(run_id: str, trials: int = 2) -> list[InputEvent]:
    events: list[InputEvent] = [builders.started(run_id, [builders.task_spec("a", {"reward.score": "continuous"})])]
    for trial in range(trials):
        events.append(builders.score("a", f"a-{trial}", "reward", {"score": 1.0}, run_id=run_id))
    return [*events, builders.closed(run_id)]


def test_bad_messages_become_dead_letters_with_their_coordinates() -> None:
    processor = Processor(topic="events")
    [dead] = processor.handle(0, [Record(7, b"run", b"{nope")], 0.0)
    assert dead.stream == "deadletter"
    assert dead.value == b"{nope"
    headers = dict(dead.headers)
    assert headers["evalstream.reason"] == b"not-json"
    assert (headers["evalstream.source.topic"], headers["evalstream.source.offset"]) == (b"events", b"7")
    [mismatch] = processor.handle(0, [Record(8, b"other", encode(builders.closed("run")))], 0.0)
    assert dict(mismatch.headers)["evalstream.reason"] == b"key-mismatch"
    [unkeyed] = processor.handle(0, [Record(9, None, encode(builders.closed("run")))], 0.0)
    assert dict(unkeyed.headers)["evalstream.reason"] == b"key-mismatch"


def test_the_state_decides_which_offsets_are_new() -> None:
    """After a rebalance the state admits from its checkpoint on: earlier offsets are
    skipped (the state has them), a later one is flagged (events were passed over)."""
    processor = Processor(Store({0: {b"o0": b"9"}}))
    assert processor.assign([0, 1]) == {0: 10, 1: 0}
    assert processor.admit(0, 9) is Admission.SKIP
    assert processor.admit(0, 14) is Admission.AHEAD
    assert processor.admit(0, 10) is Admission.HANDLE
    processor.handle(0, [Record(10, b"run", encode(builders.closed("run")))], 0.0)
    assert processor.admit(0, 10) is Admission.SKIP  # read again
    assert processor.admit(0, 11) is Admission.HANDLE


def test_a_snapshot_holds_each_changed_part_once_and_names_the_last_offset() -> None:
    processor = Processor(Store(), flush_every=3)
    processor.assign([0])
    events: list[InputEvent] = [builders.started("run", [builders.task_spec("a"), builders.task_spec("b")])]
    events += [builders.trial("a", "a-1"), builders.trial("a", "a-2")]
    processor.handle(0, records(events, first=40), 0.0)
    assert processor.checkpoint_due(0)
    snapshot = processor.snapshot(0)
    assert snapshot is not None
    assert [key for key, _ in snapshot.records] == [b'h"run"', b't["run","a"]']
    assert snapshot.checkpoint == (checkpoint_key(0), checkpoint_to_bytes(42))
    assert processor.snapshot(0) is None  # nothing new since
    assert processor.unsaved() == []


def test_ids_with_separator_characters_survive_a_restart() -> None:
    """Ids are any strings; the store's keys must not split them, nor a run's prefix scan
    take another run's tasks."""
    run_id, tasks = "r\x00x", [builders.task_spec("a\x00b"), builders.task_spec("a")]
    events: list[InputEvent] = [builders.started(run_id, tasks), builders.trial("a\x00b", "1", run_id=run_id)]
    events += [builders.trial("a", "2", run_id=run_id), builders.closed(run_id)]
    neighbour: list[InputEvent] = [builders.started("r", tasks), builders.trial("a", "9", run_id="r")]
    store = Store()
    first = Processor(store)
    first.assign([0])
    first.handle(0, records(neighbour) + records(events[:3], first=2), 0.0)
    stored(first, store)
    restarted = Processor(store)
    assert restarted.assign([0]) == {0: 5}
    after = summaries(restarted, records(events[3:], first=5))
    assert after == summaries(Processor(), records(events))


def test_a_task_record_newer_than_the_checkpoint_keeps_undeclared_tasks_and_failures_in_log_order() -> None:
    """A crash kept task a's record of a checkpoint but neither b's nor the checkpoint. b's
    first score and failure come before a's in the log, and must still come first once b's
    events are read again after a's record."""
    events: list[InputEvent] = [
        builders.trial("b", "b-1", status="failed"),
        builders.score("b", "b-1", "judge"),
        builders.trial("a", "a-1", status="failed"),
        builders.score("a", "a-1", "judge"),
        builders.closed(),
    ]
    first = Processor(Store())
    first.assign([0])
    first.handle(0, records(events[:4]), 0.0)
    snapshot = first.snapshot(0)
    assert snapshot is not None
    a_only = Store({0: dict(record for record in snapshot.records if record[0] == b't["run","a"]')})
    restarted = Processor(a_only)
    assert restarted.assign([0]) == {0: 0}
    [latest] = summaries(restarted, records(events))
    assert latest == summaries(Processor(), records(events))[-1]
    summary = orjson.loads(latest)
    assert list(summary["summary"]["task_metric_attempts"]) == ["b", "a"]
    assert summary["harbor"]["exception_stats"]["UnknownError"] == ["b-1", "a-1"]


def test_the_cache_keeps_at_most_its_bound_closed_runs_leaving_first() -> None:
    store = Store()
    processor = Processor(store, cache_runs=3)
    processor.assign([0])
    offset = 0
    for index in range(6):
        run = small_run(f"closed-{index}")
        processor.handle(0, records(run, first=offset), 0.0)
        offset += len(run)
    opened: list[InputEvent] = [builders.started("open", [builders.task_spec("a")])]
    opened.append(builders.trial("a", "a-1", run_id="open"))
    processor.handle(0, records(opened, first=offset), 0.0)
    assert len(processor.cache) == 7  # changes not yet stored pin every run
    stored(processor, store)
    held = {entry.run.run_id for entry in processor.cache}
    assert held == {"open", "closed-4", "closed-5"}  # the open run stays; the oldest closed runs left
    assert processor.cache.evicted == 4


def test_the_cache_holds_runs_up_to_its_byte_budget_closed_ones_leaving_first() -> None:
    store = Store()
    runs = {f"closed-{index}": small_run(f"closed-{index}") for index in range(4)}
    runs["open"] = small_run("open")[:-1]
    sizes = {}
    for run_id, events in runs.items():  # each run's footprint as the cache will weigh it
        alone = Processor(Store())
        alone.handle(0, records(events), 0.0)
        [entry] = list(alone.cache)
        sizes[run_id] = footprint(entry.run, entry.summaries)
    budget = sizes["open"] + sizes["closed-2"] + sizes["closed-3"]
    processor = Processor(store, cache_bytes=budget)
    processor.assign([0])
    offset = 0
    for events in runs.values():
        processor.handle(0, records(events, first=offset), 0.0)
        offset += len(events)
    stored(processor, store)
    assert {entry.run.run_id for entry in processor.cache} == {"open", "closed-2", "closed-3"}
    assert processor.cache.held_bytes == budget
    assert processor.cache.evicted == 2


def test_a_late_event_restores_its_evicted_run_and_publishes_the_next_revision() -> None:
    store = Store()
    processor = Processor(store, cache_runs=1)
    processor.assign([0])
    first, second = small_run("first"), small_run("second")
    processor.handle(0, records(first) + records(second, first=len(first)), 0.0)
    stored(processor, store)
    assert [entry.run.run_id for entry in processor.cache] == ["second"]
    late = builders.score("a", "a-late", "reward", {"score": 0.0}, run_id="first")
    [revision] = summaries(processor, records([late], first=len(first) + len(second)))
    reference = summaries(Processor(), records([*first, late]))
    assert revision == reference[-1]
    assert orjson.loads(revision)["revision"] == 2


def test_a_pinned_run_stays_until_its_progress_is_out() -> None:
    store = Store()
    processor = Processor(store, cache_runs=0, progress_interval=1.0)
    processor.assign([0])
    processor.handle(0, records([builders.started("open", [builders.task_spec("a")])]), 0.0)  # progress at once
    processor.handle(0, records([builders.trial("a", "a-1", run_id="open")], first=1), 0.5)  # within the window
    stored(processor, store)
    assert [entry.run.run_id for entry in processor.cache] == ["open"]  # its progress is due yet
    [(partition, item)] = processor.progress_due(1.0)
    assert (partition, item.stream, orjson.loads(item.value)["event_count"]) == (0, "progress", 2)
    processor.handle(0, [], 1.0)
    stored_again = processor.snapshot(0)
    assert stored_again is None
    processor.cache.evict()
    assert len(processor.cache) == 0


def test_progress_windows_grow_with_the_tasks_waiting_so_progress_work_is_bounded() -> None:
    """One run whose tasks and fixed part make PROGRESS_TASKS gets progress every interval;
    ten of them share that budget: each gets progress ten times less often."""
    assert progress_per_run(1, PROGRESS_TASKS - PROGRESS_RUN_TASKS) == 16  # every 0.25 s
    assert progress_per_run(10, PROGRESS_TASKS - PROGRESS_RUN_TASKS) == 1  # every 2.5 s


def test_a_runs_fixed_part_counts_in_the_progress_budget() -> None:
    """Runs of one task cost their fixed part more than their task: as many as the budget
    holds with it get progress every interval; twice as many, every other."""
    fit = PROGRESS_TASKS // (1 + PROGRESS_RUN_TASKS)
    assert progress_per_run(fit, 1) == 16
    assert progress_per_run(2 * fit, 1) == 8


def progress_per_run(runs: int, tasks_each: int) -> int:
    """Progress events each of `runs` open runs of `tasks_each` tasks gets over 4 s, with a
    trial of each run every 0.125 s and a progress interval of 0.25 s."""
    processor = Processor(progress_interval=0.25)
    tasks = [builders.task_spec(f"t{i}") for i in range(tasks_each)]
    published = 0
    offsets = itertools.count()
    for run in range(runs):
        processor.handle(0, records([builders.started(f"big-{run}", tasks)], next(offsets)), 0.0)
    for step in range(1, 33):
        now = step * 0.125
        for run in range(runs):
            trial = records([builders.trial("t0", f"t{step}-1", run_id=f"big-{run}")], next(offsets))
            published += sum(item.stream == "progress" for item in processor.handle(0, trial, now))
        published += len(processor.progress_due(now))
    return published // runs


def test_a_partition_publishes_the_progress_of_its_runs_together_once_a_window() -> None:
    """The window is the partition's: a run whose first change comes mid-window waits for the
    window's end with the others, and a run's progress events are a window apart at least;
    a partition idle for a window publishes its next change at once, and another partition
    keeps its own window."""
    processor = Processor(progress_interval=0.2)
    started = {run: builders.started(run, [builders.task_spec("a")]) for run in ("a", "b", "c")}
    offsets = itertools.count()
    seen: set[str] = set()

    def made(partition: int, run: str, now: float) -> list[tuple[str, int]]:
        """The progress published with one more event of `run` at `now`."""
        event = builders.trial("a", f"{run}-{now}", run_id=run) if run in seen else started[run]
        seen.add(run)
        return progress_of(processor.handle(partition, records([event], next(offsets)), now))

    assert made(0, "a", 0.0) == [("a", 1)]  # the partition was idle: at once
    assert made(0, "b", 0.1) == []  # mid-window: it waits, although b never had progress
    assert made(0, "a", 0.15) == []
    assert made(1, "c", 0.15) == [("c", 1)]  # another partition, its own window
    assert progress_of(item for _, item in processor.progress_due(0.19)) == []
    assert sorted(progress_of(item for _, item in processor.progress_due(0.2))) == [("a", 2), ("b", 1)]
    assert made(0, "b", 0.3) == []
    assert progress_of(item for _, item in processor.progress_due(0.39)) == []  # b's last: at 0.2
    assert progress_of(item for _, item in processor.progress_due(0.4)) == [("b", 2)]


def progress_of(published: Iterable[Publish]) -> list[tuple[str, int]]:
    return [
        (orjson.loads(item.value)["run_id"], orjson.loads(item.value)["event_count"])
        for item in published
        if item.stream == "progress"
    ]


def test_counts_say_what_became_of_every_record() -> None:
    """Each record handed over is counted once: applied, skipped (before the checkpoint),
    redelivered (event_id applied already), ignored (a second close) or dead-lettered by reason."""
    processor = Processor(Store({0: {b"o0": b"1"}}))
    processor.assign([0])
    run = small_run("run", trials=2)
    batch = records(run, first=2)
    duplicate = Record(len(batch) + 2, b"run", encode(run[1]))
    second_close = Record(len(batch) + 3, b"run", encode(builders.closed("run", event_id="close-again")))
    junk = [Record(len(batch) + 4, b"run", b"{nope"), Record(len(batch) + 5, b"other", encode(run[0]))]
    processor.handle(0, [*records(run[:2]), *batch, duplicate, second_close, *junk], 0.0)
    counts = processor.counts
    assert (counts.skipped, counts.applied, counts.redelivered, counts.ignored) == (2, len(run), 1, 1)
    assert counts.dead_lettered == {"not-json": 1, "key-mismatch": 1}
    processor.forget()  # a revocation drops the state, not what was counted
    assert processor.counts.applied == len(run)
