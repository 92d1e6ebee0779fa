"""What the worker decides about the records it consumes, without Kafka and without I/O.

For each batch of records of one events partition: which offsets are new to the state
(`admit`), what each message does (`projections.step`, the step replay takes too, or
`projections.native_step` where the runs are held in the native fold), and what to publish
(dead letters and summary revisions in record order, then coalesced progress:
`worker.runtime.progress`). The runs live in a bounded cache over the stored state
(`worker.runtime.runs`); each partition gathers the parts its events changed
(`worker.runtime.changes`), which `snapshot` turns into the records of one checkpoint.
`worker.runtime.checkpoint` writes those in one transaction and calls `written` once it is
committed.

Recovery: after a partition is (re)claimed, `assign` says where it is read again from (one
past its checkpoint). The store holds exactly the committed state as of that checkpoint,
since a checkpoint's records and its offset commit together; an event read again that a
record already has (a producer's duplicate) is a redelivery by its fingerprint. Runs
missing from the cache are restored from the store on their next event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from projections.fold.run import Outcome
from projections.native_events import NATIVE
from projections.native_step import NativeStepper
from projections.step import Rejected, RollbackFailed, RunLookup, Stepped, step
from projections.storage import (
    ArchiveMismatch,
    ArchiveRef,
    NewerStore,
    StoredCheckpoint,
    checkpoint_from_bytes,
    closed_header,
)
from worker.runtime.cache import CachedRun, RunCache
from worker.runtime.changes import PartitionChanges, Snapshot
from worker.runtime.keys import HEADER_PREFIX, checkpoint_key, run_id_of
from worker.runtime.outputs import Publish, Source, dead_letter
from worker.runtime.progress import Progress
from worker.runtime.runs import ArchiveNeeded, RunStore, StoredState
from worker.settings import PROGRESS_INTERVAL

log = logging.getLogger("evalstream.worker")


class Record(NamedTuple):
    """One consumed message of an events partition."""

    offset: int
    key: bytes | None
    value: bytes


@dataclass(slots=True)
class Counts:
    """What the processor did with the records it was given, since the worker started
    (read by `worker.runtime.metrics` when scraped: plain ints, cheap on the hot path)."""

    applied: int = 0
    skipped: int = 0
    """Offsets before the state's next one: read again after a rewind, already applied."""
    redelivered: int = 0
    """Events whose event_id the run had applied (a producer's retry)."""
    ignored: int = 0
    """Valid events that change nothing (a second run.closed)."""
    dead_lettered: dict[str, int] = field(default_factory=dict)
    """Reason code -> messages dead-lettered for it."""
    refused: dict[str, int] = field(default_factory=dict)
    """Output stream -> outputs the broker refused (counted by the checkpoint, which sends them)."""

    def dead_letter(self, reason: str) -> None:
        self.dead_lettered[reason] = self.dead_lettered.get(reason, 0) + 1

    def refuse(self, stream: str) -> None:
        self.refused[stream] = self.refused.get(stream, 0) + 1


class EventsTopicChanged(ValueError):
    """A checkpoint names offsets of an events topic that is not the one there now."""


class Admission(Enum):
    HANDLE = "handle"
    SKIP = "skip"
    AHEAD = "ahead"


@dataclass(slots=True)
class PartitionState:
    next_offset: int | None = None
    """The offset the state needs next (from the checkpoint, then one on from each event
    handled): the state, not the consumer, decides what is new. None: not assigned by
    `assign` (a processor without a store), every offset is new."""
    events_topic: str | None = None
    """The events topic's id the checkpoint names (recorded with the next one)."""
    changes: PartitionChanges = field(default_factory=PartitionChanges)

    @property
    def handled(self) -> int:
        return self.changes.handled


