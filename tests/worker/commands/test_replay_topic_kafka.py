"""`evalstream replay --from-topic` over a real broker: the worker's summaries, rebuilt from
the events topic without a worker, byte for byte."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.projections.examples import EXAMPLE_LOG
from tests.worker.commands.test_cli_kafka import evalstream
from tests.worker.runtime.test_worker_kafka import by_run, send_raw
from worker.commands.clients import publish
from worker.local.processes import WorkerProcess, isolated_settings
from worker.local.records import read_topic
from worker.runtime.topics import ensure_topics
from worker.settings import Settings
from worker.topic_reader import topic_reader

pytestmark = pytest.mark.kafka

POISON: list[tuple[bytes | None, bytes]] = [
    (b"run-11-0", b"\xff not json"),
    (b"someone-else", EXAMPLE_LOG.read_bytes().splitlines()[0]),  # a valid event under another run's key
    (None, b""),
]


@pytest.fixture(scope="module")
def folded(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """A worker on three partitions that has folded the example log, bad messages among it."""
    settings = isolated_settings(bootstrap, partitions=3)
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path_factory.mktemp("worker"))
    try:
        lines = EXAMPLE_LOG.read_bytes().splitlines()
        asyncio.run(publish(settings, lines[:400]))
        asyncio.run(send_raw(settings, POISON))
        asyncio.run(publish(settings, lines[400:]))
        yield worker
    finally:
        worker.stop()
        print(worker.log()[-3000:], file=sys.stderr)


def worker_summaries(settings: Settings) -> list[bytes]:
    replayed = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", str(EXAMPLE_LOG)], capture_output=True, check=True
    )
    expected = len(replayed.stdout.splitlines())
    return [record.value for record in read_topic(settings, settings.summaries_topic, until=expected)]


def end_offsets(settings: Settings) -> dict[tuple[str, int], int]:
    async def ends() -> dict[tuple[str, int], int]:
        found = {}
        for topic in (settings.summaries_topic, settings.progress_topic, settings.deadletter_topic):
            consumer = await topic_reader(settings, topic, wait=10)
            assert consumer is not None, topic
            try:
                offsets = await consumer.end_offsets(list(consumer.assignment()))
                found.update({(tp.topic, tp.partition): offset for tp, offset in offsets.items()})
            finally:
                await consumer.stop()
        return found

    return asyncio.run(ends())


def test_replay_from_the_topic_prints_the_worker_summaries(folded: WorkerProcess) -> None:
    settings = folded.settings
    published = worker_summaries(settings)
    before = end_offsets(settings)
    replayed = evalstream(settings, "replay", "--from-topic")
    assert replayed.returncode == 0, replayed.stderr
    assert by_run(replayed.stdout.splitlines()) == by_run(published)
    assert len({orjson.loads(line)["run_id"] for line in published}) == 12
    # What the worker dead-lettered is reported, with where it stands in the topic.
    errors = replayed.stderr.decode()
    assert errors.count(f"{settings.events_topic}[") == len(POISON)
    for code in ("not-json", "key-mismatch"):
        assert f": {code}: " in errors
    assert f"{678 + len(POISON)} records of {settings.events_topic}" in errors
    assert end_offsets(settings) == before  # the worker's topics are untouched
    again = evalstream(settings, "replay", "--from-topic")
    assert again.stdout == replayed.stdout  # partitions are read in turn: the same bytes every time


def test_replay_from_the_topic_of_one_run(folded: WorkerProcess) -> None:
    settings = folded.settings
    published = by_run(worker_summaries(settings))
    replayed = evalstream(settings, "replay", "--from-topic", "--run", "run-14-0")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.splitlines() == published["run-14-0"]


def test_replay_from_a_topic_that_is_not_there(folded: WorkerProcess, tmp_path: Path) -> None:
    settings = folded.settings.with_overrides(events_topic="no-such-topic")
    replayed = evalstream(settings, "replay", "--from-topic")
    assert replayed.returncode == 1
    assert b"no topic 'no-such-topic' at " in replayed.stderr
    assert b"Traceback" not in replayed.stderr


def test_replay_from_the_topic_of_a_run_it_does_not_hold_says_so(folded: WorkerProcess) -> None:
    settings = folded.settings
    replayed = evalstream(settings, "replay", "--from-topic", "--run", "nosuch")
    assert replayed.returncode == 1
    assert replayed.stdout == b""
    said = replayed.stderr.decode()
    assert said.startswith(f"evalstream replay: no event of run 'nosuch' in topic '{settings.events_topic}' at ")
    assert "check the run id" in said
