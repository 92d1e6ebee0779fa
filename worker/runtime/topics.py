"""Create the worker's topics when absent (faust creates only its internal ones, and
notices a topic created after start-up only at its next metadata refresh)."""

from __future__ import annotations

from collections.abc import Collection

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import NoError, TopicAlreadyExistsError, TopicAuthorizationFailedError, for_code

from events.clients.kafka import bootstrapped
from events.codec import MAX_EVENT_BYTES
from worker.settings import SUMMARY_MAX_BYTES, Settings


class TopicsRefused(TopicAuthorizationFailedError):  # type: ignore[misc]  # aiokafka is untyped
    """Topics the user may neither see nor create (args[0]: their names)."""


def wanted_topics(settings: Settings) -> list[NewTopic]:
    events_config = {"max.message.bytes": str(MAX_EVENT_BYTES + 1024)}
    # A dead letter is the message as received, or an output the broker refused (a summary
    # too large for a summaries topic made smaller), plus headers of up to ~4.5 KB.
    deadletter_config = {"max.message.bytes": str(max(MAX_EVENT_BYTES, SUMMARY_MAX_BYTES) + 64 * 1024)}
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
        # A retired run's whole stored form, compressed: at most a producer request.
        NewTopic(
            settings.archive_topic,
            settings.partitions,
            1,
            topic_configs={"cleanup.policy": "compact", "max.message.bytes": str(SUMMARY_MAX_BYTES + 64 * 1024)},
        ),
    ]


async def ensure_topics(settings: Settings, needed: Collection[str] | None = None) -> list[str]:
    """Create the missing topics; returns the names created.

    On a cluster with ACLs a user sees only the topics it may describe, and may create few: a
    topic it may not create is left to users who may (a producer often may only write the
    events topic, which the worker creates), unless it is `needed` (default: all of them),
    which raises `TopicsRefused`.
    """
    admin = AIOKafkaAdminClient(**settings.client_options())
    try:
        await bootstrapped(admin.start(), admin._client)
        existing = set(await admin.list_topics())
        missing = [topic for topic in wanted_topics(settings) if topic.name not in existing]
        if not missing:
            return []
        response = await admin.create_topics(missing)
        outcomes = {name: (for_code(code), message) for name, code, message, *_ in response.topic_errors}
    finally:
        await admin.close()
    must = {topic.name for topic in missing} if needed is None else set(needed)
    refused = {name for name, (outcome, _) in outcomes.items() if outcome is TopicAuthorizationFailedError}
    if refused & must:
        raise TopicsRefused(refused & must)
    for name, (outcome, message) in outcomes.items():
        if outcome not in (NoError, TopicAlreadyExistsError, TopicAuthorizationFailedError):
            raise outcome(f"creating topic {name!r}: {message}")
    return [name for name, (outcome, _) in outcomes.items() if outcome is NoError]
