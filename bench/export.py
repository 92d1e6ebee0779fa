"""The exporters' figures: a backfill's throughput to MLflow and to Parquet, and the time from
a run's close to its MLflow run being visible.

Run: `python -m bench.export` (`--runs 10000`, `--latency-runs 20`). Each part starts what it
needs on this machine: a real MLflow tracking server (`worker.local.mlflow_server`, SQLite,
artifacts served by it), a Kafka broker (EVALSTREAM_BOOTSTRAP, else a local one) and a worker.

1. Backfill: `--runs` summaries in a file (distinct run ids; each a copy of one of 50 replayed
   synthetic runs of 10 tasks x 3 attempts, 4 metrics), exported with the command's own code
   (`worker.commands.export.run`, in process). Runs/s to Parquet, against decoding the same
   lines alone; runs/s to MLflow, against the tracker's own floor on the same server: one
   bare `create_run` and one `log_batch` of the same metrics per run.
2. Close to visible: `export mlflow --follow` beside a worker; runs published one at a time,
   each timed from its `run.closed` acknowledged by the broker to its MLflow run carrying
   revision 1 (polled every 50 ms with MLflow's client): p50 and p90.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from mlflow import MlflowClient
from mlflow.entities import Metric

from events.codec import decode_output
from events.outputs import RunSummary
from events.synthetic import synthetic_run
from worker.commands import export
from worker.commands.clients import publish
from worker.export.flat import run_key
from worker.export.sink import Sink
from worker.export.to_mlflow import MlflowSink, metrics
from worker.export.to_parquet import ParquetSink
from worker.local.clusters import cluster
from worker.local.mlflow_server import mlflow_server
from worker.local.processes import WorkerProcess, isolated_settings, topic_flags
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

DISTINCT = 50


def summaries_file(folder: Path, runs: int) -> Path:
    """`runs` summaries, copies of `DISTINCT` replayed synthetic runs under new run ids."""
    log = folder / "log.jsonl"
    with log.open("wb") as out:
        for index in range(DISTINCT):
            for event in synthetic_run(f"base-{index}", tasks=10, attempts=3, seed=index):
                out.write(orjson.dumps(event) + b"\n")
    replayed = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "replay", str(log)], capture_output=True, check=True
    ).stdout.splitlines()
    path = folder / "summaries.jsonl"
    with path.open("wb") as out:
        for index in range(runs):
            record = orjson.loads(replayed[index % DISTINCT])
            record["run_id"] = f"run-{index:06d}"
            out.write(orjson.dumps(record) + b"\n")
    return path


def timed_export(path: Path, sink: Sink) -> float:
    """Seconds to export the file with the command's own loop."""
    began = time.perf_counter()
    code = export.run(
        lambda: sink, settings=Settings(), group="-", follow=False, from_file=str(path), err=io.StringIO()
    )
    if code != 0:
        raise RuntimeError(f"export exited {code}")
    return time.perf_counter() - began


def decode_only(path: Path) -> float:
    began = time.perf_counter()
    for line in path.read_bytes().splitlines():
        decode_output(line)
    return time.perf_counter() - began


def mlflow_floor(uri: str, path: Path) -> float:
    """Seconds for one bare create_run and one log_batch of the same metrics per run."""
    client = MlflowClient(uri)
    experiment = client.create_experiment("floor")
    lines = path.read_bytes().splitlines()
    began = time.perf_counter()
    for line in lines:
        summary = RunSummary.model_validate_json(line)
        run = client.create_run(experiment, run_name=summary.run_id)
        now = int(time.time() * 1000)
        client.log_batch(run.info.run_id, metrics=[Metric(k, v, now, 1) for k, v in metrics(summary).items()])
    return time.perf_counter() - began


def backfill(folder: Path, runs: int) -> None:
    path = summaries_file(folder, runs)
    print(f"1. backfill of {runs} summaries ({path.stat().st_size / 2**20:.1f} MiB), in process")
    decoding = decode_only(path)
    parquet = timed_export(path, ParquetSink(folder / "tables", "date"))
    print(
        f"   parquet: {runs / parquet:,.0f} runs/s ({parquet:.1f} s); decoding alone {runs / decoding:,.0f} runs/s: "
        f"{decoding / parquet:.2f}x of it"
    )
    with mlflow_server(folder) as uri:
        exported = timed_export(path, MlflowSink(uri, experiment="backfill", experiment_label=None))
        floor_runs = min(runs, 1000)
        floor_path = folder / "floor.jsonl"
        floor_path.write_bytes(b"\n".join(path.read_bytes().splitlines()[:floor_runs]) + b"\n")
        floor = mlflow_floor(uri, floor_path) * runs / floor_runs
    print(
        f"   mlflow: {runs / exported:,.1f} runs/s ({exported:.0f} s); the tracker's floor (create_run + log_batch a "
        f"run, serially, over {floor_runs} runs) {runs / floor:,.1f} runs/s: {floor / exported:.2f}x of it"
    )


async def _publish_run(settings: Settings, run_id: str) -> float:
    """Publish one run; the time its run.closed was acknowledged."""
    lines = [orjson.dumps(event) for event in synthetic_run(run_id, tasks=10, attempts=3)]
    await publish(settings, lines[:-1])
    await publish(settings, lines[-1:])
    return time.time()


def close_to_visible(folder: Path, count: int) -> None:
    (folder / "latency").mkdir()
    with (
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), folder / "broker") as bootstrap,
        mlflow_server(folder / "latency") as uri,
    ):
        settings = isolated_settings(bootstrap)
        asyncio.run(ensure_topics(settings))
        worker = WorkerProcess(settings, folder / "worker")
        command = [sys.executable, "-m", "worker.commands.cli", "export", "mlflow", "--follow", *topic_flags(settings)]
        follower = subprocess.Popen(command, env={**os.environ, "MLFLOW_TRACKING_URI": uri}, stderr=subprocess.DEVNULL)
        client = MlflowClient(uri)
        try:
            worker.wait_serving()
            delays = []
            for index in range(count):
                run_id = f"latency-{index}"
                closed_at = asyncio.run(_publish_run(settings, run_id))
                wanted = f"tags.`evalstream.run_key` = '{run_key(run_id)}' and tags.`evalstream.revision` = '1'"
                while not client.search_runs([e.experiment_id for e in client.search_experiments()], wanted):
                    if time.time() - closed_at > 120:
                        raise RuntimeError(f"{run_id} not visible in MLflow after 120 s")
                    time.sleep(0.05)
                delays.append(time.time() - closed_at)
        finally:
            follower.terminate()
            follower.wait(timeout=30)
            worker.stop()
    cuts = statistics.quantiles(delays, n=10)
    print(
        f"2. close to visible in MLflow, {count} runs one at a time (worker, export mlflow --follow): "
        f"p50 {statistics.median(delays) * 1000:.0f} ms, p90 {cuts[8] * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--latency-runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if args.runs:
            backfill(folder, args.runs)
        if args.latency_runs:
            close_to_visible(folder, args.latency_runs)


if __name__ == "__main__":
    main()
