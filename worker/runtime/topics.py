"""Create the worker's topics when absent (faust creates only its internal ones, and
notices a topic created after start-up only at its next metadata refresh)."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from events.codec import MAX_EVENT_BYTES
from worker.settings import SUMMARY_MAX_BYTES, Settings


def wanted_topics(settings: Settings) -> list[NewTopic]:
    events_config = {"max.message.bytes": str(MAX_EVENT_BYTES + 1024)}
    # A dead letter is the message as received plus headers of up to ~4.5 KB.
    deadletter_config = {"max.message.bytes": str(MAX_EVENT_BYTES + 64 * 1024)}
    return [
        NewTopic(settings.events_topic, settings.partitions, 1, topic_configs=events_config),
        NewTopic(settings.progress_topic, settings.partitions, 1),
        NewTopic(
            settings.summaries_topic,
            settings.partitions,
            1,
            topic_configs={"cleanup.policy": "compact", "max.message.bytes": str(SUMMARY_MAX_BYTES)},
        ),
        NewTopic(settings.deadletter_topic, settings.partitions, 1, topic_configs=deadletter_config),
    ]


async def ensure_topics(settings: Settings) -> list[str]:
    """Create the missing topics; returns the names created."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [topic for topic in wanted_topics(settings) if topic.name not in existing]
        if missing:
            await admin.create_topics(missing)
        return [topic.name for topic in missing]
    finally:
        await admin.close()
