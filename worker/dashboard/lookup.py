"""An older run's summary read back from the summaries topic, where the index says it is.

One consumer of its own (no group), assigned one partition at a time: seek to the offset, fetch,
take the record at that offset. The topic is compacted by run id and the index holds the offset
of each run's latest summary, which compaction keeps until a newer one comes (and then the board
holds the newer one). A read waits at most `READ_TIMEOUT` seconds, the wait for a read already
under way included, so a page never blocks longer: past it the page says the summary could not
be read in time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from events.outputs import RunSummary
from worker.settings import Settings
from worker.topic_reader import record_at, topic_reader

log = logging.getLogger(__name__)

FETCH_BYTES = 64 * 1024
"""Most bytes a read fetches past the offset (the record itself comes whole, however large):
one summary is wanted, and a fetch of the 64 MiB record limit held that much of the topic."""
READ_TIMEOUT = 2.0
"""Seconds a page waits at most for an older run's summary."""


class Lookup(Protocol):
    async def read(self, partition: int, offset: int) -> RunSummary | None:
        """The summary at that place; None: not there (any more) or not read in time."""
        ...


class TopicLookup:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()

    async def read(self, partition: int, offset: int) -> RunSummary | None:
        try:
            return await asyncio.wait_for(self._read(partition, offset), READ_TIMEOUT)
        except TimeoutError:
            log.warning(
                "summary at %s[%d]@%d not read within %.1f s",
                self.settings.summaries_topic,
                partition,
                offset,
                READ_TIMEOUT,
            )
            return None

    async def _read(self, partition: int, offset: int) -> RunSummary | None:
        async with self._lock:
            consumer = self._consumer
            if consumer is None:
                consumer = self._consumer = await topic_reader(
                    self.settings, self.settings.summaries_topic, wait=0, fetch_bytes=FETCH_BYTES
                )
                if consumer is None:
                    return None
            record = await record_at(consumer, TopicPartition(self.settings.summaries_topic, partition), offset)
            if record is None or record.value is None:
                return None  # compacted away: a newer record of the run replaced it
            try:
                return RunSummary.model_validate_json(record.value)
            except ValidationError:
                return None

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
