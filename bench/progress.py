"""The cost of a progress event, and the worker's CPU share spent on progress with ten
5,000-task runs open at once.

Run: `python -m bench.progress` (EVALSTREAM_BOOTSTRAP if set, else a broker of its own;
`--costs` for the first part alone, which needs none).
First, in process: the mean cost of one progress event of a run of 1 to 1,000 tasks (five
trials each), made after every event or after every few (as the worker's coalescing window
has them), and what the fixed part of a run's event is worth in tasks of a big run (the
worker's progress budget counts it so: `worker.runtime.progress.PROGRESS_RUN_TASKS`).
Then, through a broker:
A progress event costs O(tasks of its run), so ten big open runs could take the worker
over; the coalescing window grows with the tasks waiting for progress
(`worker.runtime.processor`). The same paced load (ten open runs of 5,000 tasks, trials
and scores interleaved) goes through two workers in turn: one with the default progress
interval, and a baseline whose progress is all but off (a one-hour interval). The CPU
seconds of each, over the same wall window, give progress's share: (default - baseline)
/ default; and the progress events the default worker published.
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
from aiokafka import AIOKafkaProducer

from events.codec import MAX_EVENT_BYTES, decode
from events.synthetic import interleave, synthetic_run
from projections.assembly.contributions import SummaryCache
from projections.assembly.progress import progress
from projections.fold.run import RunState, apply
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, isolated_settings
from worker.local.records import read_topic
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

RUNS, TASKS = 10, 5_000


def open_runs(tag: str) -> list[tuple[bytes, bytes]]:
    sources = [synthetic_run(f"{tag}-{i}", tasks=TASKS, attempts=2, seed=i) for i in range(RUNS)]
    events = [event for event in interleave(sources, seed=1) if event["type"] != "run.closed"]
    return [(event["run_id"].encode(), orjson.dumps(event)) for event in events]


COSTS = ((1, 1, 400), (2, 1, 400), (1_000, 1, 1), (2, 8, 400), (10, 8, 80), (100, 40, 8), (1_000, 400, 2))
"""(tasks of each run, events between two progress events, runs) measured."""


def progress_cost(tasks: int, every: int, runs: int) -> float:
    """Mean seconds of one progress event of runs of `tasks` tasks, one made after every
    `every` events applied."""
    spent, made = 0.0, 0
    for index in range(runs):
        made_run = synthetic_run(f"r{index}", tasks=tasks, attempts=5, seed=index)
        events = [decode(orjson.dumps(event)) for event in made_run]
        run, cache = RunState(f"r{index}"), SummaryCache()
        for count, event in enumerate(events, start=1):
            apply(run, event)
            if count % every == 0:
                began = time.perf_counter()
                progress(run, run.event_count, cache=cache)
                spent += time.perf_counter() - began
                made += 1
    return spent / made


def print_costs() -> None:
    print("one progress event, runs of five trials a task:")
    costs = {}
    for tasks, every, runs in COSTS:
        costs[tasks, every] = cost = progress_cost(tasks, every, runs)
        each = f"{cost * 1e6:8.1f} us  ({cost / tasks * 1e6:6.2f} us a task)"
        print(f"  {tasks:>5,} tasks, after every {every:>3} events: {each}")
    for small, big in (((2, 1), (1_000, 1)), ((2, 8), (1_000, 400))):
        per_task = costs[big] / big[0]
        print(
            f"  the fixed part: a run of 2 tasks after {small[1]} event(s) costs what"
            f" {(costs[small] - 2 * per_task) / per_task:.0f} more tasks of a 1,000-task run after {big[1]} do"
        )


async def paced(settings: Settings, messages: list[tuple[bytes, bytes]], rate: float) -> None:
    producer = AIOKafkaProducer(**settings.client_options(), linger_ms=5, max_request_size=MAX_EVENT_BYTES + 4096)
    await producer.start()
    try:
        start = time.perf_counter()
        for index, (key, value) in enumerate(messages):
            await asyncio.sleep(max(0.0, start + index / rate - time.perf_counter()))
            await producer.send(settings.events_topic, value=value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


def cpu_seconds(settings: Settings, scratch: Path, interval: str, rate: float, seconds: float) -> tuple[float, int]:
    """CPU seconds of a worker with this progress interval over the paced load, and the
    progress events it published."""
    os.environ["EVALSTREAM_PROGRESS_INTERVAL"] = interval
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, scratch)
    try:
        worker.wait_ready()
        messages = open_runs(settings.app_id)[: int(rate * seconds)]
        process = psutil.Process(worker.process.pid)
        before = sum(process.cpu_times()[:2])
        asyncio.run(paced(settings, messages, rate))
        time.sleep(3.0)  # the last progress windows and checkpoints
        used = sum(process.cpu_times()[:2]) - before
    finally:
        worker.stop()
        os.environ.pop("EVALSTREAM_PROGRESS_INTERVAL")
    published = len(read_topic(settings, settings.progress_topic, until=2**62, timeout=5))
    return used, published


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=5_000.0, help="events/s over all runs")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--costs", action="store_true", help="the in-process costs alone (no broker)")
    args = parser.parse_args()
    print_costs()
    if args.costs:
        return
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        live, events = cpu_seconds(isolated_settings(bootstrap), Path(scratch) / "live", "0.2", args.rate, args.seconds)
        base, _ = cpu_seconds(isolated_settings(bootstrap), Path(scratch) / "off", "3600", args.rate, args.seconds)
        wall = args.seconds + 3.0
        print(f"{RUNS} open runs of {TASKS:,} tasks, {args.rate:,.0f} events/s for {args.seconds:.0f} s:")
        print(f"  worker CPU, progress every 0.2 s (window grows): {live:6.1f} s ({live / wall:.0%} of a core)")
        print(f"  worker CPU, progress off (baseline):             {base:6.1f} s ({base / wall:.0%} of a core)")
        print(f"  progress's share of the worker: {(live - base) / live:.0%}, {events:,} progress events published")


if __name__ == "__main__":
    main()
