"""Kafka plumbing the clients share: a client started safely, and a consumer over a whole topic
(every partition, in no consumer group, from its start or end).

A whole-topic consumer reads output topics (summaries, progress) and the events topic without
joining the worker's group, so that nothing anyone else reads or commits moves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from events.outputs import SUMMARY_MAX_BYTES

Client = TypeVar("Client", AIOKafkaProducer, AIOKafkaConsumer)


class TopicMissing(LookupError):
    """The topic a client reads does not exist on the cluster (args[0]: its name)."""

    def __init__(self, topic: str, bootstrap: str | None = None) -> None:
        super().__init__(topic, bootstrap)
        self.topic = topic
        self.bootstrap = bootstrap

    def __str__(self) -> str:
        return f"no topic {self.topic!r}" + ("" if self.bootstrap is None else f" at {self.bootstrap}")


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


async def whole_topic(
    topic: str, *, at_end: bool = False, wait: float, **client_options: Any
) -> AIOKafkaConsumer | None:
    """A started consumer, in no group, assigned every partition of `topic` at its start
    (or its end). Waits up to `wait` seconds for the topic to exist; None if it does not
    by then. `client_options` are aiokafka's (bootstrap_servers, security). The caller
    stops the consumer."""
    consumer = AIOKafkaConsumer(
        **client_options,
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
