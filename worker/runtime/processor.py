"""What the worker decides about the records it consumes, without Kafka and without I/O.

For each batch of records of one events partition: which offsets are new to the state
(`admit`), what each message does (`projections.step`, the step replay takes too), and what
to publish (dead letters and summary revisions in record order, then coalesced progress).
It keeps the runs in a bounded cache over the stored state (`worker.runtime.cache`) and
gathers, per partition, the parts the events changed since the last checkpoint.
`snapshot` turns those into the records one checkpoint writes; `worker.runtime.checkpoint`
writes them, in the one order that keeps every promise, and calls `written`.

Recovery: after a (re)assignment, `assign` says where each partition is read again from
(one past its checkpoint). The store holds the state as of that checkpoint, plus maybe
some records ahead of it from a checkpoint cut short; every record carries the
fingerprints of the events in it, so an event read again that a record already has is a
redelivery. Runs missing from the cache are restored from the store on their next event.

Retirement: a closed run whose parts a checkpoint has made durable is retired by the next
snapshot (`Retirement`: its stored form, read back from the store, for the archive; then a
marker at its header key and tombstones for its task keys), so that the hot store holds
only open runs and one small marker per closed one. A late event for a retired run needs
its archive record: the engine fetches those a batch needs (`archives_needed`) before
handing the batch over, and the run is restored from it (`projections.storage`). A run
restored from its archive (or retired while cached) writes every part back at its next
change, tasks first and the header last, so that until the header is back the marker
still names the whole run; once that is durable it is retired again.

Progress is coalesced per run: at most one event per window. A progress event costs a
fixed part and O(tasks of its run) (its pass@k equals the summary's exactly), so the window
grows with the work waiting: `progress_interval` while the runs with unpublished changes
have up to `PROGRESS_TASKS` tasks in all, each run's fixed part counted as
`PROGRESS_RUN_TASKS` tasks, proportionally longer above. One big run gets live progress; ten
of them share the same budget, so do thousands of small ones, and progress takes a bounded
share of the worker however many runs are open. At close, and after, a run's progress is
published with each batch whatever the window.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple, Protocol

from events.codec import encode_payload
from projections.progress import progress
from projections.run import Outcome, RunState
from projections.step import Rejected, step
from projections.storage import (
    ArchiveMismatch,
    ArchiveRef,
    NewerStore,
    archive_to_bytes,
    checkpoint_from_bytes,
    checkpoint_to_bytes,
    checkpoint_version,
    closed_header,
    digest_of,
    header_to_bytes,
    marker_of,
    marker_to_bytes,
    restore,
    restore_archived,
    task_from_bytes,
    task_to_bytes,
)
from worker.runtime.cache import CachedRun, RunCache
from worker.runtime.keys import (
    HEADER_PREFIX,
    checkpoint_key,
    header_key,
    run_id_of,
    task_id_of,
    task_key,
    task_prefix,
)
from worker.runtime.outputs import Publish, Source, dead_letter

log = logging.getLogger("evalstream.worker")

RETIRE_BYTES = 4 * 2**20
"""Stored bytes one checkpoint retires at most (past its first run): each run is read back
and held compressed until acknowledged, so a burst of closes, or the closed runs of a store
an older version wrote, retire over several checkpoints."""
PROGRESS_TASKS = 5000
"""Tasks of progress computed per `progress_interval` at most, a run's fixed part counted as
`PROGRESS_RUN_TASKS` more (~3 ms of work per 0.2 s, however big the runs)."""
PROGRESS_RUN_TASKS = 16
"""The fixed part of a run's progress event (its statistics' columns, its verdicts, its
encoding), in tasks: what a run of one or two tasks costs is what 10 to 20 more tasks of a big
run cost (`python -m bench.progress --costs`)."""


class Record(NamedTuple):
    """One consumed message of an events partition."""

    offset: int
    key: bytes | None
    value: bytes


class StoredState(Protocol):
    """The worker's store, read per partition (the table's RocksDB, or a dict in tests)."""

    def get(self, partition: int, key: bytes) -> bytes | None: ...

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) of every key that starts with `prefix`."""
        ...


