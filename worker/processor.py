"""What the worker does with one consumed message, without Kafka: decode, check the key,
apply, write what changed to the store, and say what to publish. The faust app
(`worker.app`) moves the bytes; its store is a changelog-backed table.

Runs are cached in memory and written through to the store in parts
(`projections.storage`), keyed so that one event writes its task, the run header and,
rarely, the run's task index or declarations: never the whole run. A run missing from the
cache (after a restart or a rebalance) is restored from the store on its next event. The
summary, harbor and verdicts bytes come from the same projection code as
`evalstream replay`, so they are identical for the same log.

Store keys: b"h\0<run>" header, b"d\0<run>" the run.started, b"x\0<run>" the task ids,
b"t\0<run>\0<task>" a task (absent for a declared task nothing has arrived for).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import orjson

from events.codec import DecodeError, decode, encode, encode_payload
from events.models import RunStarted
from projections.progress import progress
from projections.run import Outcome, RunState, apply, summary_due
from projections.storage import header_to_bytes, restore, task_from_bytes, task_to_bytes
from projections.summary import summary
from projections.task import TaskState

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


def store_key(kind: bytes, run_id: str, task_id: str | None = None) -> bytes:
    key = kind + b"\0" + run_id.encode()
    return key if task_id is None else key + b"\0" + task_id.encode()


@dataclass
class Processor:
    progress_interval: float = 0.2
    store: Store | None = None
    runs: dict[str, RunState] = field(default_factory=dict)
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
        tasks_before = len(run.tasks)
        applied = apply(run, event)
        if applied.outcome is Outcome.REFUSED:
            return [dead_letter(key, value, "refused", applied.reason, source)]
        if applied.outcome is not Outcome.APPLIED:
            return []
        if self.store is not None:
            self._write(run, applied.task_id, event if isinstance(event, RunStarted) else None, tasks_before)
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

    def _run(self, run_id: str) -> RunState:
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = self._restored(run_id) or RunState(run_id)
        return run

    def _restored(self, run_id: str) -> RunState | None:
        if self.store is None or (header := self.store.get(store_key(b"h", run_id))) is None:
            return None
        raw_start = self.store.get(store_key(b"d", run_id))
        started = decode(raw_start) if raw_start else None
        if started is not None and not isinstance(started, RunStarted):
            raise ValueError(f"stored declarations of run {run_id!r} are a {started.type}; wipe the store and replay")
        tasks = []
        for task_id in orjson.loads(self.store.get(store_key(b"x", run_id)) or b"[]"):
            blob = self.store.get(store_key(b"t", run_id, task_id))
            tasks.append(task_from_bytes(task_id, blob) if blob is not None else TaskState(task_id))
        return restore(run_id, header, started, tasks)

    def _write(self, run: RunState, task_id: str | None, started: RunStarted | None, tasks_before: int) -> None:
        """Write what the event changed; the header last, as it says the event was applied."""
        assert self.store is not None
        if task_id is not None:
            self.store[store_key(b"t", run.run_id, task_id)] = task_to_bytes(run.tasks[task_id])
        if started is not None:
            self.store[store_key(b"d", run.run_id)] = encode(started)
        if len(run.tasks) != tasks_before:
            self.store[store_key(b"x", run.run_id)] = orjson.dumps(list(run.tasks))
        self.store[store_key(b"h", run.run_id)] = header_to_bytes(run)

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
