"""The engine without faust or Kafka: a recording broker, and a worker driven over a log.

`Broker` keeps every write in the order issued (outputs and changelog records alike) and
acknowledges them in an order the test picks; what it acknowledged, in that order, is
what survives a crash. Its `Store` is the worker's local copy, which gets a changelog
record when it is acknowledged: after a crash it is exactly the durable changelog, so a
restart from it (on the same machine) and one from the changelog (`Store.of`, on another)
are the same. It refuses the outputs `refuse` names, as a broker refuses a record too
large for its topic: at once (the producer's own check) or in its answer. `drive` runs an
engine over a log in batches, letting the broker acknowledge some writes between steps, as
a broker does while the worker goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiokafka.errors import MessageSizeTooLargeError

from worker.runtime.engine import Engine
from worker.runtime.outputs import Publish
from worker.runtime.processor import Processor, Record


@dataclass(frozen=True)
class Write:
    """One write as the broker got it: an output (`stream`) or a changelog record."""

    stream: str
    """"summary", "progress", "deadletter", "changelog" or "archive"."""
    partition: int
    key: bytes | None
    value: bytes | None
    """None: a changelog tombstone."""
    headers: tuple[tuple[str, bytes], ...] = ()

    @property
    def topic_partition(self) -> tuple[str, object]:
        """Writes in one topic partition keep their order: a changelog partition, or (since
        outputs are partitioned by key) an output topic's key."""
        return (self.stream, self.partition if self.stream in ("changelog", "archive") else self.key)


Message = tuple[int, bytes | None, bytes]
"""(events partition, key, value)."""


class Store:
    """A partitioned store over dicts: the `StoredState` the processor reads; and the
    archive topic as it stands (partition -> its records, in offset order), which outlives a
    worker as the broker does."""

    def __init__(self, records: dict[int, dict[bytes, bytes]] | None = None) -> None:
        self.partitions = records or {}
        self.archive: dict[int, list[tuple[bytes, bytes]]] = {}

    def apply(self, write: Write) -> int:
        """Take an acknowledged write (a changelog record or tombstone, or an archive record);
        its offset in the archive for an archive record."""
        assert write.key is not None
        if write.stream == "archive":
            assert write.value is not None
            records = self.archive.setdefault(write.partition, [])
            records.append((write.key, write.value))
            return len(records) - 1
        held = self.partitions.setdefault(write.partition, {})
        if write.value is None:
            held.pop(write.key, None)
        else:
            held[write.key] = write.value
        return -1

    def get(self, partition: int, key: bytes) -> bytes | None:
        return self.partitions.get(partition, {}).get(key)

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key in sorted(self.partitions.get(partition, {})):
            if key.startswith(prefix):
                yield key, self.partitions[partition][key]

    @classmethod
    def of(cls, durable: list[Write]) -> Store:
        """The store a restarted worker restores: the durable changelog records, in order."""
        store = cls()
        for write in durable:
            if write.stream in ("changelog", "archive"):
                store.apply(write)
        return store


@dataclass
class Broker:
    """The engine's `Outputs`, `Changelog`, `Archive` and `Seeker`, over one `Store`."""

    store: Store
    choose: Callable[[list[Write]], int] = lambda candidates: 0
    """Which of the writes that can be acknowledged next is (its index)."""
    issued: list[Write] = field(default_factory=list)
    durable: list[Write] = field(default_factory=list)
    """Acknowledged writes, in the order acknowledged."""
    commits: dict[int, int] = field(default_factory=dict)
    commit_calls: int = 0
    commits_wait: asyncio.Event | None = None
    """Set: commits finish only once it is set (a slow group coordinator)."""
    seeks: list[tuple[int, int]] = field(default_factory=list)
    refuse: Callable[[Write], str | None] = lambda write: None
    """Outputs refused: None (taken), "at once" (`send` raises) or "answered" (the
    acknowledgement fails). A function of the write, so every worker is refused the same."""
    refused: list[Write] = field(default_factory=list)
    gave_up: list[BaseException] = field(default_factory=list)
    """What the engine stopped on (its `on_failure`)."""
    _pending: list[tuple[Write, asyncio.Future[Any]]] = field(default_factory=list)
    archive: Archive = field(init=False)

    def __post_init__(self) -> None:
        self.archive = Archive(self)

    async def send(self, item: Publish) -> Awaitable[Any]:
        write = Write(item.stream, -1, item.key, item.value, item.headers)
        if self.refuse(write) == "at once":
            self.refused.append(write)
            raise RuntimeError("Error while sending") from too_large(write)
        return self._issue(write)

    async def write(self, partition: int, key: bytes, value: bytes | None) -> Awaitable[Any]:
        return self._issue(Write("changelog", partition, key, value))

    async def commit(self, partition: int, offset: int) -> bool:
        self.commit_calls += 1
        if self.commits_wait is not None:
            await self.commits_wait.wait()
        self.commits[partition] = offset
        return True

    async def seek(self, partition: int, offset: int) -> None:
        self.seeks.append((partition, offset))

    def _issue(self, write: Write) -> asyncio.Future[Any]:
        acknowledged: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.issued.append(write)
        self._pending.append((write, acknowledged))
        return acknowledged

    def acknowledge(self, count: int) -> None:
        """Acknowledge up to `count` pending writes, each picked by `choose` among those that
        can be next: a topic partition's writes are acknowledged in the order sent (aiokafka
        keeps one batch per partition in flight), other partitions' in any order."""
        for _ in range(min(count, len(self._pending))):
            heads: dict[tuple[str, object], int] = {}
            for at, (write, _) in enumerate(self._pending):
                heads.setdefault(write.topic_partition, at)
            candidates = sorted(heads.values())
            picked = self.choose([self._pending[at][0] for at in candidates])
            write, acknowledged = self._pending.pop(candidates[picked])
            if self.refuse(write) == "answered":
                self.refused.append(write)
                acknowledged.set_exception(too_large(write))
                continue
            self.durable.append(write)
            offset = -1
            if write.stream in ("changelog", "archive") and write.key is not None:
                # The local copy gets a write once acknowledged (`worker.runtime.changelog`).
                offset = self.store.apply(write)
            acknowledged.set_result(offset if write.stream == "archive" else None)

    @property
    def pending(self) -> int:
        """Writes issued and not yet acknowledged."""
        return len(self._pending)

    def acknowledge_all(self) -> None:
        self.acknowledge(len(self._pending))


