"""The worker's local copy of its changelog: one RocksDB per events partition.

**Format.** A partition's database holds the changelog's keys (`worker.runtime.keys`) with
their latest committed values, and two keys of its own, which no changelog key can be
(changelog keys start with `h`, `t` or `o`):
- `\\x00offset`: the changelog offset the copy is complete up to (ASCII digits): every
  committed record of the partition's changelog at or below it is in the copy, none after;
- `\\x00identity`: which changelog the copy was made from, as JSON
  `{"cluster": cluster id, "topic": changelog topic id, "app": app id}`
  (`worker.runtime.identity`). A copy whose identity is not the changelog's is wiped before
  it is read (`worker.runtime.restore`).

**Only committed data.** The copy is written in two ways, each one RocksDB write batch that
holds the records and the new offset together, so that a crash leaves the copy at one offset
or the next, never between: a restore, with the committed records it read from the
changelog (`worker.runtime.restore`), and a checkpoint, with its own records once its
transaction is committed (`worker.runtime.checkpoint`). Nothing an aborted or fenced
transaction wrote ever reaches it.

**Paths.** `<data dir>/<app id>/state-<partition>`: two app ids sharing a data dir never
open each other's files.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import rocksdict

OFFSET_KEY = b"\x00offset"
IDENTITY_KEY = b"\x00identity"

WRITE_BUFFER_BYTES = 8 * 2**20
WRITE_BUFFERS = 2
BLOCK_CACHE_BYTES = 8 * 2**20
"""Per partition, and it holds the files' indexes and filters too, so the database's memory is
bounded by it and the write buffers whatever its files. RocksDB's defaults (64 MiB write
buffers, indexes and filters outside the cache) let RSS grow with the store for as long as the
worker ran. The store is small (closed runs leave it) and rewritten all the time, so the cache
fills with blocks of files compaction has since deleted: a larger one only took longer to
fill (32 MiB took an hour of a 1,000 events/s stream). The run cache in front of the store is
what keeps hot runs in memory, and the OS's page cache holds the files."""
MEMORY_PROPERTIES = (
    "rocksdb.block-cache-usage",
    "rocksdb.cur-size-all-mem-tables",
    "rocksdb.estimate-table-readers-mem",
)
"""RocksDB's own account of the memory a database holds: its block cache (with the indexes
and filters), its write buffers, and what its table readers hold outside the cache."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Which changelog a copy was made from."""

    cluster: str
    topic: str
    app: str

    def to_bytes(self) -> bytes:
        return orjson.dumps({"cluster": self.cluster, "topic": self.topic, "app": self.app})

    @classmethod
    def of(cls, data: bytes | None) -> Identity | None:
        if data is None:
            return None
        try:
            stored = orjson.loads(data)
            return cls(str(stored["cluster"]), str(stored["topic"]), str(stored["app"]))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None


Change = tuple[bytes, bytes | None]
"""A changelog record: key and value (None: a tombstone, which deletes the key)."""


def _options() -> rocksdict.Options:
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(WRITE_BUFFER_BYTES)
    options.set_max_write_buffer_number(WRITE_BUFFERS)
    table = rocksdict.BlockBasedOptions()
    table.set_bloom_filter(3, block_based=True)
    table.set_block_cache(rocksdict.Cache(BLOCK_CACHE_BYTES))
    table.set_cache_index_and_filter_blocks(True)
    # The newest files' indexes and filters, read by every lookup, stay in the cache.
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    options.set_block_based_table_factory(table)
    return options


class PartitionStore:
    """The copy of one events partition's changelog partition."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = rocksdict.Rdict(str(path), options=_options())

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(key)
        return value

    def scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) of every key that starts with `prefix`, in key order."""
        iterator = self._db.iter()
        iterator.seek(prefix)
        while iterator.valid():
            key = iterator.key()
            if not key.startswith(prefix):
                return
            yield key, iterator.value()
            iterator.next()

    @property
    def offset(self) -> int | None:
        """The changelog offset the copy is complete up to (None: it holds nothing)."""
        stored = self._db.get(OFFSET_KEY)
        return int(stored) if stored is not None else None

    @property
    def identity(self) -> Identity | None:
        return Identity.of(self._db.get(IDENTITY_KEY))

    def memory(self) -> int:
        """The bytes RocksDB says the database holds in memory (`MEMORY_PROPERTIES`)."""
        return sum(self.memory_parts().values())

    def memory_parts(self) -> dict[str, int]:
        """Each of `MEMORY_PROPERTIES`, in bytes."""
        return {name: self._db.property_int_value(name) or 0 for name in MEMORY_PROPERTIES}

    def apply(self, changes: Iterable[Change], offset: int, identity: Identity | None = None) -> None:
        """Put committed changelog records, in their changelog order, and the offset they
        reach (and the identity, when given), in one write."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in changes:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        batch.put(OFFSET_KEY, str(offset).encode())
        if identity is not None:
            batch.put(IDENTITY_KEY, identity.to_bytes())
        self._db.write(batch)

    def close(self) -> None:
        self._db.close()

    def wipe(self) -> PartitionStore:
        """Delete the copy; the empty one that replaces it."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        return PartitionStore(self.path)


class LocalStore:
    """Every partition's copy, opened on first use: the `StoredState` the processor reads."""

    def __init__(self, root: Path) -> None:
        """`root`: `<data dir>/<app id>`."""
        self.root = root
        self._partitions: dict[int, PartitionStore] = {}

    def partition(self, partition: int) -> PartitionStore:
        store = self._partitions.get(partition)
        if store is None:
            store = self._partitions[partition] = PartitionStore(self.root / f"state-{partition}")
        return store

    def replace(self, partition: int, store: PartitionStore) -> None:
        self._partitions[partition] = store

    def get(self, partition: int, key: bytes) -> bytes | None:
        return self.partition(partition).get(key)

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return self.partition(partition).scan(prefix)

    def memory(self) -> int:
        """The bytes the open copies hold in memory, as RocksDB counts them."""
        return sum(store.memory() for store in self._partitions.values())

    def close(self) -> None:
        for store in self._partitions.values():
            store.close()
        self._partitions.clear()
