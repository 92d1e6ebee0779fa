"""The client's real errors, brought about on real brokers of these tests' own: a coordinator
that forgets an idle transactional id, a broker stopped under a checkpoint and under a
revocation, a transaction timeout the broker refuses. Each test shows its fault happened
(the worker's counters or its log) besides the outputs being exact."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

from events.synthetic import synthetic_run
from tests.worker.runtime.test_refused_kafka import until
from tests.worker.runtime.test_worker_kafka import by_run, replayed
from worker.commands.clients import publish
from worker.local import broker
from worker.local.clusters import local_broker
from worker.local.processes import WorkerProcess, isolated_settings
from worker.local.records import read_topic, read_whole
from worker.runtime.app import stop_bound
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka

FORGETS_AFTER_MS = 4000
"""The coordinator's `transactional.id.expiration.ms` on the forgetful broker (7 days by default)."""


@pytest.fixture(scope="module")
def forgetful(tmp_path_factory: pytest.TempPathFactory) -> Iterator[broker.BrokerConfig]:
    """A broker whose transaction coordinator forgets a transactional id idle for a few seconds."""
    overrides = {
        "transactional.id.expiration.ms": str(FORGETS_AFTER_MS),
        "transaction.remove.expired.transaction.cleanup.interval.ms": "500",
    }
    with local_broker(tmp_path_factory.mktemp("forgetful"), overrides=overrides) as config:
        yield config


def run_lines(run_id: str, tasks: int = 3) -> list[bytes]:
    return [orjson.dumps(event) for event in synthetic_run(run_id, tasks=tasks, attempts=3)]


def assert_exact(settings: Settings, published: list[bytes]) -> None:
    """Every run's summaries are what replay gives for `published`, and nothing was dead-lettered."""
    landed = read_whole(settings, settings.summaries_topic)
    assert by_run([record.value for record in landed]) == by_run(replayed(published))
    assert read_whole(settings, settings.deadletter_topic) == []


def test_partitions_idle_past_the_coordinators_expiry_lose_nothing(
    forgetful: broker.BrokerConfig, tmp_path: Path
) -> None:
    """Runs published in bursts further apart than the coordinator keeps an idle
    transactional id: the next checkpoint's AddPartitionsToTxn is answered
    InvalidProducerIdMapping and aiokafka fails its batches with a bare KafkaError. No summary
    is dead-lettered; each is exactly what replay gives, and the worker renewed its producers."""
    settings = isolated_settings(forgetful.bootstrap, partitions=2)
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker")
    try:
        worker.wait_serving()
        bursts = [[run_lines(f"burst{burst}-run{run}") for run in range(3)] for burst in range(3)]
        published: list[bytes] = []
        for number, burst in enumerate(bursts):
            if number:
                time.sleep(FORGETS_AFTER_MS / 1000 * 2.5)  # idle past the expiry and its clean-up
            for lines in burst:
                published += lines
            asyncio.run(publish(settings, [line for lines in burst for line in lines]))
            read_topic(settings, settings.summaries_topic, until=3 * (number + 1), timeout=90)
        assert_exact(settings, published)
        samples = worker.scrape()
        assert samples.get("evalstream_partition_failures_total", 0) >= 1, "the coordinator never forgot an id"
        assert samples.get('evalstream_outputs_refused_total{stream="summary"}', 0) == 0
        assert "refused the summary" not in worker.log()
        assert worker.process.poll() is None
    finally:
        worker.stop()
        print(worker.log()[-4000:], file=sys.stderr)


def test_a_transaction_timeout_the_broker_refuses_stops_the_worker_saying_what_to_set(
    forgetful: broker.BrokerConfig, tmp_path: Path
) -> None:
    """A transaction timeout above the broker's transaction.max.timeout.ms (15 minutes):
    the worker stops (exit 1) naming both settings, instead of retrying for ever."""
    settings = isolated_settings(forgetful.bootstrap)
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker", env={"EVALSTREAM_TRANSACTION_TIMEOUT": "3600"})
    try:
        assert worker.process.wait(timeout=120) == 1
        log = worker.log()
        assert "transaction.max.timeout.ms" in log
        assert "EVALSTREAM_TRANSACTION_TIMEOUT" in log
        assert "Traceback" not in log
    finally:
        worker.stop()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[broker.BrokerConfig]:
    with local_broker(tmp_path / "broker") as config:
        yield config


