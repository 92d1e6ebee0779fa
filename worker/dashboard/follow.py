"""The progress and summaries topics read into the board: from their start, then as they grow.

Each topic is read whole, in no consumer group (`topic_reader`), so the dashboard moves nobody's
offsets and any number of dashboards can run. At start each topic is read to its end as it is
then (`catch_up`) before the server answers, so the first page already shows every run's
latest state; then it is followed. A topic that does not exist yet (the dashboard started
before the worker created it) is waited for, and said so on the pages. A record that is not a
valid output record is skipped, logged and counted: one bad record must not stop the pages.

Not `events.clients.subscriber`: the pages show when each run last moved, which is the Kafka record's
timestamp (a run read at start moved when its record was published, not when it was read),
and a summary deleted by a tombstone leaves them; the subscribers surface neither.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Literal

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from pydantic import ValidationError

from events.codec import output_problem
from events.outputs import RunProgress, RunSummary
from worker.dashboard.board import Board
from worker.settings import Settings
from worker.topic_reader import topic_reader

log = logging.getLogger(__name__)

State = Literal["waiting", "reading", "live"]
FETCH_BYTES = 1024 * 1024
"""Most bytes a fetch brings (a larger record still comes, alone). With a fetch of the whole
record limit (64 MiB) the consumer held up to that much, twice (it fetches ahead), per topic
while reading a long topic at start: 330 MB of RSS with 10,000 runs on the topics, against
the board's own 55 MB."""


class Follower:
    """One output topic, read into the board."""

    def __init__(
        self, settings: Settings, topic: str, take: Callable[[ConsumerRecord[bytes, bytes], float], None]
    ) -> None:
        self.settings = settings
        self.topic = topic
        self.state: State = "waiting"
        self.records = 0
        self.invalid = 0
        self._take = take
        self._consumer: AIOKafkaConsumer | None = None

    async def open(self) -> None:
        """Connect (an unreachable broker raises here) and assign the topic if it exists."""
        self._consumer = await topic_reader(self.settings, self.topic, wait=0, fetch_bytes=FETCH_BYTES)

    async def catch_up(self) -> None:
        """Read the topic to its end as it is now (nothing if it does not exist yet)."""
        consumer = self._consumer
        if consumer is None:
            return
        self.state = "reading"
        ends = await consumer.end_offsets(list(consumer.assignment()))
        for partition, end in ends.items():
            while await consumer.position(partition) < end:
                self._handle(await consumer.getmany(timeout_ms=200))
        self.state = "live"

    async def follow(self) -> None:
        """Forever: wait for the topic if need be, then take every new record."""
        if self._consumer is None:
            self._consumer = await topic_reader(self.settings, self.topic, wait=math.inf, fetch_bytes=FETCH_BYTES)
            assert self._consumer is not None  # an unbounded wait returns only with the topic
        self.state = "live"
        while True:
            self._handle(await self._consumer.getmany(timeout_ms=1000))

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    def _handle(self, batches: dict[object, list[ConsumerRecord[bytes, bytes]]]) -> None:
        for records in batches.values():
            for record in records:
                self.records += 1
                try:
                    self._take(record, record.timestamp / 1000)
                except ValidationError as error:
                    self.invalid += 1
                    log.warning(
                        "%s[%d]@%d is not a valid output record, skipped: %s",
                        record.topic,
                        record.partition,
                        record.offset,
                        output_problem(error),
                    )


def followers(settings: Settings, board: Board) -> list[Follower]:
    """A follower for each of the two output topics, taking its records into `board`."""

    def progress(record: ConsumerRecord[bytes, bytes], at: float) -> None:
        if record.value is not None:
            board.offer_progress(RunProgress.model_validate_json(record.value), at)

    def summary(record: ConsumerRecord[bytes, bytes], at: float) -> None:
        if record.value is None:
            if record.key is not None:
                board.drop_summary(record.key.decode(errors="replace"))
            return
        board.offer_summary(RunSummary.model_validate_json(record.value), at, (record.partition, record.offset))

    return [
        Follower(settings, settings.progress_topic, progress),
        Follower(settings, settings.summaries_topic, summary),
    ]


async def start(followers_: list[Follower]) -> list[asyncio.Task[None]]:
    """Open and catch up every follower, then follow each on a task of its own."""
    for follower in followers_:
        await follower.open()
    await asyncio.gather(*(follower.catch_up() for follower in followers_))
    return [asyncio.create_task(follower.follow(), name=f"follow {follower.topic}") for follower in followers_]
