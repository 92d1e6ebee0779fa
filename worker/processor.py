"""What the worker does with one consumed message, without Kafka: decode, check the key,
apply, write what changed to the store, and say what to publish. The faust app
(`worker.app`) moves the bytes; its store is a changelog-backed table.

Runs are cached in memory and written through to the store in parts
(`projections.storage`): each applied event writes exactly one record, the one holding
its effects and its fingerprint (its task's, or the run header for run.started and
run.closed), so the store is consistent whatever subset of writes a crash lets through,
and an event never writes the whole run. A run missing from the cache (after a restart
or a rebalance) is restored from the store on its next event. The summary, harbor and
verdicts bytes come from the same projection code as `evalstream replay`, so they are
identical for the same log.

Store keys: b"h\0<run>" the run header, b"t\0<run>\0<task>" a task (none for a declared
task nothing has arrived for).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from events.codec import DecodeError, decode, encode_payload
from projections.progress import progress
from projections.run import Outcome, RunState, apply, summary_due
from projections.storage import header_to_bytes, restore, task_from_bytes, task_to_bytes
from projections.summary import summary

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a consumed message came from."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Publish:
    """One message to produce: `stream` is "summary", "progress" or "deadletter"."""

    stream: str
    key: bytes | None
    value: bytes
    headers: Headers = ()


def dead_letter(key: bytes | None, value: bytes, code: str, reason: str, source: Source) -> Publish:
    """The message unchanged, with headers naming the reason and its source coordinates."""
    headers = (
        ("evalstream.reason", code.encode()),
        ("evalstream.detail", reason.encode()[:4096]),
        ("evalstream.source.topic", source.topic.encode()),
        ("evalstream.source.partition", str(source.partition).encode()),
        ("evalstream.source.offset", str(source.offset).encode()),
    )
    return Publish("deadletter", key, value, headers)


class Store(Protocol):
    """A key-value store (a faust Table): read any key, write while handling a message."""

    def get(self, key: bytes) -> bytes | None: ...

    def __setitem__(self, key: bytes, value: bytes) -> None: ...

    def __iter__(self) -> Iterator[bytes]: ...


def store_key(kind: bytes, run_id: str, task_id: str | None = None) -> bytes:
    key = kind + b"\0" + run_id.encode()
    return key if task_id is None else key + b"\0" + task_id.encode()


@dataclass
class Processor:
    progress_interval: float = 0.2
    store: Store | None = None
    runs: dict[str, RunState] = field(default_factory=dict)
    _stored_tasks: dict[str, list[str]] | None = None
    """Run -> task ids with a record in the store, found by one scan after (re)start."""
    _dirty: set[str] = field(default_factory=set)
    """Runs with changes not yet in a published progress event."""
    _published_at: dict[str, float] = field(default_factory=dict)

    def handle(self, key: bytes | None, value: bytes, source: Source) -> list[Publish]:
        try:
            event = decode(value)
        except DecodeError as error:
            return [dead_letter(key, value, error.code, str(error), source)]
        if key != event.run_id.encode():
            reason = f"message key {key!r} is not the event's run_id {event.run_id!r}; key each event by its run_id"
            return [dead_letter(key, value, "key-mismatch", reason, source)]
        run = self._run(event.run_id)
        applied = apply(run, event)
        if applied.outcome is Outcome.REFUSED:
            return [dead_letter(key, value, "refused", applied.reason, source)]
        if applied.outcome is not Outcome.APPLIED:
            return []
        if self.store is not None:
            if applied.task_id is not None:
                self.store[store_key(b"t", run.run_id, applied.task_id)] = task_to_bytes(run.tasks[applied.task_id])
            else:
                self.store[store_key(b"h", run.run_id)] = header_to_bytes(run)
        self._dirty.add(run.run_id)
        # Published now if the run's coalescing window is over (or it closed); else the
        # timer publishes it when the window ends.
        out = self.progress_due(only=run.run_id, force=run.closed)
        if summary_due(run, applied):
            out.append(Publish("summary", key, encode_payload(summary(run))))
        return out

    def forget(self) -> None:
        """Drop the cache (partitions moved): runs are restored from the store when next seen."""
        if self.store is not None:
            self.runs.clear()
            self._dirty.clear()
            self._stored_tasks = None

    def _run(self, run_id: str) -> RunState:
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = self._restored(run_id) or RunState(run_id)
        return run

    def _restored(self, run_id: str) -> RunState | None:
        if self.store is None:
            return None
        if self._stored_tasks is None:
            # One pass over the store finds every task record; later restores look it up.
            self._stored_tasks = {}
            for key in self.store:
                if key.startswith(b"t\0"):
                    run, _, task = key[2:].partition(b"\0")
                    self._stored_tasks.setdefault(run.decode(), []).append(task.decode())
        header = self.store.get(store_key(b"h", run_id))
        task_ids = self._stored_tasks.pop(run_id, [])
        if header is None and not task_ids:
            return None
        tasks = []
        for task_id in task_ids:
            blob = self.store.get(store_key(b"t", run_id, task_id))
            if blob is not None:
                tasks.append(task_from_bytes(task_id, blob))
        return restore(run_id, header, tasks)

    def progress_due(self, *, only: str | None = None, force: bool = False) -> list[Publish]:
        """Coalesced progress: each run with changes not yet published whose last progress
        is `progress_interval` seconds old (`only`: just this run; `force`: whatever its age)."""
        now = time.monotonic()
        out = []
        for run_id in [only] if only is not None else list(self._dirty):
            if run_id not in self._dirty:
                continue
            if not force and now - self._published_at.get(run_id, -1e9) < self.progress_interval:
                continue
            self._dirty.discard(run_id)
            self._published_at[run_id] = now
            run = self.runs[run_id]
            # seq = events applied so far: increasing per run, and the same after a restart.
            out.append(Publish("progress", run_id.encode(), encode_payload(progress(run, run.event_count))))
        return out
