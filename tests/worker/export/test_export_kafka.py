"""The exporters on the summaries topic of a real broker and worker: a consumer group of their
own, committed records only, offsets committed once written, `--follow`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from mlflow import MlflowClient

from events.clients.kafka import running
from events.codec import encode
from events.models import InputEvent
from tests.builders import scored_run
from tests.worker.export.exporting import evalstream, query, replayed
from worker.export.flat import run_key
from worker.local.mlflow_server import mlflow_server
from worker.local.processes import WorkerProcess, topic_flags
from worker.settings import Settings

pytestmark = pytest.mark.kafka


def publish(settings: Settings, folder: Path, events: Sequence[InputEvent]) -> None:
    log = folder / f"events-{time.monotonic_ns()}.jsonl"
    log.write_bytes(b"".join(encode(event) + b"\n" for event in events))
    done = evalstream("publish", str(log), *topic_flags(settings))
    assert done.returncode == 0, done.stderr


def wait_for_summary(settings: Settings, run_id: str, revision: int = 1) -> None:
    deadline = time.monotonic() + 90
    while f'"revision":{revision},' not in evalstream("summaries", "--run", run_id, *topic_flags(settings)).stdout:
        assert time.monotonic() < deadline, f"no revision {revision} of {run_id} from the worker"
        time.sleep(0.5)


def figures_of(out: Path) -> list[tuple[str, int]]:
    return query(
        f"SELECT DISTINCT run_id, revision FROM read_parquet('{out}/figures/*/*.parquet', hive_partitioning = true) "
        "ORDER BY ALL"
    )


async def aborted_then_committed(settings: Settings, aborted: bytes, committed: bytes) -> None:
    """One summary in a transaction that aborts, then one in a transaction that commits."""
    producer = AIOKafkaProducer(**settings.client_options(), transactional_id=f"{settings.app_id}-test")
    async with running(producer):
        await producer.begin_transaction()
        await producer.send_and_wait(settings.summaries_topic, aborted, key=b"aborted")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(settings.summaries_topic, committed, key=b"kept")


def test_parquet_from_the_topic_commits_what_it_wrote(worker: WorkerProcess, tmp_path: Path) -> None:
    settings = worker.settings
    publish(settings, tmp_path, [*scored_run("k-1", {"a": [1, 0]}), *scored_run("k-2", {"a": [1]})])
    wait_for_summary(settings, "k-1")
    wait_for_summary(settings, "k-2")
    out = tmp_path / "tables"
    args = ["export", "parquet", "--out", str(out), *topic_flags(settings)]
    first = evalstream(*args)
    assert first.returncode == 0, first.stderr
    assert figures_of(out) == [("k-1", 1), ("k-2", 1)]
    again = evalstream(*args)  # the group's offsets moved past what was written
    assert again.returncode == 0, again.stderr
    assert "0 summaries read" in again.stderr
    publish(settings, tmp_path, scored_run("k-1", {"a": [1]})[1:-1])  # a late attempt: revision 2
    wait_for_summary(settings, "k-1", revision=2)
    later = evalstream(*args)
    assert "1 summaries read" in later.stderr, later.stderr
    assert figures_of(out) == [("k-1", 2), ("k-2", 1)]
    # Another group reads the whole topic again: nothing changes, nothing doubles.
    other = evalstream(*args, "--group", f"{settings.app_id}-other")
    assert "0 runs written" in other.stderr
    assert figures_of(out) == [("k-1", 2), ("k-2", 1)]


def test_records_of_an_aborted_transaction_are_never_exported(worker: WorkerProcess, tmp_path: Path) -> None:
    settings = worker.settings
    lines = replayed(tmp_path, [*scored_run("aborted", {"a": [1]}), *scored_run("kept", {"a": [0]})]).read_bytes()
    summaries = [line for line in lines.splitlines() if b'"run.summary"' in line]
    asyncio.run(aborted_then_committed(settings, summaries[0], summaries[1]))
    out = tmp_path / "tables"
    done = evalstream("export", "parquet", "--out", str(out), "--group", "aborted-test", *topic_flags(settings))
    assert done.returncode == 0, done.stderr
    runs = {run_id for run_id, _ in figures_of(out)}
    assert "kept" in runs
    assert "aborted" not in runs


@pytest.fixture(scope="module")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mlflow_server(tmp_path_factory.mktemp("mlflow-kafka")) as uri:
        yield uri


def test_mlflow_follows_the_topic(worker: WorkerProcess, tracking: str, tmp_path: Path) -> None:
    settings = worker.settings
    command = [sys.executable, "-m", "worker.commands.cli", "export", "mlflow", "--follow", *topic_flags(settings)]
    follower = subprocess.Popen(
        command,
        env={**os.environ, "MLFLOW_TRACKING_URI": tracking},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = MlflowClient(tracking)
    try:
        publish(settings, tmp_path, scored_run("followed", {"a": [1, 1], "b": [0, 1]}))
        deadline = time.monotonic() + 120
        while not (
            found := client.search_runs(
                [e.experiment_id for e in client.search_experiments()],
                f"tags.`evalstream.run_key` = '{run_key('followed')}' and tags.`evalstream.revision` = '1'",
            )
        ):
            assert follower.poll() is None, follower.stderr.read() if follower.stderr else ""
            assert time.monotonic() < deadline, "the followed run never reached MLflow"
            time.sleep(0.5)
        (run,) = found
        assert run.data.metrics["reward.score.pass_at_1"] == 0.75
    finally:
        follower.terminate()
        follower.wait(timeout=30)