class Processor:
    def __init__(
        self,
        store: StoredState | None = None,
        *,
        topic: str = "events",
        progress_interval: float = PROGRESS_INTERVAL,
        flush_every: int = 1000,
        cache_runs: int = 10_000,
        cache_bytes: int = 64 * 2**20,
        retire: bool = True,
        native: bool = NATIVE is not None,
    ) -> None:
        """`store` None: nothing is stored or restored (an oracle over a whole topic).
        `retire`: retire closed runs once committed (retired ones are restored either way).
        `native`: hold the runs in the native fold (the default where it is built), else in
        the Python fold; both store the same records."""
        self.retire = retire
        self.topic = topic
        self.flush_every = flush_every
        """Events of one partition after which a checkpoint is due (the engine also
        checkpoints on a timer): more means fewer changelog bytes and more events redone
        after a crash."""
        cache = RunCache(cache_runs, cache_bytes) if store is not None else RunCache(2**62, 2**62)
        self.runs = RunStore(store, cache, native=native)
        self._step = NativeStepper().step if native else _python_step
        self.progress = Progress(progress_interval)
        self.partitions: dict[int, PartitionState] = {}
        self.counts = Counts()
        self.parked: dict[tuple[int, str], Rejected] = {}
        """(partition, run id) -> why: runs whose events are dead-lettered, not applied."""

    @property
    def store(self) -> StoredState | None:
        return self.runs.store

    @property
    def cache(self) -> RunCache:
        return self.runs.cache

    @property
    def refused(self) -> NewerStore | None:
        return self.runs.refused

    def assign(
        self, partitions: Iterable[int], events_topic: str | None = None, events_ends: Mapping[int, int] | None = None
    ) -> dict[int, int]:
        """Forget what the worker held of `partitions` (they may have moved), and say where
        each must be read again from for the state to be complete: one past its checkpoint,
        or its start. `events_topic`: the events topic's id now; `events_ends`: partition ->
        its end offset now. Raises, before anything is consumed, `NewerStore` if a newer
        version wrote one of them, `EventsTopicChanged` if its checkpoint is of another
        events topic or past the partition's end."""
        assigned = list(partitions)
        self.forget(assigned)
        if self.store is None:
            return {}
        try:
            return {
                partition: self._assigned(partition, events_topic, (events_ends or {}).get(partition))
                for partition in assigned
            }
        except NewerStore as error:
            self.runs.refused = error
            raise

    def _assigned(self, partition: int, events_topic: str | None, end: int | None) -> int:
        assert self.store is not None
        stored = self.store.get(partition, checkpoint_key(partition))
        checkpoint = checkpoint_from_bytes(stored) if stored is not None else None
        if checkpoint is not None:
            self._check(partition, checkpoint, events_topic, end)
        resume = checkpoint.offset + 1 if checkpoint is not None else 0
        state = self.partitions[partition] = PartitionState(resume, events_topic)
        if self.retire:
            # Closed runs a worker stopped before retiring (or an older version never
            # retired): a header scan, markers told by their first bytes.
            state.changes.retire = {
                run_id_of(key): None
                for key, header in self.store.scan(partition, HEADER_PREFIX)
                if closed_header(header)
            }
        return resume

    def _check(self, partition: int, checkpoint: StoredCheckpoint, events_topic: str | None, end: int | None) -> None:
        """Refuse a checkpoint that names records the events topic does not hold."""
        fix = (
            "its offsets name other events now. To fold the topic from its start, give the worker a new app id "
            "(EVALSTREAM_APP_ID); to go on from the old state, restore the old topic"
        )
        if checkpoint.events_topic is not None and events_topic is not None and checkpoint.events_topic != events_topic:
            raise EventsTopicChanged(
                f"the events topic {self.topic!r} was deleted and created again since partition {partition}'s "
                f"checkpoint (topic id {checkpoint.events_topic}, now {events_topic}): {fix}"
            )
        if end is not None and checkpoint.offset >= end:
            raise EventsTopicChanged(
                f"partition {partition} of the events topic {self.topic!r} ends at offset {end}, before its "
                f"checkpoint (offset {checkpoint.offset}): the topic was truncated or created again, and {fix}"
            )

    def forget(self, partitions: Iterable[int] | None = None) -> None:
        """Drop the runs, progress and changes of these partitions (all: None): they are
        redone by whoever reads the partitions next, from their checkpoints."""
        dropped = None if partitions is None else set(partitions)
        self.progress.forget(dropped)
        if dropped is None:
            self.cache.clear()
            self.partitions.clear()
            return
        self.cache.drop(dropped)
        for partition in dropped:
            self.partitions.pop(partition, None)

    def park(self, partition: int, run_id: str, why: Rejected) -> None:
        """From now on, dead-letter the run's events with `why` instead of applying them (its
        state can no longer be read or stored)."""
        self.parked[partition, run_id] = why

    def admit(self, partition: int, offset: int) -> Admission:
        """HANDLE a record the state needs next, SKIP one before it (its effects are in the
        state already). AHEAD: later than that. Read from the checkpoint on, that means the
        offsets in between hold no message (transaction markers, aborted records, or deleted
        by retention): it is handled."""
        state = self.partitions.get(partition)
        expected = state.next_offset if state is not None else None
        if expected is None or offset == expected:
            return Admission.HANDLE
        return Admission.SKIP if offset < expected else Admission.AHEAD

    def archives_needed(
        self, partition: int, records: Iterable[Record], fetched: Mapping[str, bytes]
    ) -> dict[str, ArchiveRef]:
        """The retired runs the batch names, neither cached nor in `fetched`: where each
        one's archive record is, to fetch before `handle` (an event is routed to the run its
        key names, or rejected, so the keys are every run the batch can touch)."""
        run_ids = []
        for key in {record.key for record in records if record.key is not None}:
            try:
                run_id = key.decode()
            except UnicodeDecodeError:
                continue  # no event's run id: the event is rejected
            if (partition, run_id) not in self.parked:
                run_ids.append(run_id)
        return self.runs.archives_needed(partition, run_ids, fetched)

    def handle(
        self, partition: int, records: Iterable[Record], now: float, archives: Mapping[str, bytes] | None = None
    ) -> list[Publish]:
        """What to publish for a batch of one partition's records, in offset order.
        `archives`: the archive records `archives_needed` named, fetched."""
        state = self.partitions.setdefault(partition, PartitionState())
        changes = state.changes
        fetched = archives or {}
        out: list[Publish] = []
        touched: dict[str, CachedRun] = {}
        counts = self.counts
        held: dict[str, CachedRun] = {}

        def lookup(run_id: str) -> CachedRun:
            # A run is looked up in the cache (which makes it the most recently used) once a
            # batch: `held` has it for the batch's later events.
            entry = held.get(run_id)
            if entry is None:
                entry = held[run_id] = self.runs.cached(partition, run_id, fetched)
            return entry

        for offset, key, value in records:
            admission = self.admit(partition, offset)
            if admission is Admission.SKIP:
                counts.skipped += 1
                continue
            if admission is Admission.AHEAD:
                log.info(
                    "%s[%d]: offsets %d to %d hold no event (transaction markers, aborted records, or retention)",
                    self.topic,
                    partition,
                    state.next_offset,
                    offset - 1,
                )
            state.next_offset = offset + 1
            changes.handled += 1
            source = Source(self.topic, partition, offset)
            parked = self._parked(partition, key)
            if parked is not None:
                out.append(self._dead_letter(key, value, parked, source, None))
                continue
            try:
                stepped = self._step(value, lookup, position=offset, key=key)
            except Exception as error:  # outside the step's rollback (restoring the run failed): nothing applied
                if self.refused is not None or isinstance(error, ArchiveNeeded | ArchiveMismatch | RollbackFailed):
                    raise  # not the event's fault: the store is newer, the batch was not prepared, the run is lost
                rejected = Rejected("internal-error", repr(error))
                out.append(self._dead_letter(key, value, rejected, source, error))
                continue
            if stepped.rejected is not None:
                out.append(self._dead_letter(key, value, stepped.rejected, source, stepped.failure))
                continue
            run = stepped.run
            if stepped.outcome is not Outcome.APPLIED or run is None:
                if stepped.outcome is Outcome.REDELIVERY:
                    counts.redelivered += 1
                else:
                    counts.ignored += 1
                continue
            counts.applied += 1
            entry = touched[run.run_id] = held[run.run_id]
            changes.change(entry, stepped.task_id)
            if stepped.summary is not None:
                event_id = f"{run.run_id}/summary/{run.revision}"
                out.append(Publish("summary", key, stepped.summary, source=source, event_id=event_id))
        for entry in touched.values():
            self.cache.refile(entry)
        return out + self.progress.changed(touched.values(), now)

    def progress_due(self, now: float) -> list[tuple[int, Publish]]:
        """(partition, progress event) of every run with unpublished changes of each partition
        whose progress window is over."""
        return self.progress.due(now)

    def progress_window_end(self, partition: int) -> float | None:
        """When the partition's progress window ends, if runs of it wait for progress."""
        return self.progress.window_end(partition)

    def checkpoint_due(self, partition: int) -> bool:
        state = self.partitions.get(partition)
        return state is not None and state.changes.handled >= self.flush_every

    def unsaved(self) -> list[int]:
        """Partitions with events handled since their last snapshot, or runs to retire."""
        return [partition for partition, state in self.partitions.items() if state.changes.pending]

    def snapshot(self, partition: int) -> Snapshot | None:
        """Take what the partition's next checkpoint writes (None: nothing new, or no store)."""
        state = self.partitions.get(partition)
        if self.store is None or state is None or state.next_offset is None or self.refused:
            return None
        return state.changes.take(partition, state.next_offset - 1, self.store, self.cache, state.events_topic)

    def written(self, snapshot: Snapshot, retired: Mapping[str, ArchiveRef]) -> None:
        """The snapshot is committed, and in the store, its retired runs' markers naming
        `retired` (run id -> archive record): its runs may leave the cache now, and those
        closed and unchanged since are candidates for retirement."""
        state = self.partitions.get(snapshot.partition)
        if state is not None:
            state.changes.written(snapshot, retired, self.cache, self.retire)
        else:
            for entry in snapshot.runs:
                entry.unwritten -= 1
        self.cache.evict()

    def _parked(self, partition: int, key: bytes | None) -> Rejected | None:
        if not self.parked or key is None:
            return None
        return self.parked.get((partition, key.decode(errors="replace")))

    def _dead_letter(
        self, key: bytes | None, value: bytes, rejected: Rejected, source: Source, failure: Exception | None
    ) -> Publish:
        """A message not applied: counted, and its dead letter; a failure (a bug) is logged
        with its traceback."""
        if failure is not None:
            log.error("internal error on %s: %s", source, rejected.detail, exc_info=failure)
        self.counts.dead_letter(rejected.code)
        return dead_letter(key, value, rejected.code, rejected.detail, source)


def _python_step(value: bytes, runs: RunLookup, *, position: int | None, key: bytes | None) -> Stepped:
    return step(value, runs, position=position, keyed=True, key=key)
