"""Soak: one worker over a long stream of runs, its memory sampled as it goes.

Run: `python -m bench.soak [--minutes 10] [--rate 1000] [--open 40] [--tasks 4] [--cache-mb 16]`
(EVALSTREAM_BOOTSTRAP if set, else a broker of its own). Synthetic runs of `--tasks` tasks x 5
attempts are published at a steady `--rate` events/s for `--minutes`, `--open` of them
interleaved at any time (a new run starts as one ends, so runs keep opening and closing), as
an eval service's topic sees them. Every `--every` seconds the worker's RSS, its run cache's
estimate of what it holds (`evalstream_run_cache_bytes`) and the runs it holds are sampled.
Once the last run's summary is out, prints:
1. whether every run's summaries (every revision) equal those `evalstream replay` makes of the
   same log, byte for byte (compared by digest);
2. the RSS: its median over each quarter of the stream, and the least-squares slope over the
   second half, in MB an hour (the first half is the worker warming up: its caches filling to
   their bounds, the allocator's arenas growing to the working set);
3. over the same quarters, the run cache's estimate of what it holds and the runs it holds, the
   local copy's memory as RocksDB counts it (its block cache and write buffers fill up to
   their bounds as the stream goes), and the RSS less those two: the rest of the worker.
The whole stream is many times the run cache's bound (`--cache-mb`, `EVALSTREAM_CACHE_MB`), so
what holds memory flat is the bound, not the stream's end. Memory is the figure here, not speed:
the publisher, the broker and the worker share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import psutil

from events.clients.kafka import running
from events.synthetic import synthetic_run
from worker.commands.clients import event_producer
from worker.commands.replay import replay, route_key
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings
from worker.topic_reader import topic_reader

SEED = 11
Digests = dict[str, list[bytes]]
"""run id -> the digest of each of its summaries, in the order they came."""


def stream(open_runs: int, tasks: int, seed: int) -> Iterator[bytes]:
    """Events without end: `open_runs` synthetic runs interleaved, each replaced by a new one
    when its last event (its run.closed) is out."""
    rng = random.Random(seed)
    started = 0

    def new() -> Iterator[dict[str, object]]:
        nonlocal started
        started += 1
        return iter(synthetic_run(f"soak-{started:07d}", tasks=tasks, attempts=5, seed=seed + started))

    pool = [new() for _ in range(open_runs)]
    while True:
        at = rng.randrange(len(pool))
        event = next(pool[at], None)
        if event is None:
            pool[at] = new()
            continue
        yield orjson.dumps(event)


@dataclass
class Sample:
    at: float
    """Seconds since the stream began."""
    rss: float
    """MB."""
    cache: float
    """MB, the run cache's estimate."""
    store: float
    """MB, the local copy's memory as RocksDB counts it."""
    runs: float


def digest(value: bytes) -> bytes:
    return hashlib.blake2b(value, digest_size=16).digest()


def summaries_by_run(values: list[bytes]) -> Digests:
    runs: Digests = defaultdict(list)
    for value in values:
        runs[orjson.loads(value)["run_id"]].append(digest(value))
    return dict(runs)


async def soak(
    settings: Settings,
    worker: WorkerProcess,
    log: Path,
    *,
    seconds: float,
    rate: float,
    open_runs: int,
    tasks: int,
    every: float,
) -> tuple[list[Sample], Digests]:
    """Publish the stream for `seconds` (writing it to `log` too), sampling the worker, then
    wait for the summaries of every run it closed; the samples and the summaries read."""
    process = psutil.Process(worker.process.pid)
    consumer = await topic_reader(settings, settings.summaries_topic, wait=60)
    assert consumer is not None
    closed: set[str] = set()
    got: Digests = defaultdict(list)
    samples: list[Sample] = []

    async def read() -> None:
        while True:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                for record in batch:
                    got[record.key.decode()].append(digest(record.value))

    async def sample(began: float) -> None:
        while True:
            metrics = worker.scrape()
            samples.append(
                Sample(
                    time.monotonic() - began,
                    process.memory_info().rss / 2**20,
                    metrics.get("evalstream_run_cache_bytes", 0.0) / 2**20,
                    metrics.get("evalstream_store_memory_bytes", 0.0) / 2**20,
                    metrics.get("evalstream_runs_in_memory", 0.0),
                )
            )
            await asyncio.sleep(every)

    reader = asyncio.create_task(read())
    try:
        async with running(event_producer(settings)) as producer:
            began = time.monotonic()
            sampler = asyncio.create_task(sample(began))
            events = stream(open_runs, tasks, SEED)
            sent = 0
            with log.open("wb") as out:
                while (now := time.monotonic() - began) < seconds:
                    due = int(now * rate) - sent
                    pending = []
                    for _ in range(due):
                        line = next(events)
                        out.write(line + b"\n")
                        pending.append(await producer.send(settings.events_topic, value=line, key=route_key(line)))
                        if b'"run.closed"' in line:
                            closed.add(orjson.loads(line)["run_id"])
                    sent += due
                    for future in pending:
                        await future
                    await asyncio.sleep(0.05)
            sampler.cancel()
        deadline = time.monotonic() + 600
        while not closed <= got.keys():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(closed - got.keys())} closed runs without a summary after 600 s")
            await asyncio.sleep(1)
        await asyncio.sleep(2)  # the revisions of late events of the last runs, if any
    finally:
        reader.cancel()
        await consumer.stop()
    return samples, dict(got)


