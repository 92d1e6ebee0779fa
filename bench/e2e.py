"""End to end through a real broker and one worker.

Run: `make bench-e2e` (or `python -m bench.e2e`). Uses EVALSTREAM_BOOTSTRAP if set, else
starts a local broker (free ports, temporary state). Prints, from one run:
1. the raw aiokafka consume rate of a synthetic log on this broker (the ceiling: the best of
   three reads), and the rate of a faust agent that does nothing with it
   (`bench.faust_ceiling`: faust's own cost);
2. sustained events/s through one worker: publishing the same log until the last run's
   summary is out, and the ratio to the ceiling; and the worker's CPU per event meanwhile
   (steadier than the rate on a shared machine, where the broker and the publisher take
   their share of the cores);
3. the same log as a backlog, read as the ceiling reads it: published whole while a warm
   worker is suspended (SIGSTOP, its session timeout raised above the pause), then timed
   from its resume to the last run's summary, with the machine's cores to the worker and
   the broker alone; its rate, ratio to the ceiling and CPU per event;
4. latency from publish to the first progress event that reflects it, p50 and p99, for
   a run published at a steady 1,000 and 10,000 events/s (`--rates ""`: none).

The log is `--runs` synthetic runs (4 by default: big runs); `--events 120000 --runs 2385`
is a backlog of many small runs (2 tasks of 5 attempts, 52 events each), where the per-run
costs (a summary, a progress event and a checkpoint record per run) weigh the most.
`--against PYTHON` also times the worker of another checkout (its venv's interpreter) on
the same log and broker, right before this one's: a before/after in one run; `--pairs N`
takes N such pairs, alternating, and compares their medians (a shared machine's load moves
single figures by a third).

The target (at least 0.1 of the ceiling, for the worker on a backlog of many small runs, and
2x the no-op agent) is checked on the backlog, measured under the ceiling's own conditions;
the sustained figure, where the publisher takes its share of the two cores, is shown beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import orjson
import psutil
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.processor import backlog
from events.codec import MAX_EVENT_BYTES
from events.synthetic import synthetic_run
from worker.commands.clients import publish
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings
from worker.topic_reader import topic_reader


async def _consumer(settings: Settings, topic: str) -> AIOKafkaConsumer:
    consumer = await topic_reader(settings, topic, wait=60)
    if consumer is None:
        raise RuntimeError(f"no topic {topic!r} after 60 s")
    return consumer


CEILING_PASSES = 3
"""Reads of the events topic the ceiling is the best of: one read takes a second or less, and
on a shared machine it varied 2x between runs, which a ratio to it would carry."""


async def ceiling(settings: Settings, lines: list[bytes]) -> float:
    """Raw consume rate: records/s reading the events topic with aiokafka, no processing; the
    best of `CEILING_PASSES` reads from the start."""
    await publish(settings, lines)
    best = 0.0
    for _ in range(CEILING_PASSES):
        consumer = await _consumer(settings, settings.events_topic)
        seen, began = 0, time.perf_counter()
        try:
            while seen < len(lines):
                batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
                seen += sum(len(batch) for batch in batches.values())
        finally:
            await consumer.stop()
        best = max(best, len(lines) / (time.perf_counter() - began))
    return best


def faust_ceiling(settings: Settings) -> float:
    """The events topic's consume rate through a faust agent that does nothing."""
    with tempfile.TemporaryDirectory() as data_dir:
        command = [sys.executable, "-m", "bench.faust_ceiling", settings.bootstrap, settings.events_topic, data_dir]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            for line in process.stdout or ():
                if line.startswith("events/s "):
                    return float(line.split()[1])
            raise RuntimeError("bench.faust_ceiling stopped before it measured")
        finally:
            process.kill()
            process.wait()


async def sustained(settings: Settings, lines: list[bytes], runs: set[bytes]) -> float:
    """Events/s from the first publish to the last run's summary."""
    consumer = await _consumer(settings, settings.summaries_topic)
    began = time.perf_counter()
    sender = asyncio.create_task(publish(settings, lines))
    try:
        await _summarised(consumer, runs)
        await sender
    finally:
        await consumer.stop()
    return len(lines) / (time.perf_counter() - began)


async def _summarised(consumer: AIOKafkaConsumer, runs: set[bytes]) -> None:
    """Return once the summaries topic has a summary of each of `runs` (keys: run ids)."""
    waiting = set(runs)
    while waiting:
        for batch in (await consumer.getmany(timeout_ms=200)).values():
            waiting -= {record.key for record in batch}


