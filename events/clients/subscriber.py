"""Typed subscribers to the output topics: `run.summary` and `run.progress` records as the
models of `events.outputs`, read with plain aiokafka.

    with SummarySubscriber(bootstrap="kafka:9092", labels={"benchmark": "contracts-v2"}) as summaries:
        board = summaries.latest()        # every run's current summary, {run_id: RunSummary}
        for summary in summaries:         # then each new revision, as the worker publishes it
            board[summary.run_id] = summary

`AsyncSummarySubscriber` is the same for asyncio (`async with`, `async for`, `await latest()`);
`ProgressSubscriber` and `AsyncProgressSubscriber` read `run.progress` the same way.

Choices (EVENTS.md says what the topics hold, not how to read them):
- A record surfaces once, when it is new for its run: a higher `revision` (progress: `seq`)
  than any seen of that run (`events.latest`). Redelivered records (a restarted worker publishes
  revisions again) and older ones never surface, whether read by iterating or by `latest()`,
  which share what has been seen. Gaps in revisions are normal on the compacted summaries topic.
- `latest()` reads on to the end of the topic as it is at the call and returns a new dict of
  each run's newest record, in the order runs were first seen. The records it reads are seen:
  iterating afterwards yields only newer ones. Iterating follows the topic without end.
- From the start of the topic (default: every run the topic holds, through compaction only each
  run's last summary) or, with `from_end=True`, only what is published after `start`; such a
  subscriber's `latest()` knows only the runs it has seen since.
- Filters: `run_ids` (records keyed by other runs are not even decoded) and, for summaries,
  `labels` (a run matches when its labels include every given pair); both given, both must
  hold. Progress records carry no labels, so progress is filtered by run ids only.
- A tombstone (a null value, which deletes a key on a compacted topic) drops its run from
  `latest()`. A record that is not a valid v1 output record is skipped with a warning on the
  `events.clients.subscriber` logger naming topic, partition and offset, and counted in `invalid`:
  one bad record must not stop a service.
- No consumer group by default: each subscriber reads every partition itself and commits
  nothing, so it never moves anyone's offsets. With `group_id` it is a member of that consumer
  group instead (`events.clients.kafka.group_member`: committed records only, from the group's
  committed offsets, partitions shared with the group's other members), and `commit()` commits
  every record it has looked at: a service that writes what it read elsewhere commits once it
  has written, so a crash reads again what was not written. A missing topic raises
  `TopicMissing` after `wait` seconds (default: at once); an unreachable broker raises aiokafka's
  `KafkaConnectionError`.
- It keeps the newest record of every run that matches its filters in memory, unless
  `keep_latest=False`: then every valid record surfaces, older revisions too, none is kept,
  and `latest()` knows nothing (for a reader idempotent by revision itself, over many runs).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from pydantic import ValidationError

from events.clients.kafka import TopicMissing, group_member, whole_topic
from events.clients.loop import LoopThread
from events.codec import output_problem
from events.latest import Latest, R, revision, seq
from events.outputs import RunProgress, RunSummary

log = logging.getLogger(__name__)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
GROUP_JOIN_SECONDS = 30.0
"""How long a group member waits for its partitions before it reads to the end of none."""


@dataclass(frozen=True, slots=True)
class Received(Generic[R]):
    """One new record, with the bytes it came as and where it stands in the topic."""

    record: R
    raw: bytes
    partition: int
    offset: int
    timestamp: int
    """The record's Kafka timestamp (milliseconds since the epoch): when it was published."""


