"""The worker's web port over a real broker: /ready, /live and /metrics, and nothing else."""

from __future__ import annotations

import asyncio
import io
import socket
import sys
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from events.codec import encode
from tests import builders
from tests.projections.examples import EXAMPLE_LOG
from tests.worker.runtime.test_worker_kafka import send_raw
from worker.commands.clients import publish
from worker.commands.replay import replay
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics

pytestmark = pytest.mark.kafka

HOST = "127.0.0.2"
"""A loopback address other than the default, to see that the worker listens there only."""


@pytest.fixture(scope="module")
def served(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    settings = isolated_settings(bootstrap, web_host=HOST, partitions=2)
    asyncio.run(ensure_topics(settings))
    process = WorkerProcess(settings, tmp_path_factory.mktemp("served"))
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()
        print(process.log()[-3000:], file=sys.stderr)


def until(check: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout:.0f}s: {check}")
        time.sleep(0.2)


def test_ready_and_live_answer(served: WorkerProcess) -> None:
    assert served.get("/ready") == (200, "ready\n")
    assert served.get("/live") == (200, "live\n")
    status, text = served.get("/metrics")
    assert status == 200
    assert "# TYPE evalstream_events_applied_total counter" in text


@pytest.mark.parametrize(
    "path", ["/", "/router/", "/table/state/run-1/", "/table/", "/stats/", "/graph/", "/performance/", "/ready/x"]
)
def test_no_other_path_answers(served: WorkerProcess, path: str) -> None:
    assert served.get(path)[0] == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_no_other_method_answers(served: WorkerProcess, method: str) -> None:
    assert {served.get(path, method)[0] for path in ("/ready", "/live", "/metrics")} == {405}


def test_it_listens_on_the_configured_host_and_nowhere_else(served: WorkerProcess) -> None:
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", served.settings.web_port)) != 0
    listening = [c.laddr for c in psutil.Process(served.process.pid).net_connections("inet") if c.status == "LISTEN"]
    assert [(address.ip, address.port) for address in listening] == [(HOST, served.settings.web_port)]


def test_metrics_count_what_the_worker_did(served: WorkerProcess) -> None:
    settings = served.settings
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    stats = replay(iter(lines), io.BytesIO(), io.StringIO())
    asyncio.run(publish(settings, lines))
    late_close = encode(builders.closed("run-11-0", event_id="a-second-close"))
    poison: list[tuple[bytes | None, bytes]] = [
        (b"run-11-0", b"\xff not json"),
        (b"someone-else", lines[0]),
        (b"run-11-1", lines[3]),  # delivered twice
        (b"run-11-0", late_close),  # run-11-0 is closed already
    ]
    asyncio.run(send_raw(settings, poison))
    expected = {
        "evalstream_events_applied_total": stats.applied,
        "evalstream_events_redelivered_total": stats.redeliveries + 1,
        "evalstream_events_ignored_total": stats.ignored + 1,
        'evalstream_dead_letters_total{reason="not-json"}': 1,
        'evalstream_dead_letters_total{reason="key-mismatch"}': 1,
        'evalstream_consumer_lag{partition="0"}': 0,
        'evalstream_consumer_lag{partition="1"}': 0,
    }

    def counted() -> bool:
        samples = served.scrape()
        return all(samples.get(name) == value for name, value in expected.items())

    until(f"/metrics shows {expected}", counted)
    samples = served.scrape()
    assert samples["evalstream_events_skipped_total"] == 0  # nothing read again: no rewind happened
    assert samples["evalstream_runs_in_memory"] > 0
    assert samples["evalstream_runs_evicted_total"] == 0  # fewer runs than the cache holds
    assert 0 <= samples['evalstream_last_event_age_seconds{partition="0"}'] < 120
    checkpoints = "evalstream_checkpoint_duration_seconds_count"
    until("a checkpoint is in the histogram", lambda: served.scrape()[checkpoints] > 0)
    until("the run cache's memory is estimated", lambda: served.scrape()["evalstream_run_cache_bytes"] > 0)
    assert served.scrape()["process_resident_memory_bytes"] > 10 * 2**20
