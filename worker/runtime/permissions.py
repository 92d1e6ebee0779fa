"""The grants the worker needs, checked before it consumes (`check_permissions`).

The broker says which operations it allows the asking user on each topic (KIP-430: a
metadata request with `include_topic_authorized_operations`; a broker with no authoriser
allows every one), so the check needs no right to read the cluster's ACLs. A grant missing
is named with its topic, so that an operator fixes it before the worker runs, not after its
first checkpoint fails. The worker's transactional ids are checked when it claims a
partition, before it reads any (`worker.runtime.transactions`): the only way to ask about
one is to start a producer under it, which would fence the partition's owner.

An output topic whose grant is taken away later is a refusal of those outputs (dead-lettered,
`worker.runtime.refusals`); the changelog's or the archive's stops the worker.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import TopicAuthorizationFailedError

from events.clients.kafka import bootstrapped
from worker.runtime.identity import describe
from worker.settings import Settings

READ, WRITE = 3, 4
"""Kafka's ACL operation codes (org.apache.kafka.common.acl.AclOperation)."""


class PermissionsMissing(PermissionError):
    """Grants the worker needs and lacks, each named with its topic."""


def needed(settings: Settings) -> dict[str, tuple[int, ...]]:
    """Topic -> the operations the worker needs on it."""
    return {
        settings.events_topic: (READ,),
        settings.summaries_topic: (WRITE,),
        settings.progress_topic: (WRITE,),
        settings.deadletter_topic: (WRITE,),
        settings.changelog_topic: (READ, WRITE),
        settings.archive_topic: (READ, WRITE),
    }


def missing(wanted: dict[str, tuple[int, ...]], allowed: dict[str, int]) -> list[str]:
    """The grants of `wanted` that `allowed` (topic -> KIP-430 bit field) lacks, as
    "OPERATION on topic NAME"."""
    names = {READ: "READ", WRITE: "WRITE"}
    return [
        f"{names[operation]} on topic {topic!r}"
        for topic, operations in wanted.items()
        for operation in operations
        if topic in allowed and not allowed[topic] >> operation & 1
    ]


async def check_permissions(settings: Settings) -> None:
    """Raise `PermissionsMissing` naming every grant the worker's user lacks on its topics."""
    wanted = needed(settings)
    consumer = AIOKafkaConsumer(**settings.client_options())
    try:
        await bootstrapped(consumer.start(), consumer._client)
        try:
            view = await describe(consumer._client, list(wanted), operations=True)
        except TopicAuthorizationFailedError as error:
            raise PermissionsMissing(
                f"the broker refused the worker's user {error}: grant it DESCRIBE on that topic, and "
                + "; ".join(missing(wanted, dict.fromkeys(wanted, 0)))
            ) from None
    finally:
        await consumer.stop()
    lacking = missing(wanted, view.operations)
    if lacking:
        raise PermissionsMissing(
            "the worker's user lacks " + "; ".join(lacking) + ": grant them (kafka-acls --add --allow-principal "
            "User:<the worker's user> --operation <OPERATION> --topic <topic>) and start the worker again"
        )