async def paced(settings: Settings, rate: float, seconds: float) -> tuple[str, list[float], list[tuple[float, int]]]:
    """A run published at `rate` events/s: its id, each event's publish time, and each of its
    progress events' (read at, events counted)."""
    run_id = f"paced-{rate:.0f}"
    events = list(synthetic_run(run_id, tasks=int(rate * seconds / 30) + 1, attempts=6, seed=3))[:-1]
    sent_at: list[float] = []
    reads: list[tuple[float, int]] = []
    consumer = await _consumer(settings, settings.progress_topic)
    producer = AIOKafkaProducer(**settings.client_options(), linger_ms=0, max_request_size=MAX_EVENT_BYTES + 4096)
    await producer.start()

    async def send() -> None:
        start = time.perf_counter()
        for index, event in enumerate(events):
            await asyncio.sleep(max(0.0, start + index / rate - time.perf_counter()))
            sent_at.append(time.perf_counter())
            await producer.send(settings.events_topic, value=orjson.dumps(event), key=run_id.encode())

    sender = asyncio.create_task(send())
    try:
        while not reads or reads[-1][1] < len(events):
            for batch in (await consumer.getmany(timeout_ms=50)).values():
                now = time.perf_counter()
                reads += [(now, orjson.loads(r.value)["event_count"]) for r in batch if r.key == run_id.encode()]
        await sender
    finally:
        await producer.stop()
        await consumer.stop()
    return run_id, sent_at, reads


async def latency(settings: Settings, rate: float, seconds: float) -> list[float]:
    """Seconds from each event's publish to the progress event that first counts it."""
    _, sent_at, reads = await paced(settings, rate, seconds)
    delays: list[float] = []
    for read_at, counted in reads:
        delays.extend(read_at - sent_at[index] for index in range(len(delays), min(counted, len(sent_at))))
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rates", default="1000,10000", help="paced publish rates for the latency figures")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=4, help="runs the log is split into")
    parser.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter, timed first")
    parser.add_argument("--pairs", type=int, default=1, help="before/after pairs with --against (medians compared)")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        runs = args.runs
        lines = backlog(args.events, runs)
        raw = isolated_settings(bootstrap)
        asyncio.run(ensure_topics(raw))
        top = asyncio.run(ceiling(raw, lines))
        print(f"raw aiokafka consume:      {top:>10,.0f} events/s  (the ceiling; {len(lines):,} events, {runs:,} runs)")
        noop = faust_ceiling(raw)
        print(f"faust agent doing nothing: {noop:>10,.0f} events/s  faust/ceiling = {noop / top:.2f}")
        if args.against:
            compare(bootstrap, Path(scratch), lines, runs, other=args.against, pairs=args.pairs, top=top)
        piled = backlog_rate(bootstrap, Path(scratch) / "backlog", lines, runs, sys.executable)
        settings = isolated_settings(bootstrap)
        worker = start_worker(settings, Path(scratch) / "worker", sys.executable)
        try:
            now = sustained_after_warming(settings, worker, lines, runs)
            rate = now.rate
            print(
                f"through broker and worker: {now}  worker/ceiling = {rate / top:.3f}, worker/faust = {rate / noop:.2f}"
            )
            print(f"the same log as a backlog:  {piled}  worker/ceiling = {piled.rate / top:.3f}")
            print(
                "  (target, as a backlog: >= 0.1 of the ceiling, >= 2x the no-op agent: "
                f"{_verdict(piled.rate, top, noop)})"
            )
            for pace in (float(r) for r in args.rates.split(",") if r):
                target = 250 if pace <= 1000 else 500  # the targets: 1,000 and 10,000 events/s
                delays = sorted(asyncio.run(latency(settings, pace, args.seconds)))
                p50, p99 = statistics.median(delays), delays[int(len(delays) * 0.99)]
                print(
                    f"publish -> progress at {pace:,.0f} events/s: p50 {p50 * 1000:.0f} ms, "
                    f"p99 {p99 * 1000:.0f} ms over {len(delays):,} events  (target p99 <= {target} ms)"
                )
        finally:
            worker.stop()