@dataclass(slots=True)
class Counts:
    """What the processor did with the records it was given, since the worker started
    (read by `worker.runtime.metrics` when scraped: plain ints, cheap on the hot path)."""

    applied: int = 0
    skipped: int = 0
    """Offsets before the state's next one: read again after a rewind, already applied."""
    redelivered: int = 0
    """Events whose event_id the run had applied (a producer's retry, or a rewind past a record)."""
    ignored: int = 0
    """Valid events that change nothing (a second run.closed)."""
    dead_lettered: dict[str, int] = field(default_factory=dict)
    """Reason code -> messages dead-lettered for it."""
    refused: dict[str, int] = field(default_factory=dict)
    """Output stream -> outputs the broker refused (counted by the engine, which sends them)."""

    def dead_letter(self, reason: str) -> None:
        self.dead_lettered[reason] = self.dead_lettered.get(reason, 0) + 1

    def refuse(self, stream: str) -> None:
        self.refused[stream] = self.refused.get(stream, 0) + 1


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
    handled: int = 0
    """Events handled since the last snapshot."""
    changed: dict[tuple[str, str | None], None] = field(default_factory=dict)
    """Parts (run, task; None for the header) changed since the last snapshot, in order."""
    changed_runs: dict[str, CachedRun] = field(default_factory=dict)
    retire: dict[str, None] = field(default_factory=dict)
    """Closed runs whose parts are all durable (as of a checkpoint written since they last
    changed): the next snapshot retires those not changed since."""
    retiring: set[str] = field(default_factory=set)
    """Runs the snapshot being written retires: one restored from the store meanwhile (its
    parts still hot in the local copy) is treated as archived."""


@dataclass(frozen=True, slots=True)
class Retirement:
    """One closed run leaving the hot store: its archive record (the run's stored form, as
    the store holds it), then, once that is acknowledged where, the changelog records that
    replace its parts."""

    run_id: str
    archive: bytes
    task_keys: tuple[bytes, ...]

    def records(self, partition: int, offset: int) -> list[tuple[bytes, bytes | None]]:
        """The marker first, so that any prefix of these leaves the run whole: its parts
        (before the marker) or its archive (after)."""
        marker = marker_to_bytes(ArchiveRef(partition, offset, digest_of(self.archive)))
        return [(header_key(self.run_id), marker), *((key, None) for key in self.task_keys)]


class ArchiveNeeded(LookupError):
    """A retired run's archive record was not fetched before its event was handled."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one checkpoint of `partition` writes, taken at one instant: the records of
    every part changed since the previous snapshot, as of the event at `offset`, and the
    runs it retires."""

    partition: int
    offset: int
    records: tuple[tuple[bytes, bytes], ...]
    runs: tuple[CachedRun, ...]
    """Runs pinned in the cache until the records are written (`Processor.written`)."""
    retirements: tuple[Retirement, ...] = ()

    @property
    def checkpoint(self) -> tuple[bytes, bytes]:
        return checkpoint_key(self.partition), checkpoint_to_bytes(self.offset)


