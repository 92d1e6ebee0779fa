"""faust's Kafka consumer, adjusted in two ways: a short fetch wait, and seeks that tell
which messages were fetched before them.

**Fetch wait.** faust builds its aiokafka consumer with `fetch_max_wait_ms=1500`, and
aiokafka sends one fetch per broker at a time, leaving out partitions whose last records
the app has not taken yet. So while the events partition's records are being processed, a
fetch goes out for the worker's other partitions (faust's internal ones, changelogs), which
have no data: the broker holds it for the full 1.5 s, and the events partition cannot be
fetched again until it returns. Measured here: publish-to-progress p50 1.1 s / p99 1.8 s at
1,000 events/s, and a no-op faust agent stalling 0.6 s on every other fetch (5,600 events/s;
7,700 with a 20 ms wait). A short wait costs an idle worker a few empty fetches a second.

**Seeks with a fence.** The worker's state decides where a partition is read from (it
rewinds to its checkpoint after every rebalance), but faust hands the agent messages it
fetched earlier: a new worker fetches from the committed offset before its state is
restored, and those messages, held in faust's fetch loop and stream queue, reach the agent
after the rewind. Seen in the rebalance scenario: a worker resumed at 141 and was handed 179
(the previous owner's committed offset) a few milliseconds later. `seek` therefore runs on
the consumer's own thread, where aiokafka hands out records, and raises a fence there: every
message carries the fence reached when its batch was handed out (`fetched_after`), so the
app drops what was fetched before its rewind. faust's own filter, which drops a message below
the highest offset it has read, is turned off for the fenced topics: after a rewind the
stale messages it reads would make it drop the ones the rewind asked for.

`install` swaps the consumer class of one app's transport, nothing global.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.types.tuples import ConsumerMessage

RecordMap = Mapping[TP, list[Any]]


class _ReadOffsets(dict[TP, int | None]):
    """faust's read offsets, as its fetch loop sees them: never known for the `fenced`
    topics, so it drops none of their messages. Other topics keep faust's filter: its table
    recovery relies on it to drop changelog records fetched before its own seeks."""

    def __init__(self, fenced: frozenset[str]) -> None:
        super().__init__()
        self.fenced = fenced

    def __getitem__(self, tp: TP) -> int | None:
        return None if tp.topic in self.fenced else self.get(tp)


def install(app: faust.App, fetch_max_wait_ms: int, fenced: frozenset[str] = frozenset()) -> None:
    """Make `app` (before it starts) fetch with `fetch_max_wait_ms`, and leave the order of
    the `fenced` topics' messages to `seek` and `fetched_after`."""

    class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
        fence_reached = 0
        """The highest fence a seek has made (`seek_fenced`)."""
        batch_fence = 0
        """`fence_reached` when the batch faust is converting was handed out."""

        def _create_worker_consumer(self, transport: Any) -> AIOKafkaConsumer:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_max_wait_ms  # read when the consumer starts
            return consumer

        async def _fetch_records(
            self,
            consumer: AIOKafkaConsumer,
            active_partitions: set[TP],
            timeout: float | None = None,
            max_records: int | None = None,
        ) -> RecordMap:
            records: RecordMap = await super()._fetch_records(consumer, active_partitions, timeout, max_records)
            # On this thread, with no await since aiokafka checked the records against
            # the partitions' positions: no seek can fall in between.
            self.batch_fence = self.fence_reached
            return records

        fences = 0
        """Fences handed out (`fence`): counted on the app's loop, ahead of `fence_reached`."""

        async def seek_fenced(self, tp: TP, offset: int, fence: int) -> None:
            self.fence_reached = max(self.fence_reached, fence)
            self._ensure_consumer().seek(tp, offset)

    class Consumer(faust_aiokafka.Consumer):
        _thread: ConsumerThread

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._read_offset = _ReadOffsets(fenced)

        def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        def _to_message(self, tp: TP, record: Any) -> ConsumerMessage:
            # faust's fetch loop takes one batch at a time and converts its records as it
            # goes, so the fence saved with the batch is this record's.
            message = super()._to_message(tp, record)
            message.fence = self._thread.batch_fence  # type: ignore[attr-defined]  # ConsumerMessage has a __dict__
            return message

    app.transport.Consumer = Consumer  # type: ignore[misc]  # per app, not for every faust app in the process


def fence(app: faust.App) -> int:
    """A new fence for the next `seek`: no message fetched so far reaches it. Taken before
    the seek is made, so that the app can hold it before the first message after the seek
    can arrive."""
    thread = app.consumer._thread  # type: ignore[attr-defined]
    thread.fences += 1
    return int(thread.fences)


async def seek(app: faust.App, tp: TP, offset: int, fence: int) -> None:
    """Seek `tp` to `offset` on the consumer's thread; messages fetched after it reach `fence`."""
    await app.consumer._thread.call_thread(app.consumer._thread.seek_fenced, tp, offset, fence)  # type: ignore[attr-defined]


def fetched_after(message: faust.types.Message, fence: int | None) -> bool:
    """Whether `message` was fetched after the seek made with `fence` (never, without one)."""
    return fence is not None and getattr(message, "fence", -1) >= fence