def compare(
    bootstrap: str, scratch: Path, lines: list[bytes], runs: int, *, other: str, pairs: int, top: float
) -> None:
    """`pairs` alternating measures of the other checkout's worker and this one's, sustained
    and as a backlog; each figure, then the ratios of their medians."""
    figures: dict[tuple[str, str], list[Sustained]] = {}
    for pair in range(pairs):
        for name, python in (("the other", other), ("this checkout", sys.executable)):
            sustained_ = worker_rate(bootstrap, scratch / f"{name}-{pair}", lines, runs, python)
            piled = backlog_rate(bootstrap, scratch / f"{name}-backlog-{pair}", lines, runs, python)
            figures.setdefault((name, "sustained"), []).append(sustained_)
            figures.setdefault((name, "backlog"), []).append(piled)
            print(f"{name} ({python}): {sustained_}; as a backlog: {piled}  worker/ceiling = {piled.rate / top:.3f}")
    for how in ("sustained", "backlog"):
        this, other_ = figures["this checkout", how], figures["the other", how]
        rate = statistics.median(f.rate for f in this) / statistics.median(f.rate for f in other_)
        cpu = statistics.median(f.cpu for f in this) / statistics.median(f.cpu for f in other_)
        print(f"  this checkout / the other, {how}, medians of {pairs}: rate {rate:.2f}, CPU per event {cpu:.2f}")


BACKLOG_SESSION_TIMEOUT = 120.0
"""Seconds the group waits for a silent member in the backlog figure: the worker is
suspended while the log is published (a few seconds), and must keep its partitions."""


def backlog_rate(bootstrap: str, data_dir: Path, lines: list[bytes], runs: int, python: str) -> Sustained:
    """Events/s of the worker `python` runs on `lines` already in its topic, and its CPU per
    event: the worker warmed up, suspended, the log published whole, then timed from its
    resume until the last run's summary is read."""
    settings = isolated_settings(bootstrap, session_timeout=BACKLOG_SESSION_TIMEOUT)
    worker = start_worker(settings, data_dir, python)
    try:
        warm(settings)
        process = psutil.Process(worker.process.pid)
        process.suspend()
        try:
            asyncio.run(publish(settings, lines))
        finally:
            process.resume()
        return asyncio.run(_drained(settings, process, len(lines), {f"e2e-{i}".encode() for i in range(runs)}))
    finally:
        worker.stop()


async def _drained(settings: Settings, process: psutil.Process, count: int, runs: set[bytes]) -> Sustained:
    """`count` events' rate and CPU per event, from now (the worker just resumed; the summaries
    reader joins the clock at once, and its start is counted) to the last of `runs`' summaries."""
    before = sum(process.cpu_times()[:2])
    began = time.perf_counter()
    consumer = await _consumer(settings, settings.summaries_topic)
    try:
        await _summarised(consumer, runs)
    finally:
        await consumer.stop()
    elapsed = time.perf_counter() - began
    return Sustained(count / elapsed, (sum(process.cpu_times()[:2]) - before) / count)


def start_worker(settings: Settings, data_dir: Path, python: str) -> WorkerProcess:
    asyncio.run(ensure_topics(settings))
    return WorkerProcess(settings, data_dir, python=python)


def warm(settings: Settings) -> None:
    """One tiny run through the worker, until its summary is out."""
    asyncio.run(sustained(settings, [orjson.dumps(e) for e in synthetic_run("warm", tasks=1, attempts=1)], {b"warm"}))


def sustained_after_warming(settings: Settings, worker: WorkerProcess, lines: list[bytes], runs: int) -> Sustained:
    """The worker's events/s on `lines`, after one tiny run has warmed it up, and the CPU
    it used for them."""
    warm(settings)
    process = psutil.Process(worker.process.pid)
    before = sum(process.cpu_times()[:2])
    rate = asyncio.run(sustained(settings, lines, {f"e2e-{i}".encode() for i in range(runs)}))
    return Sustained(rate, (sum(process.cpu_times()[:2]) - before) / len(lines))


class Sustained(NamedTuple):
    rate: float
    """Events/s, from the first publish to the last run's summary."""
    cpu: float
    """The worker's CPU seconds (user and system) per event over that time: on a shared
    machine, steadier than the rate, which the broker and the publisher share the cores for."""

    def __str__(self) -> str:
        return f"{self.rate:>10,.0f} events/s  worker CPU {self.cpu * 1e6:5.1f} us/event"


def _verdict(rate: float, top: float, noop: float) -> str:
    return "met" if rate >= 0.1 * top and rate >= 2 * noop else "MISSED"


def worker_rate(bootstrap: str, data_dir: Path, lines: list[bytes], runs: int, python: str) -> Sustained:
    """Events/s of the worker `python` runs, on its own topics, and its CPU per event."""
    settings = isolated_settings(bootstrap)
    worker = start_worker(settings, data_dir, python)
    try:
        return sustained_after_warming(settings, worker, lines, runs)
    finally:
        worker.stop()


if __name__ == "__main__":
    main()
