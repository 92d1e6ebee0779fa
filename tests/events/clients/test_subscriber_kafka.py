"""The typed subscribers over a real broker: revisions, redeliveries, compaction, filters,
tombstones, bad records, progress, and the sync and asyncio APIs."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from events.clients.kafka import TopicMissing, whole_topic
from events.clients.subscriber import AsyncSummarySubscriber, ProgressSubscriber, SummarySubscriber
from events.codec import encode_payload
from events.outputs import RunProgress, RunSummary
from projections.assembly.progress import progress
from projections.assembly.summary import summary
from projections.fold.run import RunState, apply
from tests.builders import score, scored_run, started, task_spec
from worker.local.processes import isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka

T = TypeVar("T")
Message = tuple[bytes | None, bytes | None]


def revisions(run_id: str, count: int, model: str = "m-a") -> list[bytes]:
    """Summaries 1..count of a run: at its close, then after each of count - 1 late scores."""
    run = RunState(run_id)
    for event in scored_run(run_id, {"t": [1, 0]}, labels={"model": model}):
        apply(run, event)
    found = [encode_payload(summary(run))]
    for number in range(count - 1):
        apply(run, score("t", f"late-{number}", "reward", {"score": 1}, run_id=run_id))
        found.append(encode_payload(summary(run)))
    assert [RunSummary.model_validate_json(value).revision for value in found] == list(range(1, count + 1))
    return found


def keyed(run_id: str, *values: bytes) -> list[Message]:
    return [(run_id.encode(), value) for value in values]


def send(settings: Settings, topic: str, messages: list[Message]) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(**settings.client_options(), max_request_size=8 * 1024 * 1024)
        await producer.start()
        try:
            for key, value in messages:
                await producer.send_and_wait(topic, value=value, key=key)
        finally:
            await producer.stop()

    asyncio.run(go())


def bounded_next(items: Iterator[T], timeout: float = 30) -> T:
    """next(items), failing the test instead of hanging when nothing comes."""
    box: queue.Queue[T] = queue.Queue()
    threading.Thread(target=lambda: box.put(next(items)), daemon=True).start()
    try:
        return box.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"nothing new in {timeout} s")


@pytest.fixture
def settings(bootstrap: str) -> Settings:
    """Topics of the test's own, created as the worker creates them (summaries compacted)."""
    created = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(created))
    return created


def subscribe(settings: Settings, **options: object) -> SummarySubscriber:
    return SummarySubscriber(bootstrap=settings.bootstrap, topic=settings.summaries_topic, **options)


def test_each_revision_surfaces_once_and_latest_is_the_highest(settings: Settings) -> None:
    a, b = revisions("a", 5), revisions("b", 1)
    # A worker that restarted publishes revisions again: a2 and a3 after a3, b1 twice.
    send(settings, settings.summaries_topic, keyed("a", a[0], a[1]) + keyed("b", b[0]) + keyed("a", a[2], a[1], a[2]))
    send(settings, settings.summaries_topic, keyed("b", b[0]))
    with subscribe(settings) as summaries:
        seen = [(r.record.run_id, r.record.revision, r.offset) for r in summaries.received(follow=False)]
        assert seen == [("a", 1, 0), ("a", 2, 1), ("b", 1, 2), ("a", 3, 3)]
        latest = summaries.latest()
        assert list(latest) == ["a", "b"]
        assert latest["a"] == RunSummary.model_validate_json(a[2])
        assert latest["b"].revision == 1
        # Following: redelivered a3 is not new, a4 is; then a5 after an older a1.
        send(settings, settings.summaries_topic, keyed("a", a[2], a[3], a[0], a[4]))
        following = iter(summaries)
        assert bounded_next(following).revision == 4
        assert bounded_next(following).revision == 5
        assert summaries.latest()["a"].revision == 5
        assert summaries.invalid == 0


def test_a_compacted_topic_keeps_the_last_revision_and_that_is_all_a_subscriber_needs(settings: Settings) -> None:
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    configs = {
        "cleanup.policy": "compact",
        "segment.ms": "100",  # a segment closes soon, so that the cleaner may take it
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
    }

    async def create() -> None:
        admin = AIOKafkaAdminClient(**settings.client_options())
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
        finally:
            await admin.close()

    asyncio.run(create())
    a, b = revisions("a", 3), revisions("b", 1)
    send(settings, topic, keyed("a", *a) + keyed("b", b[0]))
    deadline = time.monotonic() + 120
    while len(raw_keys(settings, topic, b"a")) > 1:  # the broker's cleaner runs every 15 s
        assert time.monotonic() < deadline, "the broker did not compact the topic in 120 s"
        time.sleep(1)
        send(settings, topic, keyed("b", b[0]))  # a redelivery, which also rolls the segment
    assert raw_keys(settings, topic, b"a") == [2]  # revisions 1 and 2 are gone
    with SummarySubscriber(bootstrap=settings.bootstrap, topic=topic) as summaries:
        seen = [(r.record.run_id, r.record.revision, r.offset) for r in summaries.received(follow=False)]
        assert seen[0] == ("a", 3, 2)
        assert [run for run, _, _ in seen] == ["a", "b"]
        assert {run: record.revision for run, record in summaries.latest().items()} == {"a": 3, "b": 1}


def raw_keys(settings: Settings, topic: str, key: bytes) -> list[int]:
    """Offsets of the records under `key`, read raw."""

    async def read() -> list[int]:
        consumer = await whole_topic(topic, wait=10, **settings.client_options())
        assert consumer is not None
        offsets = []
        try:
            ends = await consumer.end_offsets(list(consumer.assignment()))
            while any([await consumer.position(tp) < end for tp, end in ends.items()]):
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    offsets += [record.offset for record in records if record.key == key]
        finally:
            await consumer.stop()
        return offsets

    return asyncio.run(read())