def wait_stopped(worker: WorkerProcess, timeout: float) -> float:
    """Seconds the worker took to exit after SIGTERM (fails past `timeout`)."""
    began = time.monotonic()
    worker.process.terminate()
    try:
        worker.process.wait(timeout=timeout)
    except Exception:
        worker.process.kill()
        raise AssertionError(f"the worker did not stop within {timeout:.0f} s of SIGTERM") from None
    return time.monotonic() - began


def test_a_worker_stops_within_its_bound_while_the_broker_is_away_and_its_successor_is_exact(
    own_broker: broker.BrokerConfig, tmp_path: Path
) -> None:
    """The broker is killed while the worker checkpoints a stream of events; SIGTERM then
    ends the worker within the documented bound (the revocation's wait, then each
    producer's abort and close, bounded), although nothing answers. With the broker back, a
    new worker commits every run exactly once, as replay gives it."""
    settings = isolated_settings(own_broker.bootstrap, partitions=2)
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker")
    lines = [line for run in range(6) for line in run_lines(f"run{run}", tasks=20)]
    try:
        worker.wait_serving()
        asyncio.run(publish(settings, lines[: len(lines) // 2]))
        until("the worker checkpoints", lambda: worker.scrape().get("evalstream_events_applied_total", 0) > 0)
        broker.stop(own_broker, timeout=5)  # SIGTERM, then SIGKILL: gone mid-stream
        time.sleep(2)
        took = wait_stopped(worker, timeout=stop_bound(settings) + 5)
    finally:
        worker.stop()
        print(worker.log()[-4000:], file=sys.stderr)
    print(f"stopped {took:.1f} s after SIGTERM with the broker away", file=sys.stderr)
    assert worker.process.returncode == 0
    broker.start(own_broker, timeout=180)
    successor = WorkerProcess(settings, tmp_path / "successor")
    try:
        successor.wait_serving()
        asyncio.run(publish(settings, lines[len(lines) // 2 :]))
        read_topic(settings, settings.summaries_topic, until=6, timeout=120)
        assert_exact(settings, lines)
    finally:
        successor.stop()
        print(successor.log()[-3000:], file=sys.stderr)


def test_a_broker_stopped_during_a_checkpoint_costs_nothing_once_it_is_back(
    own_broker: broker.BrokerConfig, tmp_path: Path
) -> None:
    """The broker stopped while checkpoints are written, and started again a little later:
    the worker renews its producers until the broker answers (counted, said once), and every
    run lands exactly once."""
    settings = isolated_settings(own_broker.bootstrap, partitions=2)
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker")
    lines = [line for run in range(6) for line in run_lines(f"run{run}", tasks=20)]
    try:
        worker.wait_serving()
        asyncio.run(publish(settings, lines[: len(lines) // 2]))
        until("the worker checkpoints", lambda: worker.scrape().get("evalstream_events_applied_total", 0) > 0)
        broker.stop(own_broker, timeout=5)
        time.sleep(12)  # past the transaction timeout: writes under way fail
        broker.start(own_broker, timeout=180)
        asyncio.run(publish(settings, lines[len(lines) // 2 :]))
        read_topic(settings, settings.summaries_topic, until=6, timeout=180)
        assert_exact(settings, lines)
        samples = worker.scrape()
        assert (
            samples.get("evalstream_partition_failures_total", 0) + samples.get("evalstream_partitions_redone_total", 0)
            >= 1
        ), "no write ever failed: the broker was not away during a checkpoint"
        assert worker.process.poll() is None
    finally:
        worker.stop()
        print(worker.log()[-4000:], file=sys.stderr)


def test_partitions_added_to_the_events_topic_while_it_runs_stop_the_worker_saying_so(
    bootstrap: str, tmp_path: Path
) -> None:
    """A partition added to the events topic under a running worker: the group gives it the
    new partition, whose state has no changelog partition and whose runs' keys now hash
    elsewhere. The worker stops (exit 1) with what happened and the way out, instead of
    retrying the claim for ever."""
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker")
    try:
        worker.wait_serving()
        asyncio.run(_add_partition(settings.client_options(), settings.events_topic))
        assert worker.process.wait(timeout=120) == 1
        log = worker.log()
        assert "partitions were added while the worker ran" in log
        assert "Traceback" not in log
    finally:
        worker.stop()


async def _add_partition(options: dict[str, object], topic: str) -> None:
    admin = AIOKafkaAdminClient(**options)
    await admin.start()
    try:
        await admin.create_partitions({topic: NewPartitions(2)})
    finally:
        await admin.close()
