"""Restarts over a real broker: a worker restarted on its data dir under the same name
reads only the changelog's tail and gets its partitions back at once; a late event on a run
closed before the restart gets the next revision; a store of a newer version stops it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.codec import encode
from events.synthetic import synthetic_run
from projections import storage
from tests import builders
from tests.worker.runtime.test_worker_kafka import _records_until, replayed
from worker.commands.clients import publish
from worker.local.processes import WorkerProcess, free_port, isolated_settings, topic_flags
from worker.runtime.keys import checkpoint_key
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka


def latest_summaries(settings: Settings, want: dict[bytes, bytes], timeout: float = 90.0) -> dict[bytes, bytes]:
    latest: dict[bytes, bytes] = {}

    def done(records: list[object]) -> bool:
        latest.clear()
        latest.update({r.key: r.value for r in records})  # type: ignore[attr-defined]
        return all(latest.get(key) == value for key, value in want.items())

    _records_until(settings, settings.summaries_topic, done, timeout)  # type: ignore[arg-type]
    return latest


def test_a_kill_9_restart_under_the_same_name_resumes_from_its_local_copy(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap, partitions=2)
    asyncio.run(ensure_topics(settings))
    closed = [orjson.dumps(e) for e in synthetic_run("closed-before", tasks=5, attempts=3, seed=5)]
    opened = [orjson.dumps(e) for e in synthetic_run("open-across", tasks=4, attempts=2, seed=6)]
    late = encode(builders.trial("task-00000", "late-trial", run_id="closed-before"))
    before, after = [*closed, *opened[:-4]], [late, *opened[-4:]]
    want = {orjson.loads(line)["run_id"].encode(): line for line in replayed([*before, *after])}
    name = {"EVALSTREAM_INSTANCE_ID": "worker-a"}
    first = WorkerProcess(settings, tmp_path / "worker", env=name)
    try:
        first.wait_ready()
        asyncio.run(publish(settings, before))
        latest_summaries(settings, {b"closed-before": replayed(closed)[0]})
        time.sleep(8 * settings.flush_interval)  # checkpointed
    finally:
        first.process.kill()
        first.process.wait()
    # Another web port: the name, not the address, is what the group knows it by.
    second = WorkerProcess(settings.with_overrides(web_port=free_port()), tmp_path / "worker", env=name)
    try:
        asyncio.run(publish(settings, after))
        got = latest_summaries(settings, want)
        log = second.log()
    finally:
        second.stop()
    assert got == want  # byte for byte; closed-before at revision 2
    assert orjson.loads(got[b"closed-before"])["revision"] == 2
    assert "is wiped" not in log, "the local copy was not kept"


def test_a_store_of_a_newer_version_stops_the_worker_before_it_consumes(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    first = WorkerProcess(settings, tmp_path / "first")
    try:
        first.wait_ready()
    finally:
        first.stop()
    newer = orjson.dumps({"v": storage.VERSION + 1, "offset": 0})

    async def write_newer_checkpoint() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(**settings.client_options())
        await producer.start()
        try:
            await producer.send_and_wait(f"{settings.app_id}-state-changelog", newer, checkpoint_key(0), partition=0)
        finally:
            await producer.stop()

    asyncio.run(write_newer_checkpoint())
    asyncio.run(publish(settings, [encode(builders.closed("after-refusal"))]))
    command = [sys.executable, "-m", "worker.commands.cli", "worker", *topic_flags(settings)]
    command += ["--web-port", str(settings.web_port), "--data-dir", str(tmp_path / "second")]
    env = {**os.environ, "EVALSTREAM_APP_ID": settings.app_id}
    done = subprocess.run(command, capture_output=True, timeout=120, env=env, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 1
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"evalstream worker: the worker's state is stored in version {storage.VERSION + 1}")
    assert f"reads versions {storage.OLDEST} to {storage.VERSION}" in last
    assert "Traceback" not in stderr
    assert _no_summary(settings)


def _no_summary(settings: Settings) -> bool:
    from worker.local.records import read_topic

    return read_topic(settings, settings.summaries_topic, until=1, timeout=2.0) == []


def test_closed_runs_are_retired_and_a_fresh_worker_restores_only_markers_and_open_runs(
    bootstrap: str, tmp_path: Path
) -> None:
    """Closed runs leave the changelog once durable (a marker each, their task records
    compacted away); a worker on an empty data dir restores the partition from what is
    left, and a late event on a retired run restores it from the archive: revision 2, byte
    for byte what replay gives; then the run is retired again."""
    from worker.local.records import create_compacting_fast, read_whole

    settings = isolated_settings(bootstrap)
    changelog = f"{settings.app_id}-state-changelog"
    asyncio.run(ensure_topics(settings))
    asyncio.run(create_compacting_fast(settings, changelog))
    closed = {
        f"closed-{n}": [orjson.dumps(e) for e in synthetic_run(f"closed-{n}", tasks=4, attempts=2, seed=n)]
        for n in range(3)
    }
    opened = [orjson.dumps(e) for e in synthetic_run("open-across", tasks=3, attempts=4, seed=9)]
    late = encode(builders.trial("task-00001", "late-trial", run_id="closed-1"))
    head, middle, tail = opened[:10], opened[10:-6], opened[-6:]
    before = [line for lines in closed.values() for line in lines] + head
    want = {orjson.loads(line)["run_id"].encode(): line for line in replayed([*before, *middle, late, *tail])}

    def task_keys(records: list[Any]) -> set[str]:
        return {orjson.loads(r.key[1:])[0] for r in records if r.key.startswith(b"t") and r.value is not None}

    first = WorkerProcess(settings, tmp_path / "first")
    try:
        first.wait_ready()
        asyncio.run(publish(settings, before))
        latest_summaries(settings, {run.encode(): replayed(lines)[0] for run, lines in closed.items()})
        for line in middle:  # the open run goes on: its checkpoints roll segments, the cleaner runs
            asyncio.run(publish(settings, [line]))
            time.sleep(0.6)
        deadline = time.monotonic() + 90
        while left := task_keys(hot := read_whole(settings, changelog)) & set(closed):
            assert time.monotonic() < deadline, f"closed runs' task records still in the changelog: {left}"
            # A write rolls the active segment (segment.ms), so that the cleaner takes it.
            nudge = builders.trial("task-00000", f"nudge-{time.time()}", run_id="nudge")
            asyncio.run(publish(settings, [encode(nudge)]))
            time.sleep(2)
    finally:
        first.stop()
    assert task_keys(hot) <= {"open-across", "nudge"}, "what a restore reads: the open runs' parts"
    assert "open-across" in task_keys(hot)
    markers = {r.key for r in hot if r.value is not None and storage.marker_of(r.value) is not None}
    assert markers == {f'h"{run}"'.encode() for run in closed}
    assert read_whole(settings, settings.archive_topic), "the archive holds the retired runs"
    second = WorkerProcess(settings.with_overrides(web_port=free_port()), tmp_path / "fresh")
    try:
        asyncio.run(publish(settings, [late, *tail]))
        got = latest_summaries(settings, want)
    finally:
        second.stop()
    assert {key: got.get(key) for key in want} == want  # byte for byte
    assert orjson.loads(got[b"closed-1"])["revision"] == 2