class AsyncSubscriber(Generic[R]):
    """What both asyncio subscribers share; use `AsyncSummarySubscriber` or `AsyncProgressSubscriber`."""

    def __init__(
        self,
        model: type[R],
        order: Callable[[R], int],
        topic: str,
        *,
        bootstrap: str,
        run_ids: Iterable[str] | None,
        from_end: bool,
        wait: float,
        group_id: str | None = None,
        keep_latest: bool = True,
        **client_options: Any,
    ) -> None:
        self.topic = topic
        self.invalid = 0
        """Records skipped because they were not valid output records."""
        self._model: type[R] = model
        self._options = {"bootstrap_servers": bootstrap, **client_options}
        self._run_ids = None if run_ids is None else frozenset(run_ids)
        self._keys = None if self._run_ids is None else frozenset(run_id.encode() for run_id in self._run_ids)
        self._from_end = from_end
        self._wait = wait
        self._consumer: AIOKafkaConsumer | None = None
        self._pending: deque[ConsumerRecord[bytes, bytes]] = deque()
        """Records fetched and not yet looked at: a caller that stops iterating mid-batch loses none."""
        self._latest: Latest[R] = Latest(order)
        self._keep_latest = keep_latest
        self._group_id = group_id
        self._looked: dict[TopicPartition, int] = {}
        """A group member's next offset per partition past every record looked at: what `commit` commits."""

    async def start(self) -> None:
        if self._group_id is None:
            consumer = await whole_topic(self.topic, at_end=self._from_end, wait=self._wait, **self._options)
        else:
            consumer = await group_member(self.topic, self._group_id, wait=self._wait, **self._options)
        if consumer is None:
            raise TopicMissing(self.topic, self._options["bootstrap_servers"])
        self._consumer = consumer

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None

    async def __aenter__(self) -> AsyncSubscriber[R]:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    def __aiter__(self) -> AsyncIterator[R]:
        return self._records()

    async def _records(self) -> AsyncIterator[R]:
        async for received in self.received():
            yield received.record

    async def received(self, *, follow: bool = True) -> AsyncGenerator[Received[R], None]:
        """Each new record with its bytes and place; without `follow`, up to the end of the
        topic as it is at the call."""
        async for batch in self.batches(follow=follow, most=1):
            yield batch[0]

    async def batches(self, *, follow: bool = True, most: int = 500) -> AsyncGenerator[list[Received[R]], None]:
        """`received` a list at a time: up to `most` new records of those fetched, never an
        empty list; records fetched and not yet handed out stay for the next call."""
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("the subscriber is not started: use it in `async with`, or await start() first")
        ends = None if follow else await self._ends(consumer)
        while True:
            batch: list[Received[R]] = []
            while self._pending and len(batch) < most:
                received = self._take(self._pending.popleft())
                if received is not None:
                    batch.append(received)
            if batch:
                yield batch
            elif ends is not None and await _at_end(consumer, ends):
                return
            else:
                await self._fetch(consumer)

    async def commit(self) -> None:
        """A group member's commit of every record looked at so far (handed out, or skipped as
        invalid, filtered or old), in the partitions it still has; nothing for a subscriber of
        no group. Raises aiokafka's `CommitFailedError` when the group took partitions away
        meanwhile (their new owner reads those records again)."""
        consumer = self._consumer
        if consumer is None or self._group_id is None or not self._looked:
            return
        owned = consumer.assignment()
        await consumer.commit({place: offset for place, offset in self._looked.items() if place in owned})
        self._looked.clear()

    async def _fetch(self, consumer: AIOKafkaConsumer) -> None:
        for records in (await consumer.getmany(timeout_ms=500)).values():
            self._pending.extend(records)

    async def _ends(self, consumer: AIOKafkaConsumer) -> dict[TopicPartition, int]:
        """The end of each partition the subscriber reads, as it is now; a group member's
        partitions come with its first fetches (a member the group gives none has none)."""
        if self._group_id is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + GROUP_JOIN_SECONDS
            while not consumer.assignment() and loop.time() < deadline:
                await self._fetch(consumer)
        ends: dict[TopicPartition, int] = await consumer.end_offsets(list(consumer.assignment()))
        return ends

    async def latest(self) -> dict[str, R]:
        """Each run's newest record, once the topic is read to its end as it is now."""
        async for _ in self.received(follow=False):
            pass
        return dict(self._latest)

    def _take(self, message: ConsumerRecord[bytes, bytes]) -> Received[R] | None:
        if self._group_id is not None:
            self._looked[TopicPartition(message.topic, message.partition)] = message.offset + 1
        if self._keys is not None and message.key is not None and message.key not in self._keys:
            return None
        if message.value is None:
            if message.key is not None:
                self._latest.forget(message.key.decode(errors="replace"))
            return None
        try:
            record = self._model.model_validate_json(message.value)
        except ValidationError as error:
            self.invalid += 1
            log.warning(
                "%s[%d]@%d is not a valid %s record, skipped: %s",
                message.topic,
                message.partition,
                message.offset,
                self._model.__name__,
                output_problem(error),
            )
            return None
        if not self._wanted(record) or (self._keep_latest and not self._latest.offer(record)):
            return None
        return Received(record, message.value, message.partition, message.offset, message.timestamp)

    def _wanted(self, record: R) -> bool:
        return self._run_ids is None or record.run_id in self._run_ids