class Processor:
    def __init__(
        self,
        store: StoredState | None = None,
        *,
        topic: str = "events",
        progress_interval: float = 0.2,
        flush_every: int = 1000,
        cache_runs: int = 10_000,
        cache_bytes: int = 64 * 2**20,
        retire: bool = True,
    ) -> None:
        """`store` None: nothing is stored or restored (an oracle over a whole topic).
        `retire`: retire closed runs once durable (retired ones are restored either way)."""
        self.store = store
        self.retire = retire
        self.topic = topic
        self.progress_interval = progress_interval
        self.flush_every = flush_every
        """Events of one partition after which a checkpoint is due (the app also checkpoints
        on a timer): more means fewer changelog bytes and more events redone after a crash."""
        self.cache = RunCache(cache_runs, cache_bytes) if store is not None else RunCache(2**62, 2**62)
        self.partitions: dict[int, PartitionState] = {}
        self.counts = Counts()
        self._progress_pending: dict[str, CachedRun] = {}
        self._pending_tasks = 0
        """Tasks of the runs in `_progress_pending`, as counted when each joined."""
        self._archives: dict[str, bytes] = {}
        """Archive records fetched for the batch being handled (run id -> record value)."""
        self.refused: NewerStore | None = None
        """Set when a run's stored state was written by a newer version: nothing more is
        checkpointed (the event it was read for is not in the state), the worker must stop."""

    def assign(self, partitions: Iterable[int]) -> dict[int, int]:
        """Forget what the worker held (partitions may have moved), and say where each of
        `partitions` must be read again from for the state to be complete: one past its
        checkpoint, or its start. Raises `NewerStore` if a newer version wrote one of them:
        the worker must stop before it consumes."""
        self.forget()
        if self.store is None:
            return {}
        resume = {}
        for partition in partitions:
            stored = self.store.get(partition, checkpoint_key(partition))
            try:
                resume[partition] = checkpoint_from_bytes(stored) + 1 if stored is not None else 0
                state = self.partitions[partition] = PartitionState(next_offset=resume[partition])
                if self.retire and stored is not None and checkpoint_version(stored) == 2:
                    # A store version 2's code wrote: its closed runs were never retired. Once:
                    # the next checkpoint record is this version's.
                    state.retire = {
                        run_id_of(key): None
                        for key, header in self.store.scan(partition, HEADER_PREFIX)
                        if closed_header(header)
                    }
            except NewerStore as error:
                self.refused = error
                raise
        return resume

    def forget(self) -> None:
        """Drop the cache and whatever no checkpoint has taken yet: it is redone by whoever
        reads the partitions next, from their checkpoints."""
        self.cache.clear()
        self.partitions.clear()
        self._progress_pending.clear()
        self._pending_tasks = 0

    def admit(self, partition: int, offset: int) -> Admission:
        """HANDLE a record the state needs next, SKIP one before it (its effects are in the
        state already). AHEAD: later than that. Read from the checkpoint on, that means the
        offsets in between hold no message (transaction markers, or deleted by retention):
        it is handled, and a warning names the gap."""
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
        if self.store is None:
            return {}
        needed: dict[str, ArchiveRef] = {}
        for key in {record.key for record in records if record.key is not None}:
            try:
                run_id = key.decode()
            except UnicodeDecodeError:
                continue  # no event's run id: the event is rejected
            if run_id in fetched or run_id in self.cache:
                continue
            try:
                ref = marker_of(self.store.get(partition, header_key(run_id)))
            except NewerStore as error:
                self.refused = error
                raise
            if ref is not None:
                needed[run_id] = ref
        return needed

    def handle(
        self, partition: int, records: Iterable[Record], now: float, archives: Mapping[str, bytes] | None = None
    ) -> list[Publish]:
        """What to publish for a batch of one partition's records, in offset order.
        `archives`: the archive records `archives_needed` named, fetched."""
        self._archives = dict(archives or {})
        try:
            return self._handle(partition, records, now)
        finally:
            self._archives = {}

    def _handle(self, partition: int, records: Iterable[Record], now: float) -> list[Publish]:
        state = self.partitions.setdefault(partition, PartitionState())
        out: list[Publish] = []
        touched: dict[str, CachedRun] = {}
        counts = self.counts
        changed, changed_runs = state.changed, state.changed_runs
        held: dict[str, CachedRun] = {}

        def lookup(run_id: str) -> RunState:
            # A run is looked up in the cache (which makes it the most recently used) once a
            # batch: `held` has it for the batch's later events.
            entry = held.get(run_id)
            if entry is None:
                entry = held[run_id] = self._cached(partition, run_id)
            return entry.run

        for offset, key, value in records:
            admission = self.admit(partition, offset)
            if admission is Admission.SKIP:
                counts.skipped += 1
                continue
            if admission is Admission.AHEAD:
                log.warning(
                    "%s[%d]: offsets %d to %d are not in the topic (transaction markers, or deleted by retention)",
                    self.topic,
                    partition,
                    state.next_offset,
                    offset - 1,
                )
            state.next_offset = offset + 1
            state.handled += 1
            try:
                stepped = step(value, lookup, position=offset, keyed=True, key=key)
            except Exception as error:  # outside the step's rollback (restoring the run failed): nothing applied
                if self.refused is not None or isinstance(error, ArchiveNeeded | ArchiveMismatch):
                    raise  # not the event's fault: the store is newer, or the batch was not prepared
                rejected = Rejected("internal-error", repr(error))
                out.append(self._dead_letter(key, value, rejected, Source(self.topic, partition, offset), error))
                continue
            if stepped.rejected is not None:
                source = Source(self.topic, partition, offset)
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
            run_id = run.run_id
            entry = touched[run_id] = held[run_id]
            changed[run_id, stepped.task_id] = None
            if run_id not in changed_runs:
                changed_runs[run_id] = entry
                entry.unwritten += 1
            if stepped.summary is not None:
                out.append(Publish("summary", key, stepped.summary, source=Source(self.topic, partition, offset)))
        return out + self._changed(touched.values(), now)

    def _changed(self, entries: Iterable[CachedRun], now: float) -> list[Publish]:
        """File runs a batch changed, make their progress pending, and publish those due."""
        out = []
        for entry in entries:
            self.cache.refile(entry)
            if not entry.progress_pending:
                entry.progress_pending = True
                entry.progress_tasks = len(entry.run.tasks) + PROGRESS_RUN_TASKS
                self._pending_tasks += entry.progress_tasks
                self._progress_pending[entry.run.run_id] = entry
            if entry.run.closed or now - entry.progress_at >= self._window():
                out.append(self._progress(entry, now))
        return out

    def progress_due(self, now: float) -> list[tuple[int, Publish]]:
        """(partition, progress event) of each run with unpublished changes whose window is
        over: the window as it stands when called (the runs published shorten it for the next call)."""
        since = now - self._window()
        due = [entry for entry in self._progress_pending.values() if entry.progress_at <= since]
        return [(entry.partition, self._progress(entry, now)) for entry in due]

    def checkpoint_due(self, partition: int) -> bool:
        state = self.partitions.get(partition)
        return state is not None and state.handled >= self.flush_every

    def unsaved(self) -> list[int]:
        """Partitions with events handled since their last snapshot, or runs to retire."""
        return [partition for partition, state in self.partitions.items() if state.handled or state.retire]

    def snapshot(self, partition: int) -> Snapshot | None:
        """Take what the partition's next checkpoint writes (None: nothing new, or no store).
        Taken synchronously, it is the state as of the last event handled; later events
        gather for the next snapshot."""
        state = self.partitions.get(partition)
        if self.store is None or state is None or state.next_offset is None or self.refused:
            return None
        if not state.handled and not state.retire:
            return None
        records = []
        for run_id, task_id in state.changed:
            entry = state.changed_runs[run_id]
            if entry.archived:
                continue  # every part is written below
            if task_id is None:
                records.append((header_key(run_id), header_to_bytes(entry.run)))
            else:
                records.append((task_key(run_id, task_id), task_to_bytes(entry.run.tasks[task_id])))
        for entry in state.changed_runs.values():
            if entry.archived:
                run = entry.run
                # A stored task is one some event named (`touched`); a declared task nothing
                # arrived for has no record, as before it was retired.
                records += [
                    (task_key(run.run_id, task.task_id), task_to_bytes(task))
                    for task in run.tasks.values()
                    if task.touched
                ]
                records.append((header_key(run.run_id), header_to_bytes(run)))
                entry.archived = False
        retirements = self._retirements(partition, state)
        if not state.handled and not retirements:
            return None
        taken = Snapshot(
            partition, state.next_offset - 1, tuple(records), tuple(state.changed_runs.values()), retirements
        )
        state.handled = 0
        state.changed = {}
        state.changed_runs = {}
        return taken

    def _retirements(self, partition: int, state: PartitionState) -> tuple[Retirement, ...]:
        """The candidates not changed since they became ones, read back from the store: the
        bytes it holds are the durable ones (the checkpoint before is acknowledged)."""
        assert self.store is not None
        retiring: list[Retirement] = []
        budget = RETIRE_BYTES
        for run_id in list(state.retire):
            if budget <= 0:
                break
            del state.retire[run_id]
            if run_id in state.changed_runs:
                continue  # a candidate again once this change is durable
            header = self.store.get(partition, header_key(run_id))
            if header is None or marker_of(header) is not None:
                continue
            parts = list(self.store.scan(partition, task_prefix(run_id)))
            budget -= len(header) + sum(len(blob) for _, blob in parts)
            archive = archive_to_bytes(header, [(task_id_of(key), blob) for key, blob in parts])
            retiring.append(Retirement(run_id, archive, tuple(key for key, _ in parts)))
            entry = self.cache.peek(run_id)
            if entry is not None:
                entry.archived = True
        state.retiring = {retirement.run_id for retirement in retiring}
        return tuple(retiring)

    def written(self, snapshot: Snapshot) -> None:
        """The snapshot's records are in the store: its runs may leave the cache now, and
        those closed and unchanged since are candidates for retirement."""
        state = self.partitions.get(snapshot.partition)
        for entry in snapshot.runs:
            entry.unwritten -= 1
            if self.retire and state is not None and entry.run.closed and not entry.unwritten:
                state.retire[entry.run.run_id] = None
        if state is not None:
            state.retiring.clear()
        self.cache.evict()

    def _dead_letter(
        self, key: bytes | None, value: bytes, rejected: Rejected, source: Source, failure: Exception | None
    ) -> Publish:
        """A message not applied: counted, and its dead letter; a failure (a bug) is logged
        with its traceback."""
        if failure is not None:
            log.error("internal error on %s: %s", source, rejected.detail, exc_info=failure)
        self.counts.dead_letter(rejected.code)
        return dead_letter(key, value, rejected.code, rejected.detail, source)

    def _window(self) -> float:
        return self.progress_interval * max(1.0, self._pending_tasks / PROGRESS_TASKS)

    def _progress(self, entry: CachedRun, now: float) -> Publish:
        """Publish the pending progress of `entry` (every caller has it pending)."""
        run = entry.run
        entry.progress_pending = False
        self._pending_tasks -= entry.progress_tasks
        del self._progress_pending[run.run_id]
        entry.progress_at = now
        # seq = events applied so far: increasing per run, and the same after a restart.
        return Publish("progress", run.run_id.encode(), encode_payload(progress(run, run.event_count)))

    def _cached(self, partition: int, run_id: str) -> CachedRun:
        entry = self.cache.get(run_id)
        if entry is None:
            restored, archived = self._restored(partition, run_id)
            state = self.partitions.get(partition)
            archived = archived or (state is not None and run_id in state.retiring)
            entry = CachedRun(restored or RunState(run_id), partition, archived=archived)
            self.cache.add(entry)
        return entry

    def _restored(self, partition: int, run_id: str) -> tuple[RunState | None, bool]:
        """The run from the store (None: not there), and whether from its archive."""
        if self.store is None:
            return None, False
        header = self.store.get(partition, header_key(run_id))
        try:
            ref = marker_of(header)
            if ref is not None:
                archive = self._archives.get(run_id)
                if archive is None:
                    raise ArchiveNeeded(f"run {run_id!r} is retired and its archive record was not fetched")
                return restore_archived(run_id, ref, archive), True
            tasks = [
                task_from_bytes(task_id_of(key), blob) for key, blob in self.store.scan(partition, task_prefix(run_id))
            ]
            return (restore(run_id, header, tasks) if header is not None or tasks else None), False
        except NewerStore as error:
            self.refused = error
            raise
