"""A whole-topic reader with the settings' connection, for every part of the worker that
reads an output topic outside a consumer group (commands, dashboard, local harnesses)."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from events.clients.kafka import whole_topic
from worker.settings import SUMMARY_MAX_BYTES, Settings


async def topic_reader(
    settings: Settings, topic: str, *, at_end: bool = False, wait: float, fetch_bytes: int = SUMMARY_MAX_BYTES
) -> AIOKafkaConsumer | None:
    """`events.clients.kafka.whole_topic` with these settings' connection."""
    return await whole_topic(topic, at_end=at_end, wait=wait, fetch_bytes=fetch_bytes, **settings.client_options())


async def record_at(consumer: AIOKafkaConsumer, place: TopicPartition, offset: int) -> Any:
    """The record (aiokafka's ConsumerRecord) at `offset` of `place`, read by a consumer of
    no group; None if there is none there (compacted away: the fetch starts at the next
    one). Waits until the offset is in the topic: the caller bounds the wait."""
    consumer.assign([place])
    consumer.seek(place, offset)
    while True:
        batch = (await consumer.getmany(place, timeout_ms=500, max_records=1)).get(place, [])
        if batch:
            return batch[0] if batch[0].offset == offset else None


async def high_watermark(consumer: AIOKafkaConsumer, place: TopicPartition) -> int | None:
    """The end of `place`, committed records or not (a committed reader's `end_offsets` is
    the last stable offset): what one fetch's answer says; None if none came."""
    consumer.assign([place])
    await consumer.seek_to_end(place)
    await consumer.getmany(place, timeout_ms=500, max_records=1)
    end: int | None = consumer.highwater(place)
    return end
