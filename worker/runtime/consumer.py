"""faust's Kafka consumer, with the events topic taken out of its per-message stream.

**Batches.** faust's fetcher task asks its consumer for the next records of every active
partition (`_wait_next_records`), then hands them one by one to its streams, awaiting a
`wait_first` (4 tasks, ~11 callbacks) and queue hops per message: ~170 us a message,
where decoding and folding one costs ~10 us. This consumer takes the events topic's
records out of each fetched batch, before faust sees them, and gives them to the worker's
engine a partition's batch at a time (`worker.runtime.engine`), on the same task, in
offset order. faust still does what it is good at: the group, assignment, timers, the web
server. It never sees an events message, so it never acks, commits or seeks one on its own
account. The consumer reads committed records only: a producer's aborted transaction is
never handled.

Why this is safe across rebalances: records are only fetched for partitions faust has
resumed, which it does at the end of a rebalance; the engine drops a partition's records
until it has sought it to its checkpoint, and that seek is made on this same task right
before a fetch, so nothing fetched before it is handed over after it. When faust stops the
flow (a revocation begins), a batch already fetched is dropped, not handled.

**Fetch wait.** faust builds its aiokafka consumer with `fetch_max_wait_ms=1500`, and
aiokafka sends one fetch per broker at a time, leaving out partitions whose records the app
has not taken yet: while the events partition's records were being handled, a fetch for
the worker's other (empty) partitions held the broker for the full 1.5 s. Measured before:
publish-to-progress p99 1.8 s at 1,000 events/s; with 20 ms, 216 ms.

**Stop.** The consumer's thread stops within `CLOSE_SECONDS` whatever the broker does:
aiokafka's fetcher, closing, awaits the fetch tasks it cancels, and one sleeping in its retry
backoff (a fetch failed: the broker is away) raises that cancellation out of
`AIOKafkaConsumer.stop()`. Out of the thread's stop it would end the thread before the thread
says it stopped, and faust's stop (SIGTERM) would wait for it forever.

`install` swaps the consumer class of one app's transport, nothing global.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from worker.runtime import internals
from worker.runtime.processor import Record
from worker.runtime.transactions import CLOSE_SECONDS

log = logging.getLogger("evalstream.worker")

BatchHandler = Callable[[int, list[Record]], Awaitable[None]]
Tick = Callable[[], Awaitable[None]]


class Hooks:
    """What the consumer calls on faust's fetcher task for `topic`: `tick` before each fetch,
    `handle` with each of its partitions' records; set by the app once its engine exists.
    `poll`: the longest a fetch waits for records, so that `tick` runs at least that often."""

    def __init__(self, topic: str, poll: float) -> None:
        self.topic = topic
        self.poll = poll
        self.tick: Tick | None = None
        self.handle: BatchHandler | None = None
        self.last_timestamp: dict[int, int] = {}
        """Partition -> the Kafka timestamp (ms) of the last record handed to `handle`."""


def install(app: faust.App, fetch_max_wait_ms: int, hooks: Hooks | None = None) -> None:
    """Make `app` (before it starts) fetch with `fetch_max_wait_ms`, read committed records
    only, and, given `hooks`, hand their topic's records to them instead of faust's streams."""

    class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> AIOKafkaConsumer:
            consumer = internals.create_worker_consumer(self, transport)
            internals.set_fetch_max_wait(consumer, fetch_max_wait_ms)
            internals.read_committed(consumer)
            return consumer

        async def on_thread_stop(self) -> None:
            """faust's, within `CLOSE_SECONDS` and never ended by aiokafka's leaked
            cancellation (the module's docstring, "Stop"); the thread's own cancellation goes on."""
            try:
                await asyncio.wait_for(super().on_thread_stop(), CLOSE_SECONDS)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                log.warning("the consumer stopped with a fetch to the broker cut short (the broker is away)")
            except TimeoutError:
                log.warning("the consumer did not stop within %g s (the broker is away); left behind", CLOSE_SECONDS)

    class Consumer(faust_aiokafka.Consumer):
        def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        async def _wait_next_records(self, timeout: float) -> tuple[Mapping[TP, list[Any]] | None, Any]:
            if hooks is None:
                return await internals.wait_next_records(self, timeout)
            if hooks.tick is not None and self.flow_active:
                await hooks.tick()
            records, active = await internals.wait_next_records(self, min(timeout, hooks.poll))
            if not records or hooks.handle is None:
                return records, active
            for tp in [tp for tp in records if tp.topic == hooks.topic]:
                batch = records.pop(tp)
                # A revocation began while the batch was being fetched: it is read again
                # by whoever owns the partition next.
                if self.flow_active and batch:
                    hooks.last_timestamp[tp.partition] = batch[-1].timestamp
                    await hooks.handle(tp.partition, [Record(r.offset, r.key, r.value or b"") for r in batch])
            return records, active

    app.transport.Consumer = Consumer  # type: ignore[misc]  # per app, not for every faust app in the process
