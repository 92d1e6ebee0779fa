"""The archive topic: one record per retired run (key: run id; value: its stored form,
`projections.storage.archive_to_bytes`), compacted, partitioned like the events topic.

Written through the worker's producer by the checkpoint that retires a run, and read back
by offset, where the run's marker says, when a late event comes for it (one consumer of its
own, in no group, one read at a time).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.settings import Settings
from worker.topic_reader import record_at, topic_reader

log = logging.getLogger("evalstream.worker")

READ_TIMEOUT = 30.0
"""Seconds a read waits for its record (it is acknowledged before any marker names it)."""
FETCH_BYTES = 2**20
"""Most bytes a read fetches past the offset (the record itself comes whole, however large)."""


class TopicArchive:
    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.topic = settings.archive_topic
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()

    async def write(self, partition: int, key: bytes, value: bytes) -> Awaitable[int]:
        sent = await self.app.producer.send(self.topic, key, value, partition, None, None)
        return self._offset(sent)

    @staticmethod
    async def _offset(sent: Awaitable[object]) -> int:
        offset: int = (await sent).offset  # type: ignore[attr-defined]  # aiokafka's RecordMetadata
        return offset

    async def read(self, partition: int, offset: int) -> tuple[bytes | None, bytes | None] | None:
        try:
            return await asyncio.wait_for(self._read(partition, offset), READ_TIMEOUT)
        except TimeoutError:
            log.error(
                "the archive record at %s[%d]@%d was not read within %.0f s",
                self.topic,
                partition,
                offset,
                READ_TIMEOUT,
            )
            return None

    async def _read(self, partition: int, offset: int) -> tuple[bytes | None, bytes | None] | None:
        async with self._lock:
            if self._consumer is None:
                self._consumer = await topic_reader(
                    self.settings, self.topic, wait=READ_TIMEOUT, fetch_bytes=FETCH_BYTES
                )
                if self._consumer is None:
                    return None
            record = await record_at(self._consumer, TopicPartition(self.topic, partition), offset)
            return None if record is None else (record.key, record.value)

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
