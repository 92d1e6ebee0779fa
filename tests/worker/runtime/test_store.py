"""The local copy: records and their offset in one write, its identity, its keys apart."""

from __future__ import annotations

from pathlib import Path

from worker.runtime.restore import unfit
from worker.runtime.store import (
    BLOCK_CACHE_BYTES,
    WRITE_BUFFER_BYTES,
    WRITE_BUFFERS,
    Identity,
    LocalStore,
    PartitionStore,
)

IDENTITY = Identity("cluster", "topic-id", "app")


def test_a_write_puts_records_tombstones_and_the_offset_together(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "state-0")
    assert (store.offset, store.identity) == (None, None)
    store.apply([(b'h"a"', b"1"), (b't["a","x"]', b"2"), (b't["a","y"]', b"3")], 7, IDENTITY)
    store.apply([(b't["a","x"]', None)], 9)
    assert list(store.scan(b't["a",')) == [(b't["a","y"]', b"3")]
    assert (store.get(b'h"a"'), store.offset, store.identity) == (b"1", 9, IDENTITY)
    store.close()
    reopened = PartitionStore(tmp_path / "state-0")
    assert (reopened.offset, reopened.identity, reopened.get(b't["a","y"]')) == (9, IDENTITY, b"3")


def test_its_own_keys_never_show_in_a_scan_of_the_changelogs(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "state-0")
    store.apply([(b"o0", b"{}"), (b'h"a"', b"1")], 3, IDENTITY)
    assert [key for key, _ in store.scan(b"")] == [b"\x00identity", b"\x00offset", b'h"a"', b"o0"]
    assert [key for key, _ in store.scan(b"h")] == [b'h"a"']


def test_a_wiped_copy_is_empty_and_each_app_id_has_a_folder_of_its_own(tmp_path: Path) -> None:
    one, other = LocalStore(tmp_path / "app-one"), LocalStore(tmp_path / "app-two")
    one.partition(0).apply([(b'h"a"', b"1")], 0, IDENTITY)
    assert other.get(0, b'h"a"') is None
    wiped = one.partition(0).wipe()
    one.replace(0, wiped)
    assert (one.get(0, b'h"a"'), wiped.offset, wiped.identity) == (None, None, None)


def test_a_copy_is_kept_only_when_it_is_a_prefix_of_this_changelog(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "state-0")
    assert unfit(store, IDENTITY, 0, 0) is None  # empty: nothing to distrust
    store.apply([(b'h"a"', None)], 4, IDENTITY)  # a copy whose last record is a tombstone
    assert unfit(store, IDENTITY, 0, 10) is None
    assert "another changelog" in (unfit(store, Identity("cluster", "other-topic-id", "app"), 0, 10) or "")
    assert "another changelog" in (unfit(store, Identity("cluster", "topic-id", "other-app"), 0, 10) or "")
    assert "another changelog" in (unfit(store, Identity("other-cluster", "topic-id", "app"), 0, 10) or "")
    assert "past the changelog's end" in (unfit(store, IDENTITY, 0, 4) or "")
    assert "were deleted" in (unfit(store, IDENTITY, 6, 10) or "")
    assert unfit(store, IDENTITY, 5, 10) is None


def test_the_memory_a_copy_holds_grows_with_what_it_holds_up_to_its_bounds(tmp_path: Path) -> None:
    """RocksDB's own account (write buffers, then block cache as records are read back), summed
    over the open copies, within the write buffers' and the block cache's bounds."""
    store = LocalStore(tmp_path)
    empty = store.memory()
    value = bytes(range(256)) * 16
    for batch in range(8):
        store.partition(batch % 2).apply([(f"t{batch}-{n}".encode(), value) for n in range(500)], batch)
    written = store.memory()
    for partition in (0, 1):
        assert sum(1 for _ in store.scan(partition, b"t")) == 2000
    assert empty < written <= store.memory()
    assert store.memory() <= 2 * (WRITE_BUFFERS * WRITE_BUFFER_BYTES + BLOCK_CACHE_BYTES) + 2**20
    store.close()


def test_the_indexes_and_filters_of_its_files_live_in_the_bounded_block_cache(tmp_path: Path) -> None:
    """A long-lived copy writes file after file; what RocksDB keeps of them outside the block
    cache (the table readers) must not grow with the data, or the worker's memory would."""
    store = LocalStore(tmp_path).partition(0)
    value = bytes(range(256)) * 4
    for batch in range(12):  # ~120 MB: a file each time the write buffers fill, compactions among them
        store.apply([(f"t{batch}-{n:06}".encode(), value) for n in range(10_000)], batch)
        assert sum(1 for _ in store.scan(b"t")) == 10_000 * (batch + 1)  # read back: indexes and filters loaded
    parts = store.memory_parts()
    # With indexes and filters outside the cache, readers held ~5 KB per MB of data (~600 KB here).
    assert parts["rocksdb.estimate-table-readers-mem"] < 64 * 2**10
    assert parts["rocksdb.block-cache-usage"] <= BLOCK_CACHE_BYTES + 2**20
    store.close()
