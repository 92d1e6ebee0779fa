"""The dashboard process against a real broker, without a worker: records put on the output
topics by hand, a topic that appears after the dashboard started, and records that are not
valid."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from events.clients.kafka import running
from events.codec import encode
from events.models import InputEvent
from events.outputs import SUMMARY_MAX_BYTES
from tests.builders import closed, score, scored_run, started, summary_of, task_spec, trial
from tests.worker.dashboard.outputs import outputs
from worker.dashboard.board import Board
from worker.dashboard.follow import FETCH_BYTES, Follower, followers
from worker.local.processes import DashboardProcess, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka


async def produce(settings: Settings, records: list[tuple[str, bytes | None, bytes]]) -> None:
    """(topic, value, key) each, in order."""
    async with running(AIOKafkaProducer(**settings.client_options())) as producer:
        for topic, value, key in records:
            await producer.send_and_wait(topic, value, key=key)


def fetch(url: str) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"})) as response:
        return json.loads(response.read())


def until(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "the dashboard did not show it in time"
        time.sleep(0.2)
    return found


def test_a_dashboard_started_before_its_topics_waits_for_them_and_skips_bad_records(
    bootstrap: str, tmp_path: Path
) -> None:
    settings = isolated_settings(bootstrap)
    dashboard = DashboardProcess(settings, tmp_path)
    try:
        assert f"no topic {settings.progress_topic!r}" in dashboard.log()
        with urllib.request.urlopen(dashboard.url) as response:
            assert "waiting for the topic" in response.read().decode()
        asyncio.run(ensure_topics(settings))
        log: list[InputEvent] = [
            started("r", [task_spec("t", {"reward.score": "continuous"})]),
            trial("t", "a", run_id="r"),
            score("t", "a", "reward", {"score": 1.0}, run_id="r"),
            closed("r"),
        ]
        progress, summaries = outputs(log)
        _, others = outputs([started("gone"), closed("gone")])
        asyncio.run(
            produce(
                settings,
                [
                    (settings.progress_topic, b"not json", b"r"),
                    *((settings.progress_topic, encode(record), b"r") for record in progress),
                    (settings.summaries_topic, encode(summaries[-1]), b"r"),
                    (settings.summaries_topic, encode(others[-1]), b"gone"),
                    (settings.summaries_topic, None, b"gone"),  # a tombstone: the run is deleted
                ],
            )
        )
        last = progress[-1].seq
        runs = until(
            lambda: [row for row in fetch(dashboard.url)["runs"] if (row["revision"], row["seq"]) == (1, last)]
        )
        assert [row["run_id"] for row in runs] == ["r"]
        until(lambda: "gone" not in {row["run_id"] for row in fetch(dashboard.url)["runs"]})
        with urllib.request.urlopen(dashboard.url) as response:
            assert "1 invalid skipped" in response.read().decode()
        assert "not a valid output record" in dashboard.log()
    finally:
        dashboard.stop()


def test_a_summary_larger_than_a_fetch_is_read_whole(bootstrap: str) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    big = summary_of(scored_run("big", {f"task-{index:05d}": [1.0, 0.0, None, 1.0] for index in range(6_000)}), "big")
    small = summary_of(scored_run("small", {"t": [1.0]}), "small")
    raw = big.model_dump_json().encode()
    assert len(raw) > FETCH_BYTES

    async def check() -> None:
        async with running(
            AIOKafkaProducer(**settings.client_options(), max_request_size=SUMMARY_MAX_BYTES)
        ) as producer:
            await producer.send_and_wait(settings.summaries_topic, raw, key=b"big")
            await producer.send_and_wait(settings.summaries_topic, small.model_dump_json().encode(), key=b"small")
        board = Board()
        readers = followers(settings, board)
        try:
            await start_reading(readers)
            records = board.get("big")
            assert records is not None
            assert records.summary == big
            assert board.get("small") is not None
        finally:
            for reader in readers:
                await reader.close()

    asyncio.run(check())


async def start_reading(readers: list[Follower]) -> None:
    for reader in readers:
        await reader.open()
    await asyncio.gather(*(reader.catch_up() for reader in readers))
