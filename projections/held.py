"""A run as replay and the worker hold it: its state, and beside it its summary cache.

The state (`projections.fold.run.RunState`) is what the events make and the store keeps;
the cache (`projections.assembly.contributions.SummaryCache`) only saves work, and may be
dropped at any time (a budget, an eviction): the next summary or progress event makes it
again from the state, to the same bytes. So the state never holds it, and whoever holds a
run holds its cache beside it: `Held` in replay, the worker's `CachedRun`.

The worker holds its runs in either fold (`FoldState`: the Python fold's `RunState`, or the
native fold's `NativeState`, whose `NativeRun` keeps its own summary cache and counts it in its
footprint), and asks of both what only the fold knows through the functions here: a run's
progress, its stored parts, a run made of stored parts, and its task count. Both give the same
bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from events.codec import encode_payload
from projections import native_store
from projections.assembly.contributions import SummaryCache
from projections.assembly.progress import progress
from projections.fold.run import RunState
from projections.native_state import NativeState
from projections.storage import StoredHeader, StoredRun, header_of, run_of, task_to_bytes

FoldState = RunState | NativeState
"""A run's state in the Python fold, or in the native one (`projections.native_step`)."""


class HeldRun(Protocol):
    @property
    def run(self) -> FoldState: ...

    summaries: SummaryCache | None
    """None: no cache, or it was dropped."""


@dataclass(slots=True, eq=False)
class Held:
    run: RunState
    summaries: SummaryCache | None = None


def summaries_of(held: HeldRun) -> SummaryCache:
    """The run's summary cache, made when it has none."""
    cache = held.summaries
    if cache is None:
        cache = held.summaries = SummaryCache()
    return cache


def progress_bytes(held: HeldRun, seq: int) -> bytes:
    """The encoded `run.progress` number `seq` of a held run of either fold, the span of its
    events for the ETA (the native fold writes `projections.assembly.progress`'s bytes)."""
    run = held.run
    if isinstance(run, NativeState):
        written: bytes = run.native.progress_bytes(seq, None)
        return written
    return encode_payload(progress(run, seq, cache=summaries_of(held)))


def task_count(run: FoldState) -> int:
    """The tasks the run holds: declared, or named by an event."""
    if isinstance(run, NativeState):
        count: int = run.native.task_count()
        return count
    return len(run.tasks)


def header_parts(run: FoldState) -> StoredHeader:
    """The run's header as `projections.storage` writes it."""
    return native_store.header_of(run.native) if isinstance(run, NativeState) else header_of(run)


def task_record(run: FoldState, task_id: str) -> bytes:
    """Task `task_id`'s stored record (`projections.storage.task_to_bytes`)."""
    if isinstance(run, NativeState):
        record: bytes = run.native.task_record(task_id)
        return record
    return task_to_bytes(run.tasks[task_id])


def task_records(run: FoldState) -> list[tuple[str, bytes]]:
    """(task id, stored record) of every task some event named, in the run's order: a declared
    task nothing arrived for has no record."""
    if isinstance(run, NativeState):
        return [(task_id, run.native.task_record(task_id)) for task_id in run.native.touched_tasks()]
    return [(task.task_id, task_to_bytes(task)) for task in run.tasks.values() if task.touched]


def run_of_parts(stored: StoredRun, native: bool) -> FoldState:
    """A run of either fold made of stored parts (`projections.storage.stored_run`,
    `archived_run`)."""
    if native:
        return NativeState(stored.run_id, native_store.restored(stored), stored.declarations)
    return run_of(stored)
