"""Refusals over a real broker: a summary too large for its topic (refused, dead-lettered,
counted) and a run's state too large for the changelog (the run parked); the worker goes on
consuming."""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from events.synthetic import synthetic_run
from worker.commands.clients import publish
from worker.commands.replay import replay
from worker.local.processes import WorkerProcess, isolated_settings
from worker.local.records import read_topic
from worker.runtime.topics import CHANGELOG_CONFIGS, ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka

LIMIT = 6000
"""The summaries topic's max.message.bytes: a 3-task run's summary is ~1.5 KB compressed,
a 200-task run's ~14 KB."""


async def small_summaries_topic(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        config = {"cleanup.policy": "compact", "max.message.bytes": str(LIMIT)}
        await admin.create_topics([NewTopic(settings.summaries_topic, 1, 1, topic_configs=config)])
    finally:
        await admin.close()


def run_lines(run_id: str, tasks: int) -> list[bytes]:
    return [orjson.dumps(event) for event in synthetic_run(run_id, tasks=tasks, attempts=3)]


def replayed(lines: list[bytes]) -> list[bytes]:
    out = io.BytesIO()
    replay(iter(lines), out, io.StringIO())
    return out.getvalue().splitlines()


def until(check: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout:.0f}s: {check}")
        time.sleep(0.2)


def test_a_summary_too_large_for_its_topic_is_dead_lettered_and_later_runs_still_land(
    bootstrap: str, tmp_path: Path
) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(small_summaries_topic(settings))
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker")
    try:
        worker.wait_serving()
        before, big, after = run_lines("before", 3), run_lines("big", 200), run_lines("after", 3)
        asyncio.run(publish(settings, before + big))
        [letter] = read_topic(settings, settings.deadletter_topic, until=1)
        asyncio.run(publish(settings, after))  # in a batch of its own, after the refusal
        landed = read_topic(settings, settings.summaries_topic, until=2)

        assert [record.value for record in landed] == replayed(before) + replayed(after)
        [big_summary] = replayed(big)
        assert (letter.key, letter.value) == (b"big", big_summary)  # the output itself
        assert letter.headers["evalstream.reason"] == b"output-refused"
        detail = letter.headers["evalstream.detail"].decode()
        assert "summary of run 'big'" in detail
        assert "MessageSizeTooLargeError" in detail
        # The event that made it: the big run's run.closed, the last line it published.
        assert letter.headers["evalstream.source.topic"] == settings.events_topic.encode()
        assert letter.headers["evalstream.source.offset"] == str(len(before) + len(big) - 1).encode()

        def counted() -> bool:
            samples = worker.scrape()
            return (
                samples.get('evalstream_outputs_refused_total{stream="summary"}') == 1
                and samples.get('evalstream_dead_letters_total{reason="output-refused"}') == 1
            )

        until("/metrics counts the refusal", counted)
        assert worker.process.poll() is None, "the worker stopped"
        assert "the broker refused the summary of run 'big'" in worker.log()
    finally:
        worker.stop()
        print(worker.log()[-3000:], file=sys.stderr)


def test_a_run_whose_state_the_changelog_refuses_is_parked_and_the_partition_goes_on(
    bootstrap: str, tmp_path: Path
) -> None:
    """A task record larger than the changelog takes: nothing of that checkpoint is
    committed, the run is parked (its events from that checkpoint on dead-lettered as
    state-refused, each once, in order; those committed before stay in its state), and the
    partition's other runs land exactly as replay gives them; the worker keeps going."""
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))

    async def small_changelog() -> None:
        # AlterConfigs replaces every config the topic was given: all of them, one changed.
        configs = {**CHANGELOG_CONFIGS, "max.message.bytes": "3000"}
        admin = AIOKafkaAdminClient(**settings.client_options())
        await admin.start()
        try:
            await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, settings.changelog_topic, configs=configs)]
            )
        finally:
            await admin.close()

    asyncio.run(small_changelog())
    worker = WorkerProcess(settings, tmp_path / "worker")
    try:
        worker.wait_serving()
        before, big = run_lines("before", 2), [orjson.dumps(e) for e in synthetic_run("big", tasks=1, attempts=40)]
        asyncio.run(publish(settings, before + big))
        letters = read_topic(settings, settings.deadletter_topic, until=1, timeout=60)
        after = run_lines("after", 2)
        asyncio.run(publish(settings, after))
        landed = read_topic(settings, settings.summaries_topic, until=2, timeout=60)

        assert [record.value for record in landed] == replayed(before) + replayed(after)
        letters = read_topic(settings, settings.deadletter_topic, until=len(big), timeout=5)
        assert {record.key for record in letters} == {b"big"}
        assert [record.value for record in letters] == big[len(big) - len(letters) :], "from one on, each once"
        assert {record.headers["evalstream.reason"] for record in letters} == {b"state-refused"}
        assert "MessageSizeTooLarge" in letters[0].headers["evalstream.detail"].decode()
        until(
            "/metrics counts the parked run",
            lambda: worker.scrape().get('evalstream_runs_parked_total{reason="state-refused"}') == 1,
        )
        assert worker.process.poll() is None, "the worker stopped"
    finally:
        worker.stop()
        print(worker.log()[-3000:], file=sys.stderr)
