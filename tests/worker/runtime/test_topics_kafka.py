"""Topics checked before the worker consumes, over a real broker: a changelog or archive
whose settings would lose stored runs, and an events topic created again since the
checkpoint, stop the worker with a sentence that names the topic and the fix."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from events.codec import encode
from tests import builders
from tests.worker.runtime.test_restart_kafka import latest_summaries
from tests.worker.runtime.test_worker_kafka import replayed
from worker.commands.clients import publish
from worker.local.processes import WorkerProcess, isolated_settings, topic_flags
from worker.local.records import read_topic
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka


def worker_exit(settings: Settings, data_dir: Path) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "worker.commands.cli", "worker", *topic_flags(settings)]
    command += ["--web-port", str(settings.web_port), "--data-dir", str(data_dir)]
    env = {**os.environ, "EVALSTREAM_APP_ID": settings.app_id}
    return subprocess.run(command, capture_output=True, timeout=120, env=env, check=False)


async def _altered(settings: Settings, topic: str, configs: dict[str, str]) -> None:
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    finally:
        await admin.close()


@pytest.mark.parametrize("policy", ["delete", "compact,delete"])
def test_a_changelog_that_deletes_records_stops_the_worker_before_it_starts(
    bootstrap: str, tmp_path: Path, policy: str
) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    asyncio.run(_altered(settings, settings.changelog_topic, {"cleanup.policy": policy}))
    asyncio.run(publish(settings, [encode(builders.closed("never-folded"))]))
    done = worker_exit(settings, tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 1
    last = stderr.strip().splitlines()[-1]
    assert f"topic {settings.changelog_topic!r} has cleanup.policy={policy}" in last
    assert "--add-config cleanup.policy=compact" in last
    assert "Traceback" not in stderr
    assert read_topic(settings, settings.summaries_topic, until=1, timeout=2.0) == []


def test_an_events_topic_created_again_stops_the_worker_before_it_consumes(bootstrap: str, tmp_path: Path) -> None:
    """Its offsets name other events than the checkpoint's: folding them from the checkpoint
    on would skip the new topic's first records. The worker stops and says why."""
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    first_log = [encode(event) for event in (builders.trial("t", "t-1", run_id="before"), builders.closed("before"))]
    first = WorkerProcess(settings, tmp_path / "worker")
    try:
        first.wait_ready()
        asyncio.run(publish(settings, first_log))
        latest_summaries(settings, {b"before": replayed(first_log)[0]})
        time.sleep(1.0)
    finally:
        first.stop()

    async def recreate() -> None:
        admin = AIOKafkaAdminClient(**settings.client_options())
        await admin.start()
        try:
            await admin.delete_topics([settings.events_topic])
            for _ in range(100):
                if settings.events_topic not in await admin.list_topics():
                    break
                await asyncio.sleep(0.1)
            for _ in range(100):
                response = await admin.create_topics([NewTopic(settings.events_topic, 1, 1)])
                if response.topic_errors[0][1] == 0:
                    return
                await asyncio.sleep(0.2)  # still being deleted
            raise AssertionError("the events topic was not created again")
        finally:
            await admin.close()

    asyncio.run(recreate())
    after = [encode(builders.closed(f"after-{n}")) for n in range(3)]  # offsets 0 to 2: past the old checkpoint
    asyncio.run(publish(settings, after))
    done = worker_exit(settings, tmp_path / "worker")
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr[-2000:]
    last = stderr.strip().splitlines()[-1]
    assert f"the events topic {settings.events_topic!r} was deleted and created again" in last
    assert "EVALSTREAM_APP_ID" in last
    assert "Traceback" not in stderr
    summaries = read_topic(settings, settings.summaries_topic, until=2, timeout=3.0)
    assert [orjson.loads(record.value)["run_id"] for record in summaries] == ["before"]
