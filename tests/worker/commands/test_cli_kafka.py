"""The people-facing commands, run as a user runs them, against a real broker and worker."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from events.codec import encode
from tests.builders import scored_run
from tests.projections.examples import BASELINE, CANDIDATE, EXAMPLE_LOG
from tests.worker.commands.pipes import into_head
from worker.local.processes import WorkerProcess, isolated_settings, topic_flags
from worker.local.records import read_whole
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka


def evalstream(settings: Settings, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "worker.commands.cli", *args, *topic_flags(settings)]
    return subprocess.run(command, capture_output=True, check=False, timeout=timeout)


def test_publish_then_summaries_prints_what_replay_prints(worker: WorkerProcess) -> None:
    settings = worker.settings
    published = evalstream(settings, "publish", str(EXAMPLE_LOG))
    assert published.returncode == 0, published.stderr
    assert b"published 678 messages" in published.stderr
    replayed = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", str(EXAMPLE_LOG)], capture_output=True, check=True
    ).stdout.splitlines()
    wanted = [line for line in replayed if orjson.loads(line)["run_id"] == "run-14-0"]
    # --follow with --run: stop reading once the run's last revision has arrived.
    for _ in range(60):
        got = evalstream(settings, "summaries", "--run", "run-14-0").stdout.splitlines()
        if len(got) >= len(wanted):
            break
    assert got == wanted


def test_simulate_then_watch_shows_the_run_to_its_close(worker: WorkerProcess) -> None:
    settings = worker.settings
    simulated = evalstream(settings, "simulate", "--run-id", "sim", "--tasks", "4", "--attempts", "3", "--pace", "400")
    assert simulated.returncode == 0, simulated.stderr
    assert b"simulated run 'sim': 62 events published" in simulated.stderr  # 4 x 3 trials x 5 + start + close
    watched = evalstream(settings, "watch", "sim", timeout=60)
    assert watched.returncode == 0, watched.stderr
    screen = watched.stdout.decode()
    assert "sim [closed]" in screen
    assert "12/12 trials" in screen
    assert "reward.score" in screen


def test_gate_reads_the_latest_summaries_from_the_topic(worker: WorkerProcess, tmp_path: Path) -> None:
    settings = worker.settings
    log = tmp_path / "runs.jsonl"
    events = [*scored_run("gate-base", BASELINE), *scored_run("gate-cand", CANDIDATE)]
    log.write_bytes(b"".join(encode(event) + b"\n" for event in events))
    assert evalstream(settings, "publish", str(log)).returncode == 0
    deadline = time.monotonic() + 60
    while (gated := evalstream(settings, "gate", "gate-base", "gate-cand", "--json")).returncode == 1:
        assert b"no summary of run" in gated.stderr  # until the worker has summarized both
        assert time.monotonic() < deadline, gated.stderr
        time.sleep(0.5)
    assert gated.returncode == 0, gated.stderr
    from_file = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", str(log)], capture_output=True, check=True
    ).stdout
    offline = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "gate", "gate-base", "gate-cand", "--from-file", "-", "--json"],
        input=from_file,
        capture_output=True,
        check=True,
    )
    assert orjson.loads(gated.stdout) == orjson.loads(offline.stdout)  # the worker's summaries gate as replay's do
    failed = evalstream(settings, "gate", "gate-base", "gate-cand", "--max-regressions", "0")
    assert failed.returncode == 3
    assert "gate FAILED: reward.score: 2 regressions, more than the 0 allowed" in failed.stdout.decode()
    missing = evalstream(settings.with_overrides(summaries_topic="no-such-topic"), "gate", "gate-base", "gate-cand")
    assert missing.returncode == 1
    assert b"no topic 'no-such-topic' at " in missing.stderr


def test_retry_reads_the_summary_and_attempts_per_task_from_the_topics(worker: WorkerProcess, tmp_path: Path) -> None:
    settings = worker.settings
    events = scored_run("retry-run", {"a": [1, 1], "b": [None, 1], "c": []})
    events[0] = events[0].model_copy(update={"attempts_per_task": 2})
    log = tmp_path / "retry.jsonl"
    log.write_bytes(b"".join(encode(event) + b"\n" for event in events))
    assert evalstream(settings, "publish", str(log)).returncode == 0
    deadline = time.monotonic() + 60
    while (listed := evalstream(settings, "retry", "retry-run")).returncode == 1:
        assert b"no summary of run 'retry-run'" in listed.stderr  # until the worker has summarized it
        assert time.monotonic() < deadline, listed.stderr
        time.sleep(0.5)
    assert listed.returncode == 0, listed.stderr
    assert [(line["task_id"], line["lacks"]) for line in map(orjson.loads, listed.stdout.splitlines())] == [
        ("b", 1),
        ("c", 2),
    ]
    assert b"(attempts_per_task 2, from its run.progress in topic " in listed.stderr


def test_summaries_into_head_stops_quietly(worker: WorkerProcess) -> None:
    """`evalstream summaries | head -n1`: the reader leaves, the command ends there, exit 0."""
    settings = worker.settings
    assert evalstream(settings, "publish", str(EXAMPLE_LOG)).returncode == 0
    deadline = time.monotonic() + 60
    while len(evalstream(settings, "summaries").stdout) < 100_000:  # many pages: still writing when head leaves
        assert time.monotonic() < deadline, "the worker did not summarise the example log"
        time.sleep(0.5)
    piped = into_head("summaries", *topic_flags(settings))
    assert (piped.code, piped.stderr) == (0, "")
    assert orjson.loads(piped.read)["type"] == "run.summary"


INVALID_LINES = {
    2: b"garbage",
    4: b'{"schema_version":2,"type":"run.closed","event_id":"e-2","run_id":"r-1"}',
    5: b'{"schema_version":1,"type":"run.closed","event_id":"e-3","run_id":"r-1"' + b"[" * 3000,
}
VALID_LINES = {
    1: b'{"schema_version":1,"type":"run.closed","event_id":"e-1","run_id":"r-1"}',
    6: b'{"schema_version":1,"type":"run.closed","event_id":"e-4","run_id":"r-2"}',
}


def mixed_log(path: Path) -> Path:
    lines = {**VALID_LINES, **INVALID_LINES, 3: b""}
    path.write_bytes(b"\n".join(lines[number] for number in sorted(lines)) + b"\n")
    return path


def test_publish_sends_nothing_when_a_line_is_invalid_and_says_which(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings, needed=[settings.events_topic]))
    refused = evalstream(settings, "publish", str(mixed_log(tmp_path / "log.jsonl")))
    assert refused.returncode == 2
    said = refused.stderr.decode().splitlines()
    assert [line.split(":")[0:2] for line in said[:3]] == [
        ["line 2", " not-json"],
        ["line 4", " schema-version"],
        ["line 5", " not-json"],
    ]
    assert said[3] == (
        "evalstream publish: 3 of 5 lines are not valid events (each said above); nothing was published. "
        "Fix them, or pass --skip-invalid to publish the other 2"
    )
    assert read_whole(settings, settings.events_topic) == []


def test_publish_skip_invalid_sends_the_valid_lines_in_order(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    log = mixed_log(tmp_path / "log.jsonl")
    command = [sys.executable, "-m", "worker.commands.cli", "publish", "-", "--skip-invalid", *topic_flags(settings)]
    published = subprocess.run(command, input=log.read_bytes(), capture_output=True, check=False, timeout=120)
    assert published.returncode == 0, published.stderr
    said = published.stderr.decode().splitlines()
    assert [line.split(":")[0] for line in said[:3]] == ["line 2", "line 4", "line 5"]
    assert said[3].endswith("(3 invalid lines skipped)")
    records = read_whole(settings, settings.events_topic)
    assert [(record.key, record.value) for record in records] == [
        (b"r-1", VALID_LINES[1]),
        (b"r-2", VALID_LINES[6]),
    ]
