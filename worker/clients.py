"""Command-line Kafka clients around the worker: publish a log, read summaries."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import BinaryIO

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from events.codec import MAX_EVENT_BYTES
from worker.replay import route_key
from worker.settings import SUMMARY_MAX_BYTES, Settings


async def publish(settings: Settings, lines: Iterable[bytes]) -> int:
    """Send each line to the events topic keyed by its run_id, as it is (the worker
    dead-letters what is not a valid event). One producer, so each run keeps its order."""
    producer = AIOKafkaProducer(
        **settings.client_options(),
        enable_idempotence=True,
        max_request_size=MAX_EVENT_BYTES + 4096,
        linger_ms=5,
    )
    await producer.start()
    sent = 0
    try:
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
    finally:
        await producer.stop()
    return sent


async def read_summaries(settings: Settings, out: BinaryIO, *, follow: bool, run_id: str | None) -> int:
    """Write the summaries topic's records (of `run_id`, if given) as JSON lines; without
    `follow`, stop at the end of the topic as it was when reading began."""
    consumer = AIOKafkaConsumer(
        **settings.client_options(),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=SUMMARY_MAX_BYTES,
        fetch_max_bytes=SUMMARY_MAX_BYTES,
    )
    await consumer.start()
    count = 0
    try:
        # The consumer's own metadata covers subscribed topics only; ask the cluster.
        cluster = await consumer._client.fetch_all_metadata()
        partitions = [
            TopicPartition(settings.summaries_topic, p)
            for p in cluster.partitions_for_topic(settings.summaries_topic) or ()
        ]
        if not partitions:
            print(
                f"no topic {settings.summaries_topic!r} at {settings.bootstrap}; start the worker first",
                file=sys.stderr,
            )
            return 0
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
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
