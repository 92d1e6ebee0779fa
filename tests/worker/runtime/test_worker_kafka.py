"""The worker over a real Kafka broker: what it publishes equals what replay prints."""

from __future__ import annotations

import asyncio
import io
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from events.clients.recorder import RunRecorder
from events.codec import decode, encode
from events.models import InputEvent
from events.synthetic import synthetic_run
from projections.progress import progress
from projections.run import RunState, apply
from tests import builders
from tests.projections.examples import EXAMPLE_LOG
from worker.commands.clients import publish
from worker.commands.replay import replay
from worker.local.processes import WorkerProcess, isolated_settings
from worker.local.records import Record, read_topic
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka


def replayed(lines: list[bytes]) -> list[bytes]:
    out = io.BytesIO()
    replay(iter(lines), out, io.StringIO())
    return out.getvalue().splitlines()


def by_run(values: list[bytes]) -> dict[str, list[bytes]]:
    runs: dict[str, list[bytes]] = defaultdict(list)
    for value in values:
        runs[orjson.loads(value)["run_id"]].append(value)
    return dict(runs)


async def send_raw(settings: Settings, messages: list[tuple[bytes | None, bytes]]) -> None:
    producer = AIOKafkaProducer(**settings.client_options())
    await producer.start()
    try:
        for key, value in messages:
            await producer.send_and_wait(settings.events_topic, value=value, key=key)
    finally:
        await producer.stop()


def test_summaries_equal_replay_and_bad_messages_are_dead_lettered(worker: WorkerProcess) -> None:
    settings = worker.settings
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    asyncio.run(publish(settings, lines[:300]))
    poison: list[tuple[bytes | None, bytes]] = [
        (b"run-11-0", b"\xff\x00 not json"),
        (b"run-11-0", b'{"schema_version": 2, "type": "run.closed", "event_id": "x", "run_id": "run-11-0"}'),
        (b"someone-else", lines[0]),  # a valid event under the wrong key: not applied
        (None, b"{}"),
    ]
    asyncio.run(send_raw(settings, poison))
    asyncio.run(publish(settings, lines[300:]))
    expected = replayed(lines)
    got = read_topic(settings, settings.summaries_topic, until=len(expected))
    assert by_run([record.value for record in got]) == by_run(expected)
    assert all(record.key == orjson.loads(record.value)["run_id"].encode() for record in got)

    dead = read_topic(settings, settings.deadletter_topic, until=len(poison))
    assert [(record.key, record.value) for record in dead] == poison
    assert [record.headers["evalstream.reason"] for record in dead] == [
        b"not-json",
        b"schema-version",
        b"key-mismatch",
        b"missing-field",
    ]
    for record in dead:
        assert record.headers["evalstream.source.topic"] == settings.events_topic.encode()
        assert int(record.headers["evalstream.source.offset"]) >= 300
        assert record.headers["evalstream.detail"]


def test_redelivered_events_change_nothing(worker: WorkerProcess) -> None:
    settings = worker.settings
    run = [encode(e) for e in map(_decode_dict, synthetic_run("redelivered", tasks=3, attempts=2, seed=5))]
    asyncio.run(publish(settings, run))
    asyncio.run(publish(settings, run[5:] + run[:5]))  # the whole run again, as a retrying producer would
    sentinel = [encode(e) for e in map(_decode_dict, synthetic_run("sentinel", tasks=1, attempts=1, seed=5))]
    asyncio.run(publish(settings, sentinel))
    # One partition: once the sentinel's summary is out, every earlier message was processed.
    records = _summaries_until(settings, "sentinel")
    assert [orjson.loads(r.value)["revision"] for r in records if r.key == b"redelivered"] == [1]
    assert by_run([r.value for r in records])["redelivered"] == replayed(run)


def test_progress_arrives_while_open_and_says_what_the_projection_says(worker: WorkerProcess) -> None:
    settings = worker.settings
    events = [_decode_dict(e) for e in synthetic_run("live", tasks=8, attempts=4, seed=9)]
    for start in range(0, len(events), 40):  # a harness publishing as trials end
        asyncio.run(publish(settings, [encode(e) for e in events[start : start + 40]]))
        time.sleep(settings.progress_interval * 2)
    live = [
        orjson.loads(r.value)
        for r in _records_until(settings, settings.progress_topic, lambda rs: _closed_progress(rs, b"live"))
        if r.key == b"live"
    ]
    assert sum(1 for p in live if p["status"] == "open") >= 3
    assert [p["seq"] for p in live] == sorted({p["seq"] for p in live})  # strictly increasing
    for published in live:
        run = RunState("live")
        for event in events[: published["event_count"]]:
            apply(run, event)
        expected = progress(run, published["seq"])
        assert published["pass_at_k"] == orjson.loads(orjson.dumps(expected["pass_at_k"]))
        assert published["verdicts"] == expected["verdicts"]
        assert published["tasks"] == expected["tasks"]


def _decode_dict(event: dict[str, object]) -> InputEvent:
    return decode(orjson.dumps(event))


def _closed_progress(records: list[Record], key: bytes) -> bool:
    return any(r.key == key and orjson.loads(r.value)["status"] == "closed" for r in records)