def replayed(log: Path) -> Digests:
    out = io.BytesIO()
    with log.open("rb") as lines:
        replay(lines, out, io.StringIO())
    return summaries_by_run(out.getvalue().splitlines())


def quarters(samples: list[Sample], field: str) -> list[float]:
    """The median of `field` over each quarter of the stream ("rest": RSS less the run cache
    and the local copy)."""
    end = samples[-1].at
    return [
        statistics.median(_value(s, field) for s in samples if q * end / 4 <= s.at <= (q + 1) * end / 4)
        for q in range(4)
    ]


def _value(sample: Sample, field: str) -> float:
    if field == "rest":
        return sample.rss - sample.cache - sample.store
    value: float = getattr(sample, field)
    return value


def slope_per_hour(samples: list[Sample], field: str = "rss") -> float:
    """Least-squares slope of `field` over the second half of the stream, MB an hour."""
    half = [s for s in samples if s.at >= samples[-1].at / 2]
    times, values = [s.at for s in half], [_value(s, field) for s in half]
    return statistics.linear_regression(times, values).slope * 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="events/s published")
    parser.add_argument("--open", type=int, default=40, help="runs open at any time")
    parser.add_argument("--tasks", type=int, default=4, help="tasks a run (5 attempts each)")
    parser.add_argument("--cache-mb", type=int, default=16, help="the worker's EVALSTREAM_CACHE_MB")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        settings = isolated_settings(bootstrap)
        asyncio.run(ensure_topics(settings))
        worker = WorkerProcess(settings, Path(scratch) / "worker", env={"EVALSTREAM_CACHE_MB": str(args.cache_mb)})
        try:
            worker.wait_ready()
            log = Path(scratch) / "stream.jsonl"
            samples, got = asyncio.run(
                soak(
                    settings,
                    worker,
                    log,
                    seconds=args.minutes * 60,
                    rate=args.rate,
                    open_runs=args.open,
                    tasks=args.tasks,
                    every=args.every,
                )
            )
        except BaseException:
            print(worker.log()[-4000:], file=sys.stderr)
            raise
        finally:
            worker.stop()
        want = replayed(log)
        events = sum(1 for _ in log.open("rb"))
    mismatched = sorted(run for run in want.keys() | got.keys() if want.get(run) != got.get(run))
    print(
        f"{events:,} events in {samples[-1].at / 60:.1f} min at {args.rate:,.0f}/s, {len(want):,} runs "
        f"({args.tasks} tasks x 5 attempts, {args.open} open at a time), run cache bound {args.cache_mb} MiB"
    )
    print(
        f"summaries equal replay's, every revision: {'yes' if not mismatched else 'NO'} ({len(mismatched)} runs differ)"
    )
    print("quarters of the stream:          1st     2nd     3rd     4th")
    for label, field in (
        ("worker RSS, MB (median)", "rss"),
        ("run cache estimate, MB", "cache"),
        ("local copy (RocksDB), MB", "store"),
        ("RSS less those two, MB", "rest"),
        ("runs held", "runs"),
    ):
        print(f"  {label:<28}" + "".join(f"{value:8.1f}" for value in quarters(samples, field)))
    print(
        f"slope over the second half, MB an hour: RSS {slope_per_hour(samples):+.1f}, "
        f"the local copy {slope_per_hour(samples, 'store'):+.1f}, the rest {slope_per_hour(samples, 'rest'):+.1f}"
    )


if __name__ == "__main__":
    main()
