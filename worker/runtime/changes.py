"""What one events partition's next checkpoint writes: the parts its events changed, and the
closed runs it retires.

Events gather their changes here (`PartitionChanges.changed`); `take` turns them into the
records of one checkpoint at one instant (`Snapshot`), and `written` is told once that
checkpoint is committed, when its runs may leave the cache and its closed runs become
candidates for retirement.

**Retirement.** A closed run whose parts a committed checkpoint holds, and that nothing
changed since, is retired by the next snapshot: its stored form, read back from the local
store (the committed bytes), becomes one archive record, and the run's header key a marker
naming it, its task keys tombstones (`Retirement`). A run restored from its archive (or
retired while cached) writes every part back at its next change, tasks first and the header
last; once that is committed it is retired again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from projections.held import header_parts, task_record, task_records
from projections.storage import (
    ArchiveRef,
    archive_to_bytes,
    checkpoint_to_bytes,
    digest_of,
    header_to_bytes,
    marker_of,
    marker_to_bytes,
)
from worker.runtime.cache import CachedRun, RunCache
from worker.runtime.keys import checkpoint_key, header_key, task_id_of, task_key, task_prefix
from worker.runtime.runs import StoredState
from worker.runtime.store import Change

RETIRE_BYTES = 4 * 2**20
"""Stored bytes one checkpoint retires at most (past its first run): each run is read back
and held compressed until committed, so a burst of closes, or the closed runs of a store an
older version wrote, retire over several checkpoints."""


@dataclass(frozen=True, slots=True)
class Retirement:
    """One closed run leaving the hot store: its archive record (the run's stored form, as
    the store holds it), and the changelog records that replace its parts once the archive
    record's offset is known."""

    run_id: str
    archive: bytes
    task_keys: tuple[bytes, ...]

    def ref(self, partition: int, offset: int) -> ArchiveRef:
        """Where its archive record is, written at `offset` of the archive's `partition`."""
        return ArchiveRef(partition, offset, digest_of(self.archive))

    def records(self, ref: ArchiveRef) -> list[Change]:
        """The marker naming the archive record, then the task keys' tombstones."""
        return [(header_key(self.run_id), marker_to_bytes(ref)), *((key, None) for key in self.task_keys)]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one checkpoint of `partition` writes, taken at one instant: the records of
    every part changed since the previous snapshot, as of the event at `offset`, and the
    runs it retires."""

    partition: int
    offset: int
    records: tuple[tuple[bytes, bytes], ...]
    runs: tuple[CachedRun, ...]
    """Runs pinned in the cache until the checkpoint is committed (`PartitionChanges.written`)."""
    retirements: tuple[Retirement, ...] = ()
    events_topic: str | None = None
    """The events topic's id, recorded with the offset (None: not known)."""

    @property
    def checkpoint(self) -> tuple[bytes, bytes]:
        return checkpoint_key(self.partition), checkpoint_to_bytes(self.offset, self.events_topic)


@dataclass(slots=True)
class PartitionChanges:
    """The changes one partition's events made since its last snapshot."""

    handled: int = 0
    """Events handled since the last snapshot."""
    changed: dict[tuple[str, str | None], None] = field(default_factory=dict)
    """Parts (run, task; None for the header) changed since the last snapshot, in order."""
    changed_runs: dict[str, CachedRun] = field(default_factory=dict)
    retire: dict[str, None] = field(default_factory=dict)
    """Closed runs whose parts are all committed (as of a checkpoint written since they last
    changed): the next snapshot retires those not changed since."""

    def change(self, entry: CachedRun, task_id: str | None) -> None:
        """An event applied to `entry`'s run changed this part."""
        run_id = entry.run.run_id
        self.changed[run_id, task_id] = None
        if run_id not in self.changed_runs:
            self.changed_runs[run_id] = entry
            entry.unwritten += 1

    @property
    def pending(self) -> bool:
        return bool(self.handled or self.retire)

    def take(
        self, partition: int, offset: int, store: StoredState, cache: RunCache, events_topic: str | None
    ) -> Snapshot | None:
        """The snapshot of what gathered (None: nothing to write). Taken synchronously, it is
        the state as of the last event handled; later events gather for the next one."""
        if not self.pending:
            return None
        records = []
        for run_id, task_id in self.changed:
            entry = self.changed_runs[run_id]
            if _whole(entry):
                continue  # every part is written below
            if task_id is not None:
                records.append((task_key(run_id, task_id), task_record(entry.run, task_id)))
            elif entry.retired is not None:
                records.append((header_key(run_id), marker_to_bytes(entry.retired, header_parts(entry.run))))
            else:
                records.append((header_key(run_id), header_to_bytes(header_parts(entry.run))))
        for entry in self.changed_runs.values():
            if _whole(entry):
                run = entry.run
                # A stored task is one some event named (`touched`); a declared task nothing
                # arrived for has no record, as before it was retired.
                records += [(task_key(run.run_id, task_id), record) for task_id, record in task_records(run)]
                records.append((header_key(run.run_id), header_to_bytes(header_parts(run))))
                entry.retired, entry.retired_with, entry.whole = None, None, False
        retirements = self._retirements(partition, store)
        if not self.handled and not retirements:
            return None
        taken = Snapshot(
            partition, offset, tuple(records), tuple(self.changed_runs.values()), retirements, events_topic
        )
        self.handled = 0
        self.changed = {}
        self.changed_runs = {}
        return taken

    def _retirements(self, partition: int, store: StoredState) -> tuple[Retirement, ...]:
        """The candidates not changed since they became ones, read back from the store: the
        bytes it holds are the committed ones."""
        retiring: list[Retirement] = []
        budget = RETIRE_BYTES
        for run_id in list(self.retire):
            if budget <= 0:
                break
            del self.retire[run_id]
            if run_id in self.changed_runs:
                continue  # a candidate again once this change is committed
            header = store.get(partition, header_key(run_id))
            if header is None or marker_of(header) is not None:
                continue
            parts = list(store.scan(partition, task_prefix(run_id)))
            budget -= len(header) + sum(len(blob) for _, blob in parts)
            archive = archive_to_bytes(header, [(task_id_of(key), blob) for key, blob in parts])
            retiring.append(Retirement(run_id, archive, tuple(key for key, _ in parts)))
        return tuple(retiring)

    def written(self, snapshot: Snapshot, retired: Mapping[str, ArchiveRef], cache: RunCache, retire: bool) -> None:
        """The snapshot is committed, its retirements to the archive records `retired` names:
        its runs may leave the cache now, and (`retire`) those closed and unchanged since are
        candidates for retirement. A retired run held in the cache takes its marker: its next
        change writes what it changed beside it, or, if it changed since the snapshot (from
        parts the marker has now replaced), every part."""
        for entry in snapshot.runs:
            entry.unwritten -= 1
            if retire and entry.run.closed and not entry.unwritten:
                self.retire[entry.run.run_id] = None
        for run_id, ref in retired.items():
            held = cache.peek(run_id)
            if held is not None:
                held.retired, held.retired_with = ref, held.run.declarations
                held.whole = run_id in self.changed_runs

    def aborted(self, snapshot: Snapshot) -> None:
        """The snapshot will never be committed (its partition is redone from its checkpoint):
        its runs are unpinned; they leave with the partition's."""
        for entry in snapshot.runs:
            entry.unwritten -= 1


def _whole(entry: CachedRun) -> bool:
    """Whether the run's next write is every part of it: a retired run whose declarations
    changed (the archive record holds them), or one that changed while it was being retired."""
    return entry.retired is not None and (entry.whole or entry.run.declarations is not entry.retired_with)
