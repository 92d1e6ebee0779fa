"""`evalstream follow harbor|nemo` over a real broker: a job directory (or nel output)
written trial by trial, followed live, gives the worker the summary `replay` gives the
imported finished job."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from events.importers.source import ImportOptions
from tests.events.importers.harbor_stats import FIXTURES, imported, replayed
from tests.worker.commands.harbor_job import write_job
from tests.worker.commands.nel_run import FIXTURES as NEL_FIXTURES
from tests.worker.commands.nel_run import write_run
from worker.commands.clients import publish
from worker.commands.importing import import_lines
from worker.local.processes import WorkerProcess
from worker.local.records import read_topic, read_whole
from worker.settings import Settings

pytestmark = pytest.mark.kafka

INTERVAL = 0.1
STEP = 0.3
"""Seconds each state of the directory stays: a few polls, so follow sees the half-written files."""


def _follow(settings: Settings, job: Path, source: str = "harbor") -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "worker.commands.cli", "follow", source, str(job),
            "--interval", str(INTERVAL),
            "--bootstrap", settings.bootstrap,
            "--events-topic", settings.events_topic,
            "--partitions", str(settings.partitions),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def _finish(follow: subprocess.Popen[bytes]) -> str:
    _, stderr = follow.communicate(timeout=120)
    assert follow.returncode == 0, stderr.decode()
    return stderr.decode()


def test_following_a_job_as_it_is_written_gives_the_imported_summary(worker: WorkerProcess, tmp_path: Path) -> None:
    settings = worker.settings
    job = tmp_path / "job-mixed"
    steps = write_job(FIXTURES / "job-mixed", job)
    next(steps)
    follow = _follow(settings, job)
    half_written = 0
    for step in steps:
        half_written += step.endswith("half-written")
        assert follow.poll() is None, "follow ended before the job did"
        time.sleep(STEP)
    log = _finish(follow)
    assert half_written == 8
    assert "Traceback" not in log
    assert log.count("published 2 events") >= 20  # one trial at a time, as each result.json was whole

    expected = replayed(imported(job)).splitlines()
    (run_id,) = {orjson.loads(line)["run_id"] for line in expected}
    got = read_topic(settings, settings.summaries_topic, until=len(expected), timeout=90)
    assert [record.value for record in got] == expected

    # Restarted over the finished job: every event again, as redeliveries that change nothing.
    _finish(_follow(settings, job))
    # A message the worker dead-letters, on the run's partition (sent as it is: `evalstream
    # publish` would refuse it): once it is dead-lettered, everything follow sent before it has
    # been through the worker.
    asyncio.run(publish(settings, [b'{"schema_version": 1, "run_id": "' + run_id.encode() + b'"}']))
    assert len(read_topic(settings, settings.deadletter_topic, until=1, timeout=60)) == 1
    assert [record.value for record in read_topic(settings, settings.summaries_topic, until=2, timeout=3)] == expected


def test_following_a_nel_run_as_it_is_written_gives_the_imported_summaries(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    settings = worker.settings
    before = len(read_whole(settings, settings.summaries_topic))  # the module's other tests' summaries
    output = tmp_path / "nel-resumed"
    steps = write_run(NEL_FIXTURES / "nel-resumed", output)
    next(steps)
    follow = _follow(settings, output, "nemo")
    for step in steps:
        assert follow.poll() is None, f"follow ended before the run did ({step})"
        time.sleep(STEP / 3)
    log = _finish(follow)
    assert "Traceback" not in log
    expected = replayed(list(import_lines("nemo", output, ImportOptions()))).splitlines()
    assert len(expected) == 2  # one run per benchmark
    got = read_topic(settings, settings.summaries_topic, until=before + len(expected), timeout=90)[before:]
    assert sorted(record.value for record in got) == sorted(expected)