def _summaries_until(settings: Settings, run_id: str, timeout: float = 60.0) -> list[Record]:
    return _records_until(
        settings, settings.summaries_topic, lambda rs: any(r.key == run_id.encode() for r in rs), timeout
    )


def _records_until(
    settings: Settings, topic: str, done: Callable[[list[Record]], bool], timeout: float = 60.0
) -> list[Record]:
    deadline = time.monotonic() + timeout
    records: list[Record] = []
    while time.monotonic() < deadline:
        records = read_topic(settings, topic, until=len(records) + 1, timeout=2.0)
        if done(records):
            return records
    raise AssertionError(f"timed out waiting on {topic}; read {len(records)} records")


def test_a_200000_attempt_run_gets_a_summary_a_consumer_can_read(worker: WorkerProcess) -> None:
    settings = worker.settings
    outputs = [f"o{i}" for i in range(20)]
    tasks = [builders.task_spec(f"t{t}", {f"judge.{o}": "continuous" for o in outputs}) for t in range(1000)]
    events: list[InputEvent] = [builders.started("huge", tasks)]
    for trial in range(10):
        for task in range(1000):
            values = {o: (trial + task + i) % 4 / 3 for i, o in enumerate(outputs)}
            events.append(builders.score(f"t{task}", f"t{task}-{trial}", "judge", values, run_id="huge"))
    events.append(builders.closed("huge"))
    lines = [encode(event) for event in events]
    [expected] = replayed(lines)
    assert len(expected) > 8 * 1024 * 1024  # bigger than the broker's default message limit allows
    asyncio.run(publish(settings, lines))
    [summary] = [r.value for r in _summaries_until(settings, "huge", timeout=240) if r.key == b"huge"]
    assert summary == expected
    attempts = orjson.loads(summary)["summary"]["task_metric_attempts"]
    assert sum(len(keys[key]) for keys in attempts.values() for key in keys) == 200_000


def test_a_harness_recording_with_run_recorder_gets_the_replayed_summary(worker: WorkerProcess) -> None:
    settings = worker.settings
    spec = builders.task_spec("t", {"reward.score": "continuous", "usage.tokens": "model"})
    with RunRecorder("recorded", bootstrap=settings.bootstrap, topic=settings.events_topic) as run:
        sent = [run.started([spec], attempts_per_task=3)]
        sent.append(run.trial_finished("t", "t-1"))
        sent.append(run.score("t", "t-1", "reward", {"score": 1.0}))
        sent.append(run.score("t", "t-1", "usage", {"tokens": 812}))
        sent.extend(run.trial_died("t", "t-2", metrics=["reward", "usage"], error_type="AgentCrash"))
        sent.append(run.metric_failed("t", "t-3", "reward", error_type="JudgeTimeout"))
        sent.append(run.closed())
    [summary] = [r.value for r in _summaries_until(settings, "recorded") if r.key == b"recorded"]
    assert summary == replayed([encode(event) for event in sent])[0]


def test_a_clean_restart_resumes_from_the_tables_without_reprocessing(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    lines = [encode(_decode_dict(e)) for e in synthetic_run("resumed", tasks=6, attempts=4, seed=11)]
    half = len(lines) // 2
    first = WorkerProcess(settings, tmp_path / "first")
    try:
        asyncio.run(send_raw(settings, [(b"resumed", b"poison")]))
        asyncio.run(publish(settings, lines[:half]))
        _records_until(
            settings,
            settings.progress_topic,
            lambda rs: any(orjson.loads(r.value)["event_count"] == half for r in rs if r.key == b"resumed"),
        )
        time.sleep(4 * settings.flush_interval)  # the flush timer has written the state and its checkpoint
    finally:
        first.stop()
    # The state comes back from the changelog (a data dir of its own: no local copy), and the
    # topic is read again from the state's checkpoint, not from zero.
    second = WorkerProcess(settings, tmp_path / "second")
    try:
        asyncio.run(publish(settings, lines[half:]))
        [summary] = [r.value for r in _summaries_until(settings, "resumed", timeout=90) if r.key == b"resumed"]
    finally:
        second.stop()
    expected = replayed(lines)[0]
    got, want = orjson.loads(summary), orjson.loads(expected)
    assert (got["event_count"], got["summary"]["score_count"]) == (want["event_count"], want["summary"]["score_count"])
    assert summary == expected
    dead = read_topic(settings, settings.deadletter_topic, until=2, timeout=3.0)
    assert [record.value for record in dead] == [b"poison"]  # the topic was not read again from zero


def test_two_partitions_give_every_run_its_replayed_summaries(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap, partitions=2)
    asyncio.run(ensure_topics(settings))
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    expected = replayed(lines)
    process = WorkerProcess(settings, tmp_path / "worker")
    try:
        asyncio.run(publish(settings, lines))
        got = read_topic(settings, settings.summaries_topic, until=len(expected), timeout=90)
    finally:
        process.stop()
    assert {record.partition for record in got} == {0, 1}
    assert by_run([record.value for record in got]) == by_run(expected)
