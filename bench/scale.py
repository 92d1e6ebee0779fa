"""Scale-out: 1, 2 and 3 workers in one consumer group over a 6-partition events topic.

Run: `python -m bench.scale [--events 120000] [--runs 60] [--workers 1,2,3]`
(EVALSTREAM_BOOTSTRAP if set, else a broker of its own). For each worker count, on topics of
their own: start the workers, wait until every one says /ready and the six partitions are
all owned, publish the same log (runs of 5 attempts a task, interleaved), and time from the
first publish to the last summary. Prints, per count: events/s, each worker's partitions and
share of the applied events (its /metrics), whether every run's summaries equal replay's
(every revision, byte for byte), each worker's RSS, and how long each took to stop (SIGTERM
to exit: the changelog wait of a stop, plus faust's own shutdown).

On a shared machine every figure is a lower bound: the workers, the broker and the publisher
compete for the same cores.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import orjson
import psutil

from events.synthetic import interleave, synthetic_run
from worker.commands.clients import publish
from worker.commands.replay import replay
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, free_port, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings
from worker.topic_reader import topic_reader

PARTITIONS = 6


def by_run(values: list[bytes]) -> dict[str, list[bytes]]:
    runs: dict[str, list[bytes]] = defaultdict(list)
    for value in values:
        runs[orjson.loads(value)["run_id"]].append(value)
    return dict(runs)


def owned(worker: WorkerProcess) -> set[int]:
    """The events partitions a worker owns, from its lag series."""
    prefix = 'evalstream_consumer_lag{partition="'
    return {int(name[len(prefix) : -2]) for name in worker.scrape() if name.startswith(prefix)}


def wait_assigned(workers: list[WorkerProcess], timeout: float = 180.0) -> list[set[int]]:
    """Until every worker is ready and the partitions are split among them, twice in a row
    a second apart (a rebalance can still be on its way after the last worker joins)."""
    deadline, stable = time.monotonic() + timeout, 0
    while stable < 2:
        if time.monotonic() > deadline:
            raise RuntimeError(f"partitions not all assigned after {timeout:.0f}s")
        for worker in workers:
            worker.wait_serving(timeout=timeout)
        shares = [owned(worker) for worker in workers]
        split = sum(len(share) for share in shares) == PARTITIONS and set().union(*shares) == set(range(PARTITIONS))
        stable = stable + 1 if split else 0
        time.sleep(1.0)
    return shares


async def fold(settings: Settings, lines: list[bytes], expected: int) -> tuple[float, list[bytes]]:
    """Seconds from the first publish until `expected` summaries are out, and the summaries."""
    consumer = await topic_reader(settings, settings.summaries_topic, wait=60)
    assert consumer is not None
    began = time.perf_counter()
    sender = asyncio.create_task(publish(settings, lines))
    summaries: list[bytes] = []
    try:
        while len(summaries) < expected:
            if time.perf_counter() - began > 900:
                raise RuntimeError(f"{len(summaries)} of {expected} summaries after 900 s")
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                summaries.extend(record.value for record in batch)
        took = time.perf_counter() - began
        await sender
    finally:
        await consumer.stop()
    return took, summaries


def measure(bootstrap: str, scratch: Path, count: int, lines: list[bytes], expected: list[bytes]) -> None:
    settings = isolated_settings(bootstrap, partitions=PARTITIONS)
    asyncio.run(ensure_topics(settings))
    workers = [
        WorkerProcess(replace(settings, web_port=free_port()), scratch / f"{count}-workers-{index}")
        for index in range(count)
    ]
    try:
        shares = wait_assigned(workers)
        took, summaries = asyncio.run(fold(settings, lines, len(expected)))
        applied = [worker.scrape()["evalstream_events_applied_total"] for worker in workers]
        rss = [psutil.Process(worker.process.pid).memory_info().rss / 2**20 for worker in workers]
    finally:
        stops = []
        for worker in workers:
            began = time.perf_counter()
            worker.stop()
            stops.append(time.perf_counter() - began)
    equal = by_run(summaries) == by_run(expected)
    print(
        f"{count} worker{'s' if count > 1 else ' '}: {len(lines) / took:>8,.0f} events/s  ({took:5.1f} s)  "
        f"summaries equal replay: {'yes' if equal else 'NO'}"
    )
    for index, (share, events, memory, stop) in enumerate(zip(shares, applied, rss, stops, strict=True)):
        print(
            f"    worker {index + 1}: partitions {sorted(share)}  applied {events / sum(applied):6.1%}  "
            f"RSS {memory:4.0f} MB  stopped in {stop:4.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=120_000)
    parser.add_argument("--runs", type=int, default=60, help="runs in the log (spread over the partitions by key)")
    parser.add_argument("--workers", default="1,2,3")
    args = parser.parse_args()
    tasks = max(1, args.events // (args.runs * 25))
    sources = [synthetic_run(f"scale-{i:03d}", tasks=tasks, attempts=5, seed=i) for i in range(args.runs)]
    lines = [orjson.dumps(event) for event in interleave(sources, seed=1)]
    out = io.BytesIO()
    replay(iter(lines), out, io.StringIO())
    expected = out.getvalue().splitlines()
    print(f"{len(lines):,} events, {args.runs} runs, {PARTITIONS} partitions, {os.cpu_count()} cores (shared)")
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        for count in (int(n) for n in args.workers.split(",")):
            measure(bootstrap, Path(scratch), count, lines, expected)


if __name__ == "__main__":
    main()
