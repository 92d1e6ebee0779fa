"""Real-broker helpers for the tests: reading a topic (processes: `worker.local`).

The broker is the local recipe (`worker.broker`, Kafka jars from Maven Central) unless
EVALSTREAM_TEST_BOOTSTRAP names an existing cluster. Nothing here skips: a missing
broker is a failure.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.settings import SUMMARY_MAX_BYTES, Settings


@dataclass
class Record:
    key: bytes | None
    value: bytes
    partition: int
    offset: int
    headers: dict[str, bytes]


def read_topic(settings: Settings, topic: str, *, until: int, timeout: float = 60.0) -> list[Record]:
    """Every record of `topic` from the beginning, once at least `until` have arrived."""
    return asyncio.run(_read(settings, topic, until, timeout))


async def _read(settings: Settings, topic: str, until: int, timeout: float) -> list[Record]:
    consumer = AIOKafkaConsumer(
        **settings.client_options(), enable_auto_commit=False, max_partition_fetch_bytes=SUMMARY_MAX_BYTES
    )
    await consumer.start()
    records: list[Record] = []
    try:
        deadline = time.monotonic() + timeout
        partitions: list[TopicPartition] = []
        while not partitions and time.monotonic() < deadline:
            cluster = await consumer._client.fetch_all_metadata()
            partitions = [TopicPartition(topic, p) for p in cluster.partitions_for_topic(topic) or ()]
            if not partitions:
                await asyncio.sleep(0.2)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        while len(records) < until and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records.extend(
                    Record(r.key, r.value, r.partition, r.offset, {k: bytes(v) for k, v in r.headers}) for r in batch
                )
        return records
    finally:
        await consumer.stop()
