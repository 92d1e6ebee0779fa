"""The worker's table: faust's changelog-backed RocksDB table, read and written per partition.

faust restores it (the changelog into RocksDB) when partitions are assigned; the worker
reads and writes it itself, naming the partition, since faust only knows the partition of
the message its stream is handling. A write is sent to the partition's changelog through
the producer, whose future is the broker's acknowledgement (`worker.runtime.checkpoint`
waits on it), and reaches the local RocksDB only once acknowledged.

**The local copy is the changelog up to an offset.** faust records, in each partition's
RocksDB, the offset it has read the changelog to (`persisted_offset`), and a partition
that becomes active is read from one past it. That offset is trusted because nothing else
writes the copy: faust's own recovery (records, then the offset, in one batch at a time),
and the worker's writes, each applied when the broker acknowledges it, in the order it
acknowledges them (a partition's in the order sent); the offset of each acknowledged
checkpoint record is then recorded, and every write before it in the partition is in the
copy already. So the copy never holds a write the changelog lacks (a crash leaves it a
prefix), and a restarted worker reads only the changelog's tail: restart cost follows the
writes since the last checkpoint, not every run ever stored. Standby replicas are off
(`table_standby_replicas=0`): faust drops the changelog records queued when it resumes the
flow at the end of a recovery and a standby then reads on past them, so its copy had
holes behind its offset. `verify_local_copies` checks a copy against the changelog before
the worker starts, so one left over from another broker or a recreated topic is wiped.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Awaitable, Iterator, Mapping
from pathlib import Path
from typing import Any

import faust
import rocksdict
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from faust.types import TP

from worker.runtime import internals
from worker.runtime.keys import checkpoint_key
from worker.settings import Settings

log = logging.getLogger("evalstream.worker")


class TableState:
    """The table as `Processor`'s store and `checkpoint`'s changelog."""

    def __init__(self, app: faust.App, table: faust.Table[bytes, bytes], events_topic: str) -> None:
        self.app = app
        self.table = table
        self.events_topic = events_topic

    def get(self, partition: int, key: bytes) -> bytes | None:
        value: bytes | None = internals.partition_db(self.table, partition).get(key)
        return value

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return internals.scan(internals.partition_db(self.table, partition), prefix)

    async def write(self, partition: int, key: bytes, value: bytes | None) -> Awaitable[Any]:
        topic = self.table.changelog_topic.get_topic_name()
        sent = await self.app.producer.send(topic, key, value, partition, None, None)
        return self._acknowledged(TP(topic, partition), key, value, sent)

    async def _acknowledged(self, tp: TP, key: bytes, value: bytes | None, sent: Awaitable[Any]) -> Any:
        """Awaited by the checkpoint in the order written: a refused write raises before it
        reaches the local copy, and the copy stays a prefix of the changelog (a tombstone
        deletes the key there, as faust's recovery does when it reads one)."""
        metadata = await sent
        db = internals.partition_db(self.table, tp.partition)
        if value is None:
            del db[key]
        else:
            db[key] = value
        if key == checkpoint_key(tp.partition):
            self.table.data.set_persisted_offset(tp, metadata.offset)
        return metadata

    async def commit(self, partition: int, offset: int) -> bool:
        return await internals.commit(self.app, {TP(self.events_topic, partition): offset})


async def verify_local_copies(settings: Settings, changelog_topic: str, paths: Mapping[int, Path]) -> list[int]:
    """Wipe each partition's local copy (`paths`: partition -> its RocksDB directory) that
    the changelog does not vouch for: the changelog's record at the copy's offset must be
    there and the copy must hold it. A copy fails when it is of another changelog (a broker
    or a topic recreated, or none yet), or when compaction has dropped that record (a later owner wrote
    past it): it is then restored from the changelog's start. Returns the partitions wiped."""
    held = {partition: path for partition, path in paths.items() if path.exists()}
    if not held:
        return []
    consumer = AIOKafkaConsumer(enable_auto_commit=False, **settings.client_options())
    await consumer.start()
    wiped = []
    try:
        exists = changelog_topic in await consumer.topics()
        for partition, path in sorted(held.items()):
            if not exists or not await _vouched(consumer, TopicPartition(changelog_topic, partition), path):
                shutil.rmtree(path, ignore_errors=True)
                wiped.append(partition)
    finally:
        await consumer.stop()
    if wiped:
        log.info("local copies of partitions %s not in the changelog: restored from its start", wiped)
    return wiped


async def _vouched(consumer: AIOKafkaConsumer, tp: TopicPartition, path: Path) -> bool:
    db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
    try:
        stored = db.get(internals.persisted_offset_key())
        if stored is None:
            return False
        offset = int(stored)
        consumer.assign([tp])
        if offset >= (await consumer.end_offsets([tp]))[tp]:
            return False
        consumer.seek(tp, offset)
        records = (await consumer.getmany(tp, timeout_ms=5000, max_records=1)).get(tp, [])
        return bool(records) and records[0].offset == offset and db.get(records[0].key) == records[0].value
    finally:
        db.close()