async def _at_end(consumer: AIOKafkaConsumer, ends: Mapping[TopicPartition, int]) -> bool:
    owned = consumer.assignment()  # a group member's may shrink as others join
    for partition, end in ends.items():
        if partition in owned and await consumer.position(partition) < end:
            return False
    return True


class AsyncSummarySubscriber(AsyncSubscriber[RunSummary]):
    """`run.summary` records of the summaries topic (compacted, keyed by run_id)."""

    def __init__(
        self,
        *,
        bootstrap: str = DEFAULT_BOOTSTRAP,
        topic: str = "evalstream.summaries",
        run_ids: Iterable[str] | None = None,
        labels: Mapping[str, str] | None = None,
        from_end: bool = False,
        wait: float = 0.0,
        **client_options: Any,
    ) -> None:
        super().__init__(
            RunSummary,
            revision,
            topic,
            bootstrap=bootstrap,
            run_ids=run_ids,
            from_end=from_end,
            wait=wait,
            **client_options,
        )
        self._labels = dict(labels or {})

    def _wanted(self, record: RunSummary) -> bool:
        return super()._wanted(record) and all(record.labels.get(k) == v for k, v in self._labels.items())


class AsyncProgressSubscriber(AsyncSubscriber[RunProgress]):
    """`run.progress` records of the progress topic (coalesced; not compacted)."""

    def __init__(
        self,
        *,
        bootstrap: str = DEFAULT_BOOTSTRAP,
        topic: str = "evalstream.progress",
        run_ids: Iterable[str] | None = None,
        from_end: bool = False,
        wait: float = 0.0,
        **client_options: Any,
    ) -> None:
        super().__init__(
            RunProgress,
            seq,
            topic,
            bootstrap=bootstrap,
            run_ids=run_ids,
            from_end=from_end,
            wait=wait,
            **client_options,
        )


class Subscriber(Generic[R]):
    """A blocking twin of an asyncio subscriber, run on its own event loop (`events.clients.loop`)."""

    def __init__(self, subscriber: AsyncSubscriber[R]) -> None:
        self._async: AsyncSubscriber[R] = subscriber
        self._loop: LoopThread | None = None

    @property
    def invalid(self) -> int:
        return self._async.invalid

    def __enter__(self) -> Subscriber[R]:
        self._loop = LoopThread(f"evalstream-{self._async.topic}")
        try:
            self._loop.call(self._async.start())
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._close()

    def _close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            try:
                loop.call(self._async.stop())
            finally:
                loop.close()

    def __iter__(self) -> Iterator[R]:
        return (received.record for received in self.received())

    def received(self, *, follow: bool = True) -> Iterator[Received[R]]:
        """As `AsyncSubscriber.received`."""
        loop = self._running()
        updates = self._async.received(follow=follow)
        try:
            while (received := loop.call(_next(updates))) is not None:
                yield received
        finally:
            if self._loop is loop:  # once the subscriber is closed, its loop has closed the iteration
                loop.call(updates.aclose())

    def latest(self) -> dict[str, R]:
        """As `AsyncSubscriber.latest`."""
        return self._running().call(self._async.latest())

    def _running(self) -> LoopThread:
        if self._loop is None:
            raise RuntimeError("the subscriber is not started: use it in a `with` block")
        return self._loop


async def _next(updates: AsyncIterator[Received[R]]) -> Received[R] | None:
    return await anext(updates, None)


class SummarySubscriber(Subscriber[RunSummary]):
    """`AsyncSummarySubscriber`, blocking; takes the same keyword arguments."""

    def __init__(self, **options: Any) -> None:
        super().__init__(AsyncSummarySubscriber(**options))


class ProgressSubscriber(Subscriber[RunProgress]):
    """`AsyncProgressSubscriber`, blocking; takes the same keyword arguments."""

    def __init__(self, **options: Any) -> None:
        super().__init__(AsyncProgressSubscriber(**options))
