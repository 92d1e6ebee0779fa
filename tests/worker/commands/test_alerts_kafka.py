"""`evalstream alerts` against a real broker, a real worker and a real HTTP receiver: each alert
arrives once, across a kill -9 of the alerter and of the worker, and a busy webhook."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from events.codec import encode
from events.models import InputEvent
from tests.builders import scored_run, trial
from tests.receiver import Receiver, receiver
from worker.local.processes import WorkerProcess, free_port, isolated_settings, topic_flags
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka


def run_events(run_id: str, attempts: dict[str, list[int | None]]) -> list[InputEvent]:
    """A closed run of `benchmark=b`, each attempt with its trial.finished (failed: None)."""
    events = scored_run(run_id, attempts, labels={"benchmark": "b"})
    trials = [
        trial(task_id, f"{task_id}-{n}", "failed" if value is None else "completed", run_id=run_id)
        for task_id, values in attempts.items()
        for n, value in enumerate(values)
    ]
    return [events[0], *trials, *events[1:]]


def publish(settings: Settings, folder: Path, events: list[InputEvent]) -> None:
    log = folder / f"{events[0].run_id}.jsonl"
    log.write_bytes(b"".join(encode(event) + b"\n" for event in events))
    command = [sys.executable, "-m", "worker.commands.cli", "publish", str(log), *topic_flags(settings)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


def start_alerts(settings: Settings, url: str, state: Path, log: Path) -> subprocess.Popen[bytes]:
    """An alerter, once it has read the topics to their end and follows them."""
    command = [
        sys.executable, "-m", "worker.commands.cli", "alerts", "--webhook", url, "--state-dir", str(state),
        "--min-trials", "4", *topic_flags(settings),
    ]  # fmt: skip
    before = following(log)
    with log.open("ab") as out:
        process = subprocess.Popen(command, stderr=out, stdout=out)
    try:
        until(lambda: following(log) > before, 60, log)
    except AssertionError:
        kill(process)
        raise
    return process


def following(log: Path) -> int:
    return log.read_text().count("evalstream alerts: following") if log.exists() else 0


def summarised(settings: Settings, run_id: str) -> bool:
    command = [sys.executable, "-m", "worker.commands.cli", "summaries", "--run", run_id, *topic_flags(settings)]
    return run_id.encode() in subprocess.run(command, capture_output=True, check=False).stdout


def until(done: Callable[[], bool], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out; the alerter's log:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def kill(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def ids(hook: Receiver) -> Counter[str]:
    with hook.lock:
        return Counter(body["evalstream"]["id"] for body in hook.bodies)


def test_each_alert_arrives_once_across_kill_9s_of_the_alerter_and_the_worker(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    state, log = tmp_path / "alerts-state", tmp_path / "alerts.log"
    # What the topics held before the first start is history: recorded, not sent.
    worker = WorkerProcess(settings.with_overrides(web_port=free_port()), tmp_path / "worker")
    alerters: list[subprocess.Popen[bytes]] = []
    with receiver([503]) as hook:  # busy at first: the first alert is taken on a retry
        try:
            worker.wait_ready()
            publish(settings, tmp_path, run_events("old", {"a": [1, 1]}))
            until(lambda: summarised(settings, "old"), 60, tmp_path / "worker" / "worker.log")
            alerter = start_alerts(settings, hook.url, state, log)
            alerters.append(alerter)
            # r1: closes with half its trials dead; r2 (same benchmark) flips a, b and c.
            publish(settings, tmp_path, run_events("r1", {"a": [1, 1], "b": [None, None], "c": [None, 1]}))
            first = {"r1/1/run-closed", "r1/0/dead-trials"}
            until(lambda: first <= set(ids(hook)), 90, log)
            kill(alerter)
            kill(worker.process)  # the worker dies too, and comes back on its data dir
            worker = WorkerProcess(settings.with_overrides(web_port=free_port()), tmp_path / "worker")
            publish(settings, tmp_path, run_events("r2", {"a": [0, 0], "b": [1, 1], "c": [1, 1]}))
            # r2 is on the topic before the alerter is back: it is found by reading again, not by following.
            until(lambda: summarised(settings, "r2"), 120, tmp_path / "worker" / "worker.log")
            alerter = start_alerts(settings, hook.url, state, log)
            alerters.append(alerter)
            second = {"r2/1/run-closed", "r2/1/verdict-flip"}
            until(lambda: second <= set(ids(hook)), 120, log)
            time.sleep(3)  # anything sent twice would arrive by now
            kill(alerter)
        finally:
            for each in alerters:
                if each.poll() is None:
                    kill(each)
            worker.stop()
    sent = ids(hook)
    assert set(sent) == first | second, sent  # nothing of the history (run "old")
    assert sum(sent.values()) == len(first | second) + 1, sent  # posted once each, but the one the 503 refused
    taken = Counter(body["evalstream"]["id"] for body in hook.taken)
    assert set(taken.values()) == {1}, taken  # each alert taken once
    flip = next(body for body in hook.taken if body["evalstream"]["rule"] == "verdict-flip")
    assert flip["evalstream"]["previous_run_id"] == "r1"
    assert flip["text"].startswith("run r2: 3 verdicts changed since r1: ")
