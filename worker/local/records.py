"""Every record of a topic, read back whole: for tests, benchmarks and the fault harness."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from worker.settings import Settings
from worker.topic_reader import topic_reader


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
    deadline = time.monotonic() + timeout
    consumer = await topic_reader(settings, topic, wait=timeout)
    if consumer is None:
        return []
    records: list[Record] = []
    try:
        while len(records) < until and time.monotonic() < deadline:
            records.extend(_fetched(await consumer.getmany(timeout_ms=200)))
        return records
    finally:
        await consumer.stop()


def read_whole(settings: Settings, topic: str, *, timeout: float = 60.0) -> list[Record]:
    """Every record of `topic`, from its start to its end as of the call (tombstones too)."""
    return asyncio.run(_read_whole(settings, topic, timeout))


async def _read_whole(settings: Settings, topic: str, timeout: float) -> list[Record]:
    deadline = time.monotonic() + timeout
    consumer = await topic_reader(settings, topic, wait=timeout)
    if consumer is None:
        return []
    records: list[Record] = []
    try:
        ends = await consumer.end_offsets(list(consumer.assignment()))
        while [place for place, end in ends.items() if await consumer.position(place) < end]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not read to its end within {timeout:.0f} s")
            records.extend(_fetched(await consumer.getmany(timeout_ms=200)))
        return records
    finally:
        await consumer.stop()


COMPACT_FAST = {
    "cleanup.policy": "compact",
    "segment.ms": "500",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "0",
}
"""A compacted topic the broker cleans as soon as it can (its cleaner passes every 15 s)."""


async def create_compacting_fast(settings: Settings, topic: str) -> None:
    """Create `topic` (the settings' partitions) compacted as fast as the broker allows, or
    make it so if it exists."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        if topic in await admin.list_topics():
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=COMPACT_FAST)])
        else:
            await admin.create_topics([NewTopic(topic, settings.partitions, 1, topic_configs=COMPACT_FAST)])
    finally:
        await admin.close()


def _fetched(batches: dict[Any, list[Any]]) -> Iterator[Record]:
    """The records of one `getmany`, as `Record`s."""
    for batch in batches.values():
        for r in batch:
            yield Record(r.key, r.value, r.partition, r.offset, {k: bytes(v) for k, v in r.headers})
