"""The engine without faust or Kafka: a broker in memory with Kafka's transactional rules, an
events topic read by a consumer the engine seeks, and a driver.

`Broker` keeps, per events partition, the epoch of its transactional id: claiming a partition
(`Claims.claim`) bumps it, aborts what the previous producer had open and fences it (its
next send or commit raises `ProducerFenced`). A producer's records are answered
(`acknowledge`) in an order the test picks, a topic partition's in the order sent, and are
nothing until their transaction commits: `committed` is every committed write, in commit
order, which is all that survives a crash and all a committed reader ever sees. Records the
test names are refused, at once (the producer's own check) or in the answer; `fail` makes any
step of a transaction raise, to try every failure. `Store` is a worker's local copy: the
committed changelog up to an offset, restored from `committed` by a claim.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiokafka.errors import MessageSizeTooLargeError, ProducerFenced

from projections.native_events import NATIVE
from worker.runtime.archive import Found, Gone, Read
from worker.runtime.engine import Engine
from worker.runtime.outputs import Headers, Publish
from worker.runtime.ownership import Claim
from worker.runtime.processor import Processor, Record
from worker.runtime.store import Change
from worker.runtime.transactions import Stream

EVENTS_TOPIC_ID = "events-topic-id"
WRITTEN = datetime(2026, 12, 5, tzinfo=UTC)
"""The outputs' `ce_time`: one instant, so that two workers' outputs compare."""
OUTPUT_OFFSETS = 1_000_000
"""The first offset of each output topic."""


@dataclass(frozen=True)
class Write:
    """One record as the broker got it: an output, a changelog record or an archive record."""

    stream: str
    partition: int
    """The events partition whose producer wrote it (a changelog or archive partition is its
    events partition's number)."""
    key: bytes | None
    value: bytes | None
    """None: a changelog tombstone."""
    headers: Headers = ()
    offset: int = -1
    """Its offset in its partition: of the changelog, the archive or an output topic."""

    @property
    def place(self) -> tuple[str, object]:
        """Writes to one topic partition are answered in the order sent: a changelog or archive
        partition, or (outputs are partitioned by key) an output topic's key."""
        return (self.stream, self.partition if self.stream in ("changelog", "archive") else self.key)


Message = tuple[int, bytes | None, bytes]
"""(events partition, key, value)."""


class Store:
    """A worker's local copy: per partition, the committed changelog up to an offset."""

    def __init__(self, records: dict[int, dict[bytes, bytes]] | None = None) -> None:
        self.partitions: dict[int, dict[bytes, bytes]] = records or {}
        self.offsets: dict[int, int] = {}

    def apply(self, partition: int, changes: Iterable[Change], offset: int) -> None:
        held = self.partitions.setdefault(partition, {})
        for key, value in changes:
            if value is None:
                held.pop(key, None)
            else:
                held[key] = value
        self.offsets[partition] = offset

    def get(self, partition: int, key: bytes) -> bytes | None:
        return self.partitions.get(partition, {}).get(key)

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        held = self.partitions.get(partition, {})
        for key in sorted(held):
            if key.startswith(prefix):
                yield key, held[key]


Refusal = Callable[[Write], str | None]
"""A write's fate: None (taken), "at once" (the send raises) or "answered" (its answer fails)."""


def never(write: Write) -> str | None:
    return None


@dataclass
class Broker:
    choose: Callable[[list[Write]], int] = lambda candidates: 0
    """Which of the writes that can be answered next is (its index)."""
    refuse: Refusal = never
    fail: Callable[[str], BaseException | None] = lambda step: None
    """Called at each step of a transaction ("begin", "send", "answer", "offsets", "commit",
    "committed"): an error to raise there ("committed": after the commit took effect)."""
    committed: list[Write] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=dict)
    """The group's committed offset of each events partition."""
    refused: list[Write] = field(default_factory=list)
    epochs: dict[int, int] = field(default_factory=dict)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)
    """(topic, partition) -> its next offset (aborted records take offsets too); an output
    topic's partition is -1 (one sequence of offsets a topic is enough)."""
    commits: int = 0
    batched: bool = False
    """A refusal takes every write to its place that is still waiting, as a refused batch does."""
    refusal: Callable[[Write], BaseException] = field(default_factory=lambda: too_large)
    """What a refused write's answer raises."""
    collateral: Callable[[Write], BaseException | None] | None = None
    """What each other write still waiting then fails with (None: nothing), as aiokafka's
    records fail once a refusal failed their transaction, or a refused batch's other records."""
    _pending: list[tuple[Write, asyncio.Future[int]]] = field(default_factory=list)

    def acknowledge(self, count: int) -> None:
        """Answer up to `count` pending writes, each picked by `choose` among those that can
        be next (a topic partition's in the order sent)."""
        for _ in range(min(count, len(self._pending))):
            heads: dict[tuple[str, object], int] = {}
            for at, (write, _) in enumerate(self._pending):
                heads.setdefault(write.place, at)
            candidates = sorted(heads.values())
            picked = self.choose([self._pending[at][0] for at in candidates])
            write, answered = self._pending.pop(candidates[picked])
            if answered.done():
                continue  # aborted
            error = self.fail("answer")
            if error is not None:
                answered.set_exception(error)
            elif self.refuse(write) == "answered":
                self.refused.append(write)
                answered.set_exception(self.refusal(write))
                for other, waiting in self._pending:
                    if self.batched and other.place == write.place and not waiting.done():
                        waiting.set_exception(too_large(other))
                    elif self.collateral is not None and not waiting.done():
                        failure = self.collateral(other)
                        if failure is not None:
                            waiting.set_exception(failure)
            else:
                answered.set_result(write.offset)

    def acknowledge_all(self) -> None:
        while self._pending:
            self.acknowledge(len(self._pending))

    @property
    def pending(self) -> int:
        return sum(1 for _, answered in self._pending if not answered.done())

    def changelog(self, partition: int) -> list[Write]:
        return [write for write in self.committed if write.stream == "changelog" and write.partition == partition]

    def read_archive(self, partition: int, offset: int) -> Read:
        for write in self.committed:
            if write.stream == "archive" and write.partition == partition and write.offset == offset:
                return Found(write.key, write.value)
        return Gone()

    def outputs(self) -> list[Write]:
        return [write for write in self.committed if write.stream in ("summary", "progress", "deadletter")]


