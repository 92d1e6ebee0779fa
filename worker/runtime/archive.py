"""Reading the archive topic: one record per retired run (key: run id; value: its stored
form, `projections.storage.archive_to_bytes`), compacted, partitioned like the events topic.

Written by the checkpoint that retires a run, inside its transaction
(`worker.runtime.checkpoint`), and read back by offset, where the run's marker says, when a
late event comes for it: by one consumer of its own, in no group, reading committed
records only, one read at a time.

A read has three outcomes. `Found`: the record. `Gone`: the broker answered and there is no
record at that offset any more (the topic was deleted or recreated, or the record removed):
the run's state is lost, and only a replay into a new app id brings it back. `Slow`: no
answer within `READ_TIMEOUT`, or the record is not readable yet; nothing is known, and the
caller asks again.

**Pending is not gone.** A committed reader sees a partition up to its last stable offset:
the first offset of a transaction still open, or one whose commit markers have not reached
the partition yet (`commit_transaction` returns before they are all written). A late event
can ask for a record its run's retirement committed a moment ago, at or past that offset;
it is gone only if it is also at or past the high watermark (the end of what the partition
holds at all, committed or not).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.settings import Settings
from worker.topic_reader import high_watermark, record_at, topic_reader

READ_TIMEOUT = 30.0
"""Seconds a read waits for its record before it is reported slow (and asked again)."""
FETCH_BYTES = 2**20
"""Most bytes a read fetches past the offset (the record itself comes whole, however large)."""


@dataclass(frozen=True, slots=True)
class Found:
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Gone:
    """The broker has no record at the offset."""


@dataclass(frozen=True, slots=True)
class Slow:
    """The broker did not answer in time."""


Read = Found | Gone | Slow


class TopicArchive:
    def __init__(self, settings: Settings, timeout: float = READ_TIMEOUT) -> None:
        self.settings = settings
        self.topic = settings.archive_topic
        self.timeout = timeout
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()

    async def read(self, partition: int, offset: int) -> Read:
        try:
            return await asyncio.wait_for(self._read(partition, offset), self.timeout)
        except TimeoutError:
            return Slow()

    async def _read(self, partition: int, offset: int) -> Read:
        async with self._lock:
            if self._consumer is None:
                self._consumer = await topic_reader(
                    self.settings, self.topic, wait=self.timeout, fetch_bytes=FETCH_BYTES
                )
                if self._consumer is None:
                    return Gone()  # the topic itself is gone
            place = TopicPartition(self.topic, partition)
            if offset >= (await self._consumer.end_offsets([place]))[place]:
                end = await high_watermark(self._consumer, place)
                if end is None or offset < end:
                    return Slow()  # pending: its transaction's markers are on their way
                return Gone()  # past the partition's end: not the topic the marker was written to
            record = await record_at(self._consumer, place, offset)
            return Gone() if record is None else Found(record.key, record.value)

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
