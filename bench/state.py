"""A long-lived worker's memory, and its restart time, as closed runs pile up.

Run: `python -m bench.state` (EVALSTREAM_BOOTSTRAP if set, else a broker of its own).
One worker folds closed runs of 200 attempts each (40 tasks x 5 trials, one score per
trial), published in rounds of 500; after each round it prints the worker's RSS once
every run of the round has its summary. The bound holds if RSS is flat (within 15%) between 2,500
and 5,000 runs: the run cache holds `EVALSTREAM_CACHE_MB` of runs at most, the rest live in
the store. At 1,000 and 10,000 runs it also restarts the worker (a clean stop, a new
process on a fresh data dir, as after a move to another machine) and prints how long it
took to consume again: from process start until a probe run's first progress event (the
1,000-run figure comes from a worker of its own on topics of their own).

What keeps the memory flat: the fetcher is held back when a due checkpoint finds the one
before it still being written, so at most two checkpoints' changes are held
(`worker.runtime.engine`), and RocksDB's memory is capped per partition
(`worker.runtime.store`). A restart on a fresh data dir reads the whole changelog partition
(a record per task and run header of the open runs, a marker per closed one), so its time
grows with what is stored; one on the same data dir reads only its tail (`python -m
bench.restart`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import orjson
import psutil
from aiokafka import AIOKafkaConsumer

from events.synthetic import synthetic_run
from worker.commands.clients import publish
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings
from worker.topic_reader import topic_reader

ROUND = 500
"""Runs published per round."""


def run_lines(first: int, count: int) -> list[bytes]:
    return [
        orjson.dumps(event)
        for index in range(first, first + count)
        for event in synthetic_run(f"closed-{index:05d}", tasks=40, attempts=5, seed=index)
    ]


async def until_keys(consumer: AIOKafkaConsumer, keys: set[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while keys:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(keys)} runs still without output after {timeout:.0f}s")
        for batch in (await consumer.getmany(timeout_ms=200)).values():
            keys -= {record.key for record in batch}


async def fold_round(settings: Settings, first: int) -> None:
    consumer = await topic_reader(settings, settings.summaries_topic, at_end=True, wait=60)
    assert consumer is not None
    try:
        await publish(settings, run_lines(first, ROUND))
        await until_keys(consumer, {f"closed-{i:05d}".encode() for i in range(first, first + ROUND)}, 600)
    finally:
        await consumer.stop()


async def probe(settings: Settings, run_id: str) -> None:
    """Publish a small run and wait for its first progress event."""
    consumer = await topic_reader(settings, settings.progress_topic, at_end=True, wait=60)
    assert consumer is not None
    try:
        await publish(settings, [orjson.dumps(e) for e in synthetic_run(run_id, tasks=1, attempts=1)])
        await until_keys(consumer, {run_id.encode()}, 600)
    finally:
        await consumer.stop()


def restart(settings: Settings, worker: WorkerProcess, scratch: Path, runs: int) -> WorkerProcess:
    worker.stop()
    began = time.perf_counter()
    replacement = WorkerProcess(settings, scratch / f"worker-after-{runs}")
    asyncio.run(probe(settings, f"probe-{runs}"))
    print(f"restart with {runs:>6,} closed runs stored: consuming again after {time.perf_counter() - began:5.1f} s")
    return replacement


def fold(settings: Settings, scratch: Path, runs: int, *, report: bool) -> None:
    """Fold `runs` closed runs through one worker (RSS after each round if `report`), then
    time its restart."""
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, scratch / "worker")
    rss: dict[int, float] = {}
    try:
        worker.wait_ready()
        for first in range(0, runs, ROUND):
            began = time.perf_counter()
            asyncio.run(fold_round(settings, first))
            folded = first + ROUND
            rss[folded] = psutil.Process(worker.process.pid).memory_info().rss / 2**20
            rate = ROUND * 402 / (time.perf_counter() - began)
            if report:
                print(f"{folded:>6,} closed runs folded: worker RSS {rss[folded]:6.0f} MB  ({rate:,.0f} events/s)")
        worker = restart(settings, worker, scratch, runs)
    finally:
        worker.stop()
    if 2_500 in rss and 5_000 in rss:
        ratio = rss[5_000] / rss[2_500]
        verdict = "flat" if ratio <= 1.15 and rss[5_000] < 400 else "NOT flat"
        print(f"RSS at 5,000 / at 2,500 runs: {ratio:.2f} ({verdict}: target <= 1.15 and < 400 MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=1_000, help="runs of the first restart figure")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        fold(isolated_settings(bootstrap), Path(scratch) / "small", args.small, report=False)
        fold(isolated_settings(bootstrap), Path(scratch) / "large", args.runs, report=True)


if __name__ == "__main__":
    main()