class Archive:
    """The archive topic of a `Broker`: writes acknowledged as the broker's others are, reads
    of what it acknowledged."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def write(self, partition: int, key: bytes, value: bytes) -> Awaitable[int]:
        return self.broker._issue(Write("archive", partition, key, value))

    async def read(self, partition: int, offset: int) -> tuple[bytes | None, bytes | None] | None:
        records = self.broker.store.archive.get(partition, [])
        return records[offset] if 0 <= offset < len(records) else None


def too_large(write: Write) -> MessageSizeTooLargeError:
    return MessageSizeTooLargeError(f"{len(write.value or b'')} bytes")


def new_engine(
    broker: Broker,
    processor: Processor,
    clock: Callable[[], float],
    on_checkpoint: Callable[[float], None] = lambda seconds: None,
) -> Engine:
    async def fail(error: BaseException) -> None:
        broker.gave_up.append(error)
        raise AssertionError(f"the engine gave up: {error!r}")

    return Engine(
        processor,
        broker,
        broker,
        broker,
        archive=broker.archive,
        flush_interval=0.25,
        clock=clock,
        on_failure=fail,
        on_checkpoint=on_checkpoint,
    )


async def drive(
    engine: Engine,
    broker: Broker,
    messages: list[Message],
    first: dict[int, int],
    *,
    batch: Callable[[], int] = lambda: 1000,
    acknowledgements: Callable[[], int] = lambda: 1000,
    clock_step: Callable[[], float] = lambda: 0.1,
    clock: list[float],
) -> None:
    """Feed `messages` (each partition's from offset `first[partition]` on, offsets in log
    order) through `engine`, in batches; the broker acknowledges some writes after each
    step and everything at the end, and every checkpoint under way finishes."""
    offsets: dict[int, int] = {}
    per_partition: dict[int, list[Record]] = {}
    for partition, key, value in messages:
        offset = offsets.get(partition, 0)
        offsets[partition] = offset + 1
        if offset >= first.get(partition, 0):
            per_partition.setdefault(partition, []).append(Record(offset, key, value))
    queues = {partition: list(records) for partition, records in per_partition.items()}
    while any(queues.values()):
        await engine.tick(rebalancing=False)
        for partition, queue in queues.items():
            size = max(1, batch())
            taken, queue[:] = queue[:size], queue[size:]
            if taken:
                await handled(engine.handle(partition, taken), broker)
            broker.acknowledge(acknowledgements())
            await _settle()
        clock[0] += clock_step()
    for _ in range(3):  # the last events' checkpoints are due by time
        clock[0] += 1.0
        await engine.tick(rebalancing=False)
        while engine.checkpointing:
            broker.acknowledge_all()
            await _settle()


async def handled(handling: Awaitable[None], broker: Broker) -> None:
    """Await the engine's `handle`; while it waits for the broker (backpressure), the broker
    acknowledges one write at a time, as a broker does."""
    task = asyncio.ensure_future(handling)
    await _settle()
    while not task.done():
        if not broker.pending:
            raise AssertionError("the engine waits for the broker with nothing left to acknowledge")
        broker.acknowledge(1)
        await _settle()
    await task


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)