class Producer:
    """One claim's transactional producer of an events partition."""

    def __init__(self, broker: Broker, partition: int) -> None:
        self.broker = broker
        self.partition = partition
        self.epoch = broker.epochs[partition]
        self.open: list[tuple[Write, asyncio.Future[int]]] | None = None

    def _check(self, step: str) -> None:
        if self.broker.epochs[self.partition] != self.epoch:
            raise ProducerFenced()
        error = self.broker.fail(step)
        if error is not None:
            raise error

    def topic(self, stream: Stream) -> str:
        return stream

    async def begin(self) -> None:
        self._check("begin")
        self.open = []

    async def send(
        self, stream: Stream, key: bytes | None, value: bytes | None, *, partition: int | None, headers: Headers = ()
    ) -> Awaitable[int]:
        self._check("send")
        assert self.open is not None, "a send outside a transaction"
        place: tuple[str, int] = (stream, self.partition)
        if stream in ("changelog", "archive"):
            assert partition == self.partition
            offset = self.broker.ends.get(place, 0)
        else:
            # An output topic's offsets run far ahead of the changelog's, as a busy topic's do:
            # an output's offset taken for a changelog one would show.
            place = (stream, -1)
            offset = self.broker.ends.get(place, OUTPUT_OFFSETS)
        self.broker.ends[place] = offset + 1
        write = Write(stream, self.partition, key, value, headers, offset)
        if self.broker.refuse(write) == "at once":
            self.broker.refused.append(write)
            raise RuntimeError("Error while sending") from too_large(write)
        answered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.open.append((write, answered))
        self.broker._pending.append((write, answered))
        return answered

    async def output(self, item: Publish) -> Awaitable[int]:
        headers = item.cloudevent("/evalstream/test", WRITTEN)
        return await self.send(item.stream, item.key, item.value, partition=None, headers=headers)

    async def commit(self, offset: int | None) -> None:
        if offset is not None:
            self._check("offsets")
        self._check("commit")
        assert self.open is not None
        assert all(answered.done() and answered.exception() is None for _, answered in self.open), (
            "a commit before every record of the transaction was answered"
        )
        self.broker.committed += [write for write, _ in self.open]
        if offset is not None:
            self.broker.offsets[self.partition] = offset
        self.broker.commits += 1
        self.open = None
        error = self.broker.fail("committed")
        if error is not None:
            raise error

    async def abort(self) -> None:
        self._discard()

    async def close(self) -> None:
        self._discard()

    def _discard(self) -> None:
        for _, answered in self.open or ():
            if not answered.done():
                answered.set_exception(ProducerFenced())
                answered.exception()  # nobody may wait for it: not an error to log
        self.open = None


