"""Command-line Kafka clients around the worker: publish a log, read summaries, replay the
events topic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import BinaryIO, TextIO, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from events.codec import MAX_EVENT_BYTES
from worker.commands.replay import Replayer, ReplayStats, route_key, write
from worker.settings import SUMMARY_MAX_BYTES, Settings

Client = TypeVar("Client", AIOKafkaProducer, AIOKafkaConsumer)


class TopicMissing(LookupError):
    """The topic a command reads does not exist on the cluster (args[0]: its name)."""


async def started(client: Client) -> Client:
    """`client` started; a start that fails stops it again (aiokafka leaves an unclosed
    client behind otherwise, and prints it at exit)."""
    try:
        await client.start()
    except BaseException:
        await client.stop()
        raise
    return client


@asynccontextmanager
async def running(client: Client) -> AsyncIterator[Client]:
    """`client` started, and stopped on every path."""
    await started(client)
    try:
        yield client
    finally:
        await client.stop()


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
    await started(consumer)
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
        raise TopicMissing(settings.summaries_topic)
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


async def replay_topic(
    settings: Settings, out: BinaryIO, err: TextIO, *, run_id: str | None, progress_every: int | None
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
    replayer = Replayer(progress_every)
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
                    replayer.stats.lines += 1
                    if wanted is not None and record.key != wanted:
                        continue
                    where = f"{partition.topic}[{partition.partition}]@{record.offset}"
                    outputs = replayer.apply(record.offset, record.value or b"", where, key=record.key, keyed=True)
                    write(outputs, out, err)
    finally:
        await consumer.stop()
    return replayer.finish()
