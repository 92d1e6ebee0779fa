"""The worker's topics: created when absent, and checked before the worker consumes.

faust creates none of them (the worker has no faust table), and notices a topic created
after start-up only at its next metadata refresh, so `ensure_topics` creates every missing
one first, with the replication factor of `EVALSTREAM_REPLICATION_FACTOR`, or the cluster's
`default.replication.factor`.

`check_topics` refuses to start a worker whose stored state the topics' settings would lose:
the changelog and the archive must be compacted and nothing else (`cleanup.policy=delete`,
alone or beside `compact`, deletes records by age or size, and with them runs), and both
must have as many partitions as the events topic (a partition's state is stored in the
partition of the same number).
"""

from __future__ import annotations

from collections.abc import Collection

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import NoError, TopicAlreadyExistsError, TopicAuthorizationFailedError, for_code

from events.clients.kafka import bootstrapped
from events.codec import MAX_EVENT_BYTES
from worker.settings import SUMMARY_MAX_BYTES, Settings

CHANGELOG_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(10 * 60 * 1000),
    "max.message.bytes": str(SUMMARY_MAX_BYTES),
}
"""The broker cleans only rolled segments, so at Kafka's defaults (a segment rolls at 1 GiB
or 7 days, tombstones are kept a day) the records of retired runs stayed for a week in a
worker's changelog and every restore from its start read them. A task record is as large as
its task; a summary's bound is the record's."""

ARCHIVE_CONFIGS = {"cleanup.policy": "compact", "max.message.bytes": str(SUMMARY_MAX_BYTES + 64 * 1024)}
"""A retired run's whole stored form, compressed: at most a producer request."""


class TopicsRefused(TopicAuthorizationFailedError):  # type: ignore[misc]  # aiokafka is untyped
    """Topics the user may neither see nor create (args[0]: their names)."""


class TopicsUnsafe(ValueError):
    """Topics whose settings would lose the worker's state, each said with its fix."""


def wanted_topics(settings: Settings, replication: int) -> list[NewTopic]:
    events_config = {"max.message.bytes": str(MAX_EVENT_BYTES + 1024)}
    # A dead letter is the message as received, or an output the broker refused (a summary
    # too large for a summaries topic made smaller), plus headers of up to ~4.5 KB.
    deadletter_config = {"max.message.bytes": str(max(MAX_EVENT_BYTES, SUMMARY_MAX_BYTES) + 64 * 1024)}
    partitions = settings.partitions
    return [
        NewTopic(settings.events_topic, partitions, replication, topic_configs=events_config),
        NewTopic(settings.progress_topic, partitions, replication),
        NewTopic(
            settings.summaries_topic,
            partitions,
            replication,
            topic_configs={"cleanup.policy": "compact", "max.message.bytes": str(SUMMARY_MAX_BYTES)},
        ),
        NewTopic(settings.deadletter_topic, partitions, replication, topic_configs=deadletter_config),
        NewTopic(settings.changelog_topic, partitions, replication, topic_configs=CHANGELOG_CONFIGS),
        NewTopic(settings.archive_topic, partitions, replication, topic_configs=ARCHIVE_CONFIGS),
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
        replication = settings.replication_factor or await _default_replication(admin)
        missing = [topic for topic in wanted_topics(settings, replication) if topic.name not in existing]
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


async def _default_replication(admin: AIOKafkaAdminClient) -> int:
    """The cluster's `default.replication.factor` (a user who may not read the brokers'
    configs: as many replicas as brokers, up to 3)."""
    cluster = await admin.describe_cluster()
    brokers = cluster["brokers"]
    try:
        described = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(brokers[0]["node_id"]))]
        )
        for response in described:
            for resource in response.resources:
                for name, value, *_ in resource[4]:
                    if name == "default.replication.factor" and value:
                        return int(value)
    except Exception:  # not allowed to read them: fall back on the broker count
        pass
    return min(3, len(brokers))


async def check_topics(settings: Settings) -> None:
    """Raise `TopicsUnsafe` naming each setting of the changelog and archive topics that
    would lose stored runs, and how to fix it."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    try:
        await bootstrapped(admin.start(), admin._client)
        stores = (settings.changelog_topic, settings.archive_topic)
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in stores])
        policies = {
            resource[3]: value
            for response in described
            for resource in response.resources
            for name, value, *_ in resource[4]
            if name == "cleanup.policy"
        }
        counts = {
            entry["topic"]: len(entry["partitions"])
            for entry in await admin.describe_topics([settings.events_topic, *stores])
            if entry["error_code"] == 0
        }
    finally:
        await admin.close()
    problems = []
    for name in stores:
        policy = policies.get(name)
        if policy is not None and policy != "compact":
            problems.append(
                f"topic {name!r} has cleanup.policy={policy}, which deletes the runs stored in it by age or size: "
                f"set it to compact (kafka-configs --alter --entity-type topics --entity-name {name} "
                "--add-config cleanup.policy=compact)"
            )
        events, held = counts.get(settings.events_topic), counts.get(name)
        if events is not None and held is not None and held != events:
            problems.append(
                f"topic {name!r} has {held} partitions and the events topic {settings.events_topic!r} {events}: "
                "each events partition's state is stored in the partition of the same number. Give them the same "
                "count (a new app id starts over with topics of its own)"
            )
    if problems:
        raise TopicsUnsafe("; ".join(problems))
