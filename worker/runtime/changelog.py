"""The worker's table: faust's changelog-backed RocksDB table, read and written per partition.

faust restores it (the changelog into RocksDB) when partitions are assigned, and keeps
standby copies; the worker reads and writes it itself, naming the partition, since faust
only knows the partition of the message its stream is handling. A write goes to the
partition's RocksDB and to the same changelog partition, through the producer, whose
future is the broker's acknowledgement (`worker.runtime.checkpoint` waits on it).

A local copy is never trusted to be complete up to the offset faust recorded for it
(`persisted_offset`): faust drops the changelog records waiting in its queue each time it
resumes the flow at the end of a recovery, and a standby replica then reads on past them,
so its copy has holes behind an offset that says it is up to date. Seen in the rebalance
scenario: a standby promoted to active without reading anything restored runs hundreds of
events short of their checkpoint, whose records the changelog held. So a partition that
becomes active is read from the changelog's start (compaction keeps it near one record per
task and run), not from where its local copy claims to be.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from typing import Any

import faust
from faust.types import TP

from worker.runtime import internals


class Table(faust.Table[bytes, bytes]):
    def persisted_offset(self, tp: TP) -> int | None:
        return None


class TableState:
    """The table as `Processor`'s store and `checkpoint`'s changelog."""

    def __init__(self, app: faust.App, table: Table, events_topic: str) -> None:
        self.app = app
        self.table = table
        self.events_topic = events_topic

    def get(self, partition: int, key: bytes) -> bytes | None:
        value: bytes | None = internals.partition_db(self.table, partition).get(key)
        return value

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return internals.scan(internals.partition_db(self.table, partition), prefix)

    async def write(self, partition: int, key: bytes, value: bytes) -> Awaitable[Any]:
        internals.partition_db(self.table, partition)[key] = value
        topic = self.table.changelog_topic.get_topic_name()
        return await self.app.producer.send(topic, key, value, partition, None, None)

    async def commit(self, partition: int, offset: int) -> bool:
        return await internals.commit(self.app, {TP(self.events_topic, partition): offset})
