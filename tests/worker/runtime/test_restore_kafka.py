"""A partition's local copy restored from a real changelog: only committed records, only the
tail of a copy that is this changelog's, and from the start when it is not; the topic ids
that tell one incarnation of a topic from the next."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from worker.local.processes import isolated_settings
from worker.runtime.identity import describe
from worker.runtime.restore import restore
from worker.runtime.store import Identity, PartitionStore
from worker.settings import Settings

pytestmark = pytest.mark.kafka


async def _topic(settings: Settings, name: str) -> str:
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        await admin.close()
    client = AIOKafkaClient(**settings.client_options())
    await client.bootstrap()
    try:
        for _ in range(50):
            view = await describe(client, [name])
            if name in view.topics:
                return view.topics[name]
            await asyncio.sleep(0.1)
    finally:
        await client.close()
    raise AssertionError(f"topic {name} was not created")


async def _write(settings: Settings, topic: str, records: list[tuple[bytes, bytes | None]], commit: bool) -> None:
    producer = AIOKafkaProducer(transactional_id=f"{topic}-writer", **settings.client_options())
    await producer.start()
    try:
        await producer.begin_transaction()
        for key, value in records:
            await producer.send(topic, value, key, partition=0)
        await (producer.commit_transaction() if commit else producer.abort_transaction())
    finally:
        await producer.stop()


async def _restored(
    settings: Settings, store: PartitionStore, topic: str, identity: Identity
) -> tuple[PartitionStore, int, str | None]:
    consumer = AIOKafkaConsumer(enable_auto_commit=False, isolation_level="read_committed", **settings.client_options())
    await consumer.start()
    try:
        restored_store, restored = await restore(store, consumer, TopicPartition(topic, 0), identity)
    finally:
        await consumer.stop()
    return restored_store, restored.records, restored.wiped


def test_a_restore_reads_committed_records_only_and_then_only_the_tail(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    topic = f"{settings.app_id}-state-changelog"

    async def go() -> None:
        topic_id = await _topic(settings, topic)
        client = AIOKafkaClient(**settings.client_options())
        await client.bootstrap()
        cluster = (await describe(client, [topic])).cluster
        await client.close()
        identity = Identity(cluster, topic_id, settings.app_id)
        await _write(settings, topic, [(b'h"a"', b"1"), (b't["a","x"]', b"2")], commit=True)
        await _write(settings, topic, [(b'h"a"', b"aborted"), (b'h"b"', b"aborted")], commit=False)
        await _write(settings, topic, [(b't["a","x"]', None)], commit=True)
        store, read, wiped = await _restored(settings, PartitionStore(tmp_path / "state-0"), topic, identity)
        assert (read, wiped) == (3, None)
        assert (store.get(b'h"a"'), store.get(b'h"b"'), store.get(b't["a","x"]')) == (b"1", None, None)
        offset = store.offset
        store, read, _ = await _restored(settings, store, topic, identity)
        assert (read, store.offset) == (0, offset), "an up-to-date copy reads nothing"
        await _write(settings, topic, [(b'h"c"', b"3")], commit=True)
        store, read, _ = await _restored(settings, store, topic, identity)
        assert (read, store.get(b'h"c"')) == (1, b"3"), "only the tail"
        other_app = Identity(cluster, topic_id, "another-app")
        store, read, wiped = await _restored(settings, store, topic, other_app)
        assert "another changelog" in (wiped or "")
        assert (read, store.get(b'h"c"')) == (4, b"3")

    asyncio.run(go())


def test_a_topic_deleted_and_created_again_has_another_id(bootstrap: str) -> None:
    settings = isolated_settings(bootstrap)
    name = f"{settings.app_id}-recreated"

    async def go() -> tuple[str, str]:
        first = await _topic(settings, name)
        admin = AIOKafkaAdminClient(**settings.client_options())
        await admin.start()
        try:
            await admin.delete_topics([name])
        finally:
            await admin.close()
        for _ in range(100):
            try:
                return first, await _topic(settings, name)
            except Exception:  # still being deleted
                await asyncio.sleep(0.2)
        raise AssertionError("the topic was not created again")

    first, second = asyncio.run(go())
    assert first != second
