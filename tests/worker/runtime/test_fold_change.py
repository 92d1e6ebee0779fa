"""A store written by a worker holding its runs in one fold, read on by a worker holding them in
the other (`EVALSTREAM_FOLD`): both folds store the same records, so the summaries, progress
and stored records after the change are those of one worker that never changed."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from tests.native import kernels
from tests.strategies import mixed_logs
from tests.worker.runtime.engine_harness import Store
from worker.runtime.outputs import Publish
from worker.runtime.processor import Processor, Record


def records(log: bytes) -> list[Record]:
    out = []
    for offset, value in enumerate(log.splitlines()):
        try:
            run_id = orjson.loads(value)["run_id"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            run_id = "no-run"
        out.append(Record(offset, str(run_id).encode(), value))
    return out


def outputs(published: list[Publish]) -> list[tuple[str, bytes]]:
    return [(item.stream, item.value) for item in published if item.stream != "deadletter"]


def checkpoint(processor: Processor, store: Store) -> dict[bytes, bytes]:
    """Partition 0's snapshot written into `store`, as a checkpoint does: its records."""
    snapshot = processor.snapshot(0)
    written = {}
    if snapshot is not None:
        written = dict((*snapshot.records, snapshot.checkpoint))
        store.partitions.setdefault(0, {}).update(written)
        processor.written(snapshot, {})
    return written


@given(mixed_logs(late=True), st.integers(0, 10_000), st.booleans(), st.integers(0, 2))
def test_a_worker_reads_on_in_the_other_fold_what_one_fold_stored(
    log: bytes, cut: int, native_first: bool, cache_runs: int
) -> None:
    """The log handled up to `cut` by a worker of one fold and checkpointed, then from there
    by a worker of the other, with a cache of `cache_runs` runs (0: every run is restored from
    the store at each batch): what the second publishes and stores is what a worker of the
    second fold that read the whole log publishes and stores."""
    kernels()  # the native fold is built, or the test fails saying so
    batch = records(log)
    cut %= len(batch) + 1
    store = Store()
    first = Processor(store, native=native_first, cache_runs=cache_runs)
    first.assign([0])
    first.handle(0, batch[:cut], 0.0)
    checkpoint(first, store)
    second = Processor(store, native=not native_first, cache_runs=cache_runs)
    assert second.assign([0]) == {0: cut}
    published, stored = [], {}
    for record in batch[cut:]:  # a batch each, so that a small cache restores runs as it goes
        published += second.handle(0, [record], 1.0)
        stored.update(checkpoint(second, store))

    alone_store = Store()
    alone = Processor(alone_store, native=not native_first, cache_runs=cache_runs)
    alone.assign([0])
    alone_published, alone_stored = [], {}
    alone.handle(0, batch[:cut], 0.0)
    checkpoint(alone, alone_store)
    for record in batch[cut:]:
        alone_published += alone.handle(0, [record], 1.0)
        alone_stored.update(checkpoint(alone, alone_store))
    assert outputs(published) == outputs(alone_published)
    assert stored == alone_stored
    assert store.partitions == alone_store.partitions
