"""A consumer over a whole topic: every partition, in no consumer group, from its start or end.

For reading output topics (summaries, progress) and the events topic without joining the
worker's group, so that nothing anyone else reads or commits moves.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from events.outputs import SUMMARY_MAX_BYTES


class TopicMissing(LookupError):
    """The topic a client reads does not exist on the cluster."""


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
