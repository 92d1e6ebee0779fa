"""Command-line Kafka clients around the worker: publish a log, read summaries, replay the
events topic."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, BinaryIO, TextIO

from aiokafka import AIOKafkaProducer

from events.clients.kafka import TopicMissing, running
from events.clients.subscriber import AsyncProgressSubscriber, AsyncSummarySubscriber
from events.codec import MAX_EVENT_BYTES
from projections.closed_caches import CLOSED_CACHES_BYTES
from projections.native_replay import replayer
from projections.replayer import ReplayStats
from worker.commands.replay import route_key, write
from worker.settings import Settings
from worker.topic_reader import topic_reader


def event_producer(settings: Settings) -> AIOKafkaProducer:
    """The producer every publishing command uses (not started): idempotent, sized for the
    largest event. One producer per command, so each run keeps its order."""
    return AIOKafkaProducer(
        **settings.client_options(),
        enable_idempotence=True,
        max_request_size=MAX_EVENT_BYTES + 4096,
        linger_ms=5,
    )


async def publish(settings: Settings, lines: Iterable[bytes]) -> int:
    """Send each line to the events topic keyed by its run_id, as it is (`evalstream publish`
    checks its lines first: `worker.commands.checked`)."""
    async with running(event_producer(settings)) as producer:
        return await send(producer, settings, lines)


async def send(producer: AIOKafkaProducer, settings: Settings, lines: Iterable[bytes]) -> int:
    """`publish` with a started producer: returns once every line is acknowledged."""
    sent = 0
    pending = []
    for line in lines:
        value = line.rstrip(b"\r\n")
        if not value.strip():
            continue
        pending.append(await producer.send(settings.events_topic, value=value, key=route_key(value) or None))
        sent += 1
        if len(pending) >= 10_000:
            for future in pending:
                await future
            pending.clear()
    for future in pending:
        await future
    return sent


def summary_subscriber(settings: Settings, **filters: Any) -> AsyncSummarySubscriber:
    """A typed subscriber to these settings' summaries topic; `filters` as it takes them."""
    options = settings.client_options()
    return AsyncSummarySubscriber(
        bootstrap=options.pop("bootstrap_servers"), topic=settings.summaries_topic, **filters, **options
    )


def progress_subscriber(settings: Settings, **filters: Any) -> AsyncProgressSubscriber:
    """A typed subscriber to these settings' progress topic; `filters` as it takes them."""
    options = settings.client_options()
    return AsyncProgressSubscriber(
        bootstrap=options.pop("bootstrap_servers"), topic=settings.progress_topic, **filters, **options
    )


async def read_summaries(settings: Settings, out: BinaryIO, *, follow: bool, run_id: str | None) -> int:
    """Write the summaries topic's records (of `run_id`, if given) as JSON lines, each new
    revision once, as it came; without `follow`, stop at the end of the topic as it was when
    reading began. Raises `TopicMissing`."""
    subscriber = summary_subscriber(settings, run_ids=None if run_id is None else [run_id])
    await subscriber.start()
    count = 0
    try:
        async for received in subscriber.received(follow=follow):
            out.write(received.raw + b"\n")
            out.flush()
            count += 1
    finally:
        await subscriber.stop()
    return count


async def replay_topic(
    settings: Settings,
    out: BinaryIO,
    err: TextIO,
    *,
    run_id: str | None,
    progress_every: int | None,
    closed_caches_bytes: int = CLOSED_CACHES_BYTES,
) -> ReplayStats:
    """`evalstream replay --from-topic`: fold the events topic as it stands when reading
    begins, the way the worker does (each partition in offset order, every message keyed,
    the offset as its position), and write what `replay` of a file writes.

    It reads with no consumer group and writes nothing to Kafka, so the worker's state,
    offsets and topics are untouched. Partitions are read one after the other: a run lives
    in one partition, so the order between partitions changes no summary, and reading them
    in turn makes the output the same bytes on every call.
    """
    consumer = await topic_reader(settings, settings.events_topic, wait=0)
    if consumer is None:
        raise TopicMissing(settings.events_topic)
    folding = replayer(progress_every, closed_caches_bytes)
    wanted = None if run_id is None else run_id.encode()
    try:
        partitions = sorted(consumer.assignment(), key=lambda tp: tp.partition)
        ends = await consumer.end_offsets(partitions)
        for partition in partitions:
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            while await consumer.position(partition) < ends[partition]:
                for record in (await consumer.getmany(partition, timeout_ms=500)).get(partition, []):
                    if record.offset >= ends[partition]:
                        break
                    folding.stats.lines += 1
                    if wanted is not None and record.key != wanted:
                        continue
                    where = f"{partition.topic}[{partition.partition}]@{record.offset}"
                    outputs = folding.apply_keyed(record.offset, record.value or b"", where, record.key)
                    write(outputs, out, err)
    finally:
        await consumer.stop()
    return folding.finish()
