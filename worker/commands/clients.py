"""Command-line Kafka clients around the worker: publish a log, read summaries."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterable
from typing import BinaryIO

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from events.codec import MAX_EVENT_BYTES
from worker.commands.replay import route_key
from worker.settings import SUMMARY_MAX_BYTES, Settings


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
    """Send each line to the events topic keyed by its run_id, as it is (the worker
    dead-letters what is not a valid event)."""
    producer = event_producer(settings)
    await producer.start()
    try:
        return await send(producer, settings, lines)
    finally:
        await producer.stop()


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


async def topic_reader(settings: Settings, topic: str, *, at_end: bool = False, wait: float) -> AIOKafkaConsumer | None:
    """A started consumer, in no group, assigned every partition of `topic` at its start
    (or its end): for reading a whole topic. Waits up to `wait` seconds for the topic to
    exist; None if it does not by then. The caller stops the consumer."""
    consumer = AIOKafkaConsumer(
        **settings.client_options(),
        enable_auto_commit=False,
        max_partition_fetch_bytes=SUMMARY_MAX_BYTES,
        fetch_max_bytes=SUMMARY_MAX_BYTES,
    )
    await consumer.start()
    deadline = time.monotonic() + wait
    # The consumer's own metadata covers subscribed topics only; ask the cluster.
    while not (found := (await consumer._client.fetch_all_metadata()).partitions_for_topic(topic)):
        if time.monotonic() >= deadline:
            await consumer.stop()
            return None
        await asyncio.sleep(0.1)
    partitions = [TopicPartition(topic, p) for p in sorted(found)]
    consumer.assign(partitions)
    await (consumer.seek_to_end if at_end else consumer.seek_to_beginning)(*partitions)
    return consumer


async def read_summaries(settings: Settings, out: BinaryIO, *, follow: bool, run_id: str | None) -> int:
    """Write the summaries topic's records (of `run_id`, if given) as JSON lines; without
    `follow`, stop at the end of the topic as it was when reading began."""
    consumer = await topic_reader(settings, settings.summaries_topic, wait=0)
    if consumer is None:
        print(f"no topic {settings.summaries_topic!r} at {settings.bootstrap}; start the worker first", file=sys.stderr)
        return 0
    count = 0
    try:
        ends = await consumer.end_offsets(list(consumer.assignment()))
        wanted = None if run_id is None else run_id.encode()
        while True:
            if not follow and await _at_end(consumer, ends):
                return count
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                for record in records:
                    if wanted is None or record.key == wanted:
                        out.write(record.value + b"\n")
                        out.flush()
                        count += 1
    finally:
        await consumer.stop()


async def _at_end(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    for partition, end in ends.items():
        if await consumer.position(partition) < end:
            return False
    return True
