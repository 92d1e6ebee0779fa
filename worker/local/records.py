"""Every record of a topic, read back whole: for tests, benchmarks and the fault harness."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

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
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records.extend(
                    Record(r.key, r.value, r.partition, r.offset, {k: bytes(v) for k, v in r.headers}) for r in batch
                )
        return records
    finally:
        await consumer.stop()
