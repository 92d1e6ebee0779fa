"""A whole-topic reader with the settings' connection, for every part of the worker that
reads an output topic outside a consumer group (commands, dashboard, local harnesses)."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer

from events.clients.kafka import whole_topic
from worker.settings import SUMMARY_MAX_BYTES, Settings


async def topic_reader(
    settings: Settings, topic: str, *, at_end: bool = False, wait: float, fetch_bytes: int = SUMMARY_MAX_BYTES
) -> AIOKafkaConsumer | None:
    """`events.clients.kafka.whole_topic` with these settings' connection."""
    return await whole_topic(topic, at_end=at_end, wait=wait, fetch_bytes=fetch_bytes, **settings.client_options())