def test_filters_by_run_ids_and_labels_in_asyncio(settings: Settings) -> None:
    messages = keyed("a", *revisions("a", 2)) + keyed("b", *revisions("b", 1, "m-b")) + keyed("c", *revisions("c", 1))
    send(settings, settings.summaries_topic, messages)

    async def runs(**filters: Any) -> dict[str, int]:
        async with AsyncSummarySubscriber(
            bootstrap=settings.bootstrap, topic=settings.summaries_topic, **filters
        ) as summaries:
            return {run: record.revision for run, record in (await summaries.latest()).items()}

    assert asyncio.run(runs()) == {"a": 2, "b": 1, "c": 1}
    assert asyncio.run(runs(run_ids=["b", "c"])) == {"b": 1, "c": 1}
    assert asyncio.run(runs(labels={"model": "m-a"})) == {"a": 2, "c": 1}
    assert asyncio.run(runs(labels={"model": "m-a"}, run_ids=["a", "b"])) == {"a": 2}
    assert asyncio.run(runs(labels={"model": "m-a", "benchmark": "x"})) == {}

    async def follow() -> list[tuple[str, int]]:
        async with AsyncSummarySubscriber(
            bootstrap=settings.bootstrap, topic=settings.summaries_topic, run_ids=["a"]
        ) as summaries:
            updates = aiter(summaries)
            first = await asyncio.wait_for(anext(updates), 30)
            second = await asyncio.wait_for(anext(updates), 30)
            return [(first.run_id, first.revision), (second.run_id, second.revision)]

    assert asyncio.run(follow()) == [("a", 1), ("a", 2)]


def test_from_the_end_only_what_comes_after(settings: Settings) -> None:
    send(settings, settings.summaries_topic, keyed("a", *revisions("a", 2)))
    with subscribe(settings, from_end=True) as summaries:
        assert summaries.latest() == {}
        send(settings, settings.summaries_topic, keyed("b", *revisions("b", 1)))
        assert [(r.record.run_id, r.record.revision) for r in summaries.received(follow=False)] == [("b", 1)]
        assert list(summaries.latest()) == ["b"]


def test_a_tombstone_forgets_the_run_and_a_bad_record_is_skipped_with_a_warning(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = revisions("a", 1), revisions("b", 1)
    send(settings, settings.summaries_topic, [*keyed("a", *a), (b"x", b"not a summary"), (b"a", None), *keyed("b", *b)])
    with caplog.at_level(logging.WARNING, "events.clients.subscriber"), subscribe(settings) as summaries:
        assert list(summaries.latest()) == ["b"]
        assert summaries.invalid == 1
        # A run deleted and published again is new again.
        send(settings, settings.summaries_topic, keyed("a", *a))
        assert [r.record.run_id for r in summaries.received(follow=False)] == ["a"]
    assert f"{settings.summaries_topic}[0]@1 is not a valid RunSummary record, skipped: Invalid JSON" in caplog.text


def test_progress_in_seq_order_without_redeliveries(settings: Settings) -> None:
    run = RunState("p")
    apply(run, started("p", [task_spec("t", {"reward.score": "continuous"})], attempts_per_task=3))
    records = []
    for number in range(3):
        apply(run, score("t", f"t-{number}", "reward", {"score": 1}, run_id="p"))
        records.append(encode_payload(progress(run, run.event_count)))
    send(settings, settings.progress_topic, keyed("p", records[0], records[1], records[1], records[0], records[2]))
    with ProgressSubscriber(bootstrap=settings.bootstrap, topic=settings.progress_topic, run_ids=["p"]) as live:
        seen = [r.record for r in live.received(follow=False)]
        assert [record.seq for record in seen] == [2, 3, 4]
        assert all(isinstance(record, RunProgress) for record in seen)
        assert live.latest()["p"].scores_applied == 3


def test_a_topic_that_is_not_there(settings: Settings) -> None:
    with pytest.raises(TopicMissing, match=rf"no topic 'nothing-here' at {settings.bootstrap}"):
        SummarySubscriber(bootstrap=settings.bootstrap, topic="nothing-here").__enter__()


def test_a_group_member_commits_what_it_looked_at_and_hands_out_every_revision_without_keeping_any(
    settings: Settings,
) -> None:
    a = revisions("a", 3)
    send(settings, settings.summaries_topic, [*keyed("a", a[0], a[2], a[1]), (b"x", b"not a summary")])
    group = f"{settings.app_id}-group"

    async def read() -> tuple[list[list[tuple[str, int]]], int]:
        member = AsyncSummarySubscriber(
            bootstrap=settings.bootstrap, topic=settings.summaries_topic, group_id=group, keep_latest=False
        )
        async with member:
            batches = [
                [(each.record.run_id, each.record.revision) for each in batch]
                async for batch in member.batches(follow=False, most=2)
            ]
            await member.commit()
            return batches, member.invalid

    batches, invalid = asyncio.run(read())
    # Every valid record, an older revision after a newer one too, at most two a batch.
    assert [pair for batch in batches for pair in batch] == [("a", 1), ("a", 3), ("a", 2)]
    assert all(len(batch) <= 2 for batch in batches)
    assert invalid == 1
    # The group's offsets moved past all four records, the invalid one too: a new member reads nothing.
    assert asyncio.run(read()) == ([], 0)
    send(settings, settings.summaries_topic, keyed("a", revisions("a", 4)[3]))
    assert asyncio.run(read())[0] == [[("a", 4)]]