class Claims:
    """Claims over a `Broker`, restoring a worker's `Store` from what was committed."""

    def __init__(self, broker: Broker, store: Store) -> None:
        self.broker = broker
        self.store = store
        self.producers: list[Producer] = []
        self.claimed = 0

    async def claim(self, partition: int) -> Claim:
        self.claimed += 1
        self.broker.epochs[partition] = self.broker.epochs.get(partition, 0) + 1
        for earlier in self.producers:
            if earlier.partition == partition:
                earlier._discard()  # the broker aborts what it left open
        producer = Producer(self.broker, partition)
        self.producers.append(producer)
        log = self.broker.changelog(partition)
        held = self.store.offsets.get(partition, -1)
        newer = [write for write in log if write.offset > held]
        if newer:
            self.store.apply(partition, [(write.key or b"", write.value) for write in newer], newer[-1].offset)
        return Claim(producer, len(newer), EVENTS_TOPIC_ID, 2**62)


class Archive:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def read(self, partition: int, offset: int) -> Read:
        return self.broker.read_archive(partition, offset)


def too_large(write: Write) -> MessageSizeTooLargeError:
    return MessageSizeTooLargeError(f"{len(write.value or b'')} bytes")


class Consumer:
    """The events topic as the engine's consumer reads it: a position per partition, moved
    by the engine's seeks and by each batch taken."""

    def __init__(self, messages: list[Message]) -> None:
        self.topic: dict[int, list[Record]] = {}
        for partition, key, value in messages:
            records = self.topic.setdefault(partition, [])
            records.append(Record(len(records), key, value))
        self.positions: dict[int, int] = {}
        self.seeks: list[tuple[int, int]] = []

    async def seek(self, partition: int, offset: int) -> None:
        self.seeks.append((partition, offset))
        self.positions[partition] = offset

    def take(self, partition: int, count: int) -> list[Record]:
        at = self.positions.get(partition, 0)
        batch = self.topic.get(partition, [])[at : at + count]
        self.positions[partition] = at + len(batch)
        return batch

    def at_end(self, partition: int) -> bool:
        return self.positions.get(partition, 0) >= len(self.topic.get(partition, []))


@dataclass
class Worker:
    """An engine, its processor, local copy and consumer, over a shared `Broker`."""

    broker: Broker
    consumer: Consumer
    store: Store
    processor: Processor
    engine: Engine
    claims: Claims
    clock: list[float]
    gave_up: list[BaseException]

    def idle(self) -> bool:
        """Every assigned partition read to its end, and everything of it committed."""
        engine = self.engine
        if not engine.consuming or engine.checkpointing:
            return False
        partitions = engine.owned.keys()
        if any(not self.consumer.at_end(partition) for partition in partitions):
            return False
        if self.processor.unsaved() or any(held.gathering.outputs for held in engine.owned.values()):
            return False
        return not any(entry.progress_pending for entry in self.processor.cache)


