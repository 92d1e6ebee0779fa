"""The runs a worker folds into: a bounded cache over its local store.

A run missing from the cache is restored from the store on its next event: from its parts
(header and task records), or, once retired, from its archive record, which the engine
fetches before handing over a batch that names the run (`archives_needed`): the fold never
waits on the broker. A run the store holds nothing of is new.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

from projections.fold.run import RunState
from projections.held import FoldState, run_of_parts
from projections.native_state import NativeState
from projections.storage import ArchiveRef, NewerStore, archived_run, marker_of, stored_run, task_from_bytes
from worker.runtime.cache import CachedRun, RunCache
from worker.runtime.keys import header_key, task_id_of, task_prefix

T = TypeVar("T")


class StoredState(Protocol):
    """The worker's store, read per partition (the local copy of the changelog, or a dict in tests)."""

    def get(self, partition: int, key: bytes) -> bytes | None: ...

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) of every key that starts with `prefix`."""
        ...


class ArchiveNeeded(LookupError):
    """A retired run's archive record was not fetched before its event was handled."""


class RunStore:
    def __init__(self, store: StoredState | None, cache: RunCache, *, native: bool = False) -> None:
        """`store` None: nothing is stored or restored (an oracle over a whole topic).
        `native`: runs are held in the native fold, else in the Python fold."""
        self.store = store
        self.cache = cache
        self.native = native
        self.refused: NewerStore | None = None
        """Set when a run's stored state was written by a newer version: nothing more is
        checkpointed (the event it was read for is not in the state), the worker must stop."""

    def archives_needed(
        self, partition: int, run_ids: Iterable[str], fetched: Mapping[str, bytes]
    ) -> dict[str, ArchiveRef]:
        """Of `run_ids`, the retired runs neither cached nor in `fetched`: where each one's
        archive record is, to fetch before the batch is handled."""
        if self.store is None:
            return {}
        needed: dict[str, ArchiveRef] = {}
        for run_id in run_ids:
            if run_id in fetched or run_id in self.cache:
                continue
            ref = self._newer_stops(marker_of, self._get(partition, header_key(run_id)))
            if ref is not None:
                needed[run_id] = ref
        return needed

    def cached(self, partition: int, run_id: str, archives: Mapping[str, bytes]) -> CachedRun:
        """The run, from the cache or else restored from the store (and then cached)."""
        entry = self.cache.get(run_id)
        if entry is None:
            entry = self._newer_stops(self._restored, partition, run_id, archives)
            self.cache.add(entry)
        return entry

    def _restored(self, partition: int, run_id: str, archives: Mapping[str, bytes]) -> CachedRun:
        """The run from the store (a new one if it holds nothing of it): from its parts, or
        from its archive record and what late events wrote beside its marker."""
        if self.store is None:
            return CachedRun(self._new(run_id), partition)
        header = self._get(partition, header_key(run_id))
        tasks = [
            task_from_bytes(task_id_of(key), blob) for key, blob in self.store.scan(partition, task_prefix(run_id))
        ]
        ref = marker_of(header)
        if ref is None:
            if header is None and not tasks:
                return CachedRun(self._new(run_id), partition)
            return CachedRun(run_of_parts(stored_run(run_id, header, tasks), self.native), partition)
        archive = archives.get(run_id)
        if archive is None:
            raise ArchiveNeeded(f"run {run_id!r} is retired and its archive record was not fetched")
        run = run_of_parts(archived_run(run_id, ref, archive, header, tasks), self.native)
        return CachedRun(run, partition, retired=ref, retired_with=run.declarations)

    def _new(self, run_id: str) -> FoldState:
        return NativeState(run_id) if self.native else RunState(run_id)

    def _get(self, partition: int, key: bytes) -> bytes | None:
        assert self.store is not None
        return self.store.get(partition, key)

    def _newer_stops(self, read: Callable[..., T], *args: Any) -> T:
        """`read(*args)`, remembering a `NewerStore` it raises (the worker stops on it)."""
        try:
            return read(*args)
        except NewerStore as error:
            self.refused = error
            raise
