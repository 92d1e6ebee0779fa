"""Reading the archive back over a real broker: a record whose transaction is still open (or
whose commit markers are on their way) is pending, not gone; a record past the partition's
end is gone; a committed one is found."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer

from worker.local.processes import isolated_settings
from worker.runtime.archive import Found, Gone, Slow, TopicArchive
from worker.runtime.topics import ensure_topics

pytestmark = pytest.mark.kafka


def test_an_archive_record_of_an_open_transaction_is_pending_and_found_once_committed(bootstrap: str) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))

    async def go() -> tuple[object, object, object, object]:
        archive = TopicArchive(settings, timeout=5)
        producer = AIOKafkaProducer(transactional_id=f"{settings.app_id}-test", **settings.client_options())
        await producer.start()
        try:
            await producer.begin_transaction()
            sent = await producer.send_and_wait(settings.archive_topic, b"state", b"run-a", partition=0)
            open_read = await archive.read(0, sent.offset)
            beyond = await archive.read(0, sent.offset + 10)
            await producer.commit_transaction()
            committed = await _found(archive, sent.offset)
            return open_read, beyond, committed, await archive.read(0, sent.offset + 10)
        finally:
            await producer.stop()
            await archive.close()

    open_read, beyond, committed, still_beyond = asyncio.run(go())
    assert isinstance(open_read, Slow), "a record of an open transaction is pending, not gone"
    assert isinstance(beyond, Gone)
    assert committed == Found(b"run-a", b"state")
    assert isinstance(still_beyond, Gone)


async def _found(archive: TopicArchive, offset: int) -> object:
    """The read once the commit's markers are in (pending until then)."""
    for _ in range(50):
        read = await archive.read(0, offset)
        if not isinstance(read, Slow):
            return read
        await asyncio.sleep(0.1)
    return read
