"""What the worker does with one consumed message, without Kafka: decode, check the key,
apply, say what to publish, and write what changed to the store. The faust app
(`worker.app`) moves the bytes; its store is a changelog-backed table.

Runs are cached in memory and written behind to the store in parts
(`projections.storage`), one flush per source partition at a time: the records the
partition's events changed since its last flush (each task once, however many events
touched it), then a checkpoint record naming the offset of the last event handled. A
record holds its part's effects with the fingerprints of the events that made them, and
the changelog keeps one partition's writes in order, so after any crash the store is
correct as of its last checkpoint, plus some records ahead of it. Recovery therefore
reads the source partition again from the checkpoint (`resume_offsets`), offsets before
it are skipped (`admit`), and events that reach a record twice are skipped by
fingerprint. The app handles only messages read after that rewind, so what the state
needs next is the offset it gets, or one the state has already (skipped).

A run missing from the cache (after a restart or a rebalance) is restored from the store
on its next event. The summary, harbor and verdicts bytes come from the same projection
code as `evalstream replay`, so they are identical for the same log.

Store keys: b'h"<run>"' the run header, b't["<run>","<task>"]' a task (none for a declared
task nothing has arrived for), b"o<partition>" the checkpoint of a source partition. Ids
are JSON strings in keys, so no character of theirs can be taken for a separator.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import orjson

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


class Admission(Enum):
    HANDLE = "handle"
    SKIP = "skip"
    AHEAD = "ahead"


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


def header_key(run_id: str) -> bytes:
    return b"h" + orjson.dumps(run_id)


def task_key(run_id: str, task_id: str) -> bytes:
    return b"t" + orjson.dumps([run_id, task_id])


def checkpoint_key(partition: int) -> bytes:
    return b"o" + str(partition).encode()


@dataclass
class Processor:
    progress_interval: float = 0.2
    store: Store | None = None
    flush_every: int = 1000
    """Events of one partition after which its changes are flushed (the app also flushes
    on a timer): more means fewer changelog bytes and more events redone after a crash."""
    runs: dict[str, RunState] = field(default_factory=dict)
    _unflushed: dict[int, dict[tuple[str, str | None], None]] = field(default_factory=dict)
    """Partition -> parts (run, task or None for the header) changed since its last flush."""
    _handled: dict[int, int] = field(default_factory=dict)
    """Partition -> events handled since its last flush."""
    _next_offset: dict[int, int] = field(default_factory=dict)
    """Partition -> the offset the state needs next (set by `resume_offsets`, then one on
    from each event handled): the state, not the consumer, decides what is read."""
    _stored_tasks: dict[str, list[str]] | None = None
    """Run -> task ids with a record in the store, found by one scan after (re)start."""
    _dirty: set[str] = field(default_factory=set)
    """Runs with changes not yet in a published progress event."""
    _published_at: dict[str, float] = field(default_factory=dict)

    def admit(self, source: Source) -> Admission:
        """Whether a consumed message is new to the state: HANDLE it, or SKIP it (an offset
        before the one the state needs next, so its effects are in the state already).
        AHEAD: later than that. Read from the checkpoint on, that means the offsets in
        between hold no message (transaction markers, or deleted by retention); it is
        handled, and the app reports the gap."""
        expected = self._next_offset.get(source.partition)
        if expected is None or source.offset == expected:
            return Admission.HANDLE
        return Admission.SKIP if source.offset < expected else Admission.AHEAD

    def next_offset(self, partition: int) -> int:
        return self._next_offset[partition]

    def handle(self, key: bytes | None, value: bytes, source: Source) -> list[Publish]:
        """What to publish for one message; its changes wait for `flush(source.partition)`."""
        partition = source.partition
        self._handled[partition] = self._handled.get(partition, 0) + 1
        self._next_offset[partition] = source.offset + 1
        return self._handle(key, value, source)

    def _handle(self, key: bytes | None, value: bytes, source: Source) -> list[Publish]:
        try:
            event = decode(value)
        except DecodeError as error:
            return [dead_letter(key, value, error.code, str(error), source)]
        if key != event.run_id.encode():
            reason = f"message key {key!r} is not the event's run_id {event.run_id!r}; key each event by its run_id"
            return [dead_letter(key, value, "key-mismatch", reason, source)]
        run = self._run(event.run_id)
        applied = apply(run, event, source.offset)
        if applied.outcome is Outcome.REFUSED:
            return [dead_letter(key, value, "refused", applied.reason, source)]
        if applied.outcome is not Outcome.APPLIED:
            return []
        self._unflushed.setdefault(source.partition, {})[run.run_id, applied.task_id] = None
        self._dirty.add(run.run_id)
        # Published now if the run's coalescing window is over (or it closed); else the
        # timer publishes it when the window ends.
        out = self.progress_due(only=run.run_id, force=run.closed)
        if summary_due(run, applied):
            out.append(Publish("summary", key, encode_payload(summary(run))))
        return out

    def flush_due(self, partition: int) -> bool:
        return self._handled.get(partition, 0) >= self.flush_every

    def unflushed(self) -> list[int]:
        """Partitions with events handled since their last flush."""
        return [partition for partition, count in self._handled.items() if count]

    def flush(self, partition: int) -> int | None:
        """Write the parts the partition's events changed, then its checkpoint, in that
        order: a store holding the checkpoint holds everything before it. Returns the
        offset to commit, the one after the checkpoint (committed offsets only report
        progress: a new owner reads from the checkpoint it restores)."""
        if self.store is None or not self._handled.get(partition):
            return None
        for run_id, task_id in self._unflushed.pop(partition, {}):
            run = self.runs[run_id]
            if task_id is not None:
                self.store[task_key(run_id, task_id)] = task_to_bytes(run.tasks[task_id])
            else:
                self.store[header_key(run_id)] = header_to_bytes(run)
        # A partition with handled events has a next offset one past the last of them.
        self.store[checkpoint_key(partition)] = str(self._next_offset[partition] - 1).encode()
        self._handled[partition] = 0
        return self._next_offset[partition]

    def resume_offsets(self, partitions: Iterable[int]) -> dict[int, int]:
        """Where each source partition must be read again from for the store to be complete:
        after its checkpoint, or from the start when it has none."""
        if self.store is None:
            return {}
        resume = {}
        for partition in partitions:
            checkpoint = self.store.get(checkpoint_key(partition))
            resume[partition] = int(checkpoint) + 1 if checkpoint is not None else 0
        self._next_offset.update(resume)
        return resume

    def forget(self) -> None:
        """Drop the cache and what was not flushed (partitions moved): runs are restored
        from the store when next seen, after the source is rewound to `resume_offsets`."""
        if self.store is not None:
            self.runs.clear()
            self._dirty.clear()
            self._stored_tasks = None
            self._unflushed.clear()
            self._handled.clear()
            self._next_offset.clear()

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
                if key.startswith(b"t"):
                    run, task = orjson.loads(key[1:])
                    self._stored_tasks.setdefault(run, []).append(task)
        header = self.store.get(header_key(run_id))
        task_ids = self._stored_tasks.pop(run_id, [])
        if header is None and not task_ids:
            return None
        tasks = []
        for task_id in task_ids:
            blob = self.store.get(task_key(run_id, task_id))
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