def worker(
    broker: Broker,
    messages: list[Message],
    store: Store | None = None,
    *,
    flush_every: int = 1000,
    cache_runs: int = 100,
    progress_interval: float = 0.2,
    retire: bool = True,
    on_checkpoint: Callable[[float], None] = lambda seconds: None,
    native: bool = NATIVE is not None,
) -> Worker:
    store = store if store is not None else Store()
    clock = [0.0]
    gave_up: list[BaseException] = []
    processor = Processor(
        store,
        progress_interval=progress_interval,
        flush_every=flush_every,
        cache_runs=cache_runs,
        retire=retire,
        native=native,
    )
    consumer = Consumer(messages)
    claims = Claims(broker, store)

    async def fail(error: BaseException) -> None:
        gave_up.append(error)

    engine = Engine(
        processor,
        claims,
        store,
        consumer,
        archive=Archive(broker),
        flush_interval=0.25,
        clock=lambda: clock[0],
        on_failure=fail,
        on_checkpoint=on_checkpoint,
        reclaim_after=0.0,
        retry_after=0.0,
    )
    return Worker(broker, consumer, store, processor, engine, claims, clock, gave_up)


async def settle(rounds: int = 8) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def claimed(engine: Engine) -> None:
    """`engine` given partition 0 and past the rebalance: the partition claimed and sought."""
    engine.assigned([0])
    await settle()
    await engine.tick(rebalancing=False)


async def step(
    worker: Worker,
    *,
    batch: Callable[[], int] = lambda: 1000,
    acknowledgements: Callable[[], int] = lambda: 1000,
    clock_step: Callable[[], float] = lambda: 0.1,
) -> None:
    """One fetch of the worker's consumer: a tick, a batch of each partition's records, some
    answers from the broker, time passing."""
    engine = worker.engine
    await engine.tick(rebalancing=False)
    for partition in sorted(engine.owned):
        if engine.ready(partition):
            taken = worker.consumer.take(partition, max(1, batch()))
            if taken:
                await handled(engine.handle(partition, taken), worker.broker)
        worker.broker.acknowledge(acknowledgements())
        await settle()
    await settle()
    worker.clock[0] += clock_step()


async def run(worker: Worker, steps: int = 100_000, **pace: Any) -> None:
    """Step the worker until it is idle (everything read and committed)."""
    for _ in range(steps):
        if worker.idle() or worker.gave_up:
            return
        await step(worker, **pace)
        if not worker.broker.pending:
            worker.clock[0] += 0.3  # nothing in flight: let the next checkpoint fall due
    raise AssertionError("the worker did not become idle")


async def handled(handling: Awaitable[None], broker: Broker) -> None:
    """Await the engine's `handle`; while it waits for the broker (backpressure), the broker
    answers one write at a time, as a broker does."""
    task = asyncio.ensure_future(handling)
    await settle()
    while not task.done():
        if not broker.pending:
            await _asks_or_done(task, broker)
        broker.acknowledge(1)
        await settle()
    await task


async def _asks_or_done(task: asyncio.Future[None], broker: Broker, rounds: int = 1000) -> None:
    """Let the loop run until `task` is done or the broker has something to answer. A write
    that fails at once, again and again, renews its producer each time with no request in
    flight: a bounded number of rounds, more than `settle` gives; past `rounds`, the engine
    is waiting for nothing."""
    for _ in range(rounds):
        if task.done() or broker.pending:
            return
        await asyncio.sleep(0)
    raise AssertionError("the engine waits for the broker with nothing left to answer")
