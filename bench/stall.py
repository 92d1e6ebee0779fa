"""How long a worker killed with -9 holds back every reader of committed records.

Run: `python -m bench.stall` (EVALSTREAM_BOOTSTRAP if set, else a local broker of its own).
A worker folds a run published at a steady rate; it is frozen (SIGSTOP) at random moments
until one falls inside a checkpoint's transaction that wrote progress (the progress
partition's last stable offset below its high watermark), and killed there with SIGKILL; no
other worker claims its partition. A probe (a transactional producer of its own) then
commits a record to the progress topic every 50 ms,
and a committed reader times how long after the kill the first probe shows: the dead owner's
open transaction holds the partition's last stable offset until the broker aborts it, at the
transaction timeout. Each `--timeouts` value (EVALSTREAM_TRANSACTION_TIMEOUT) is measured
`--kills` times; printed per timeout: the stalls' median and maximum.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from events.synthetic import synthetic_run
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings
from worker.topic_reader import topic_reader

PROBE_EVERY = 0.05


async def _publish_steadily(settings: Settings, rate: float, stop: asyncio.Event) -> None:
    producer = AIOKafkaProducer(**settings.client_options(), linger_ms=0)
    await producer.start()
    try:
        events = synthetic_run("steady", tasks=500, attempts=10, seed=5)
        began = time.perf_counter()
        for index, event in enumerate(events):
            if stop.is_set():
                return
            await asyncio.sleep(max(0.0, began + index / rate - time.perf_counter()))
            await producer.send(settings.events_topic, orjson.dumps(event), b"steady")
    finally:
        await producer.stop()


async def _stall_after_kill(settings: Settings, worker: WorkerProcess) -> float:
    """Seconds from the kill until a probe committed after it is readable."""
    reader = await topic_reader(settings, settings.progress_topic, at_end=True, wait=30)
    assert reader is not None
    probe = AIOKafkaProducer(transactional_id=f"{settings.app_id}-probe", **settings.client_options())
    await probe.start()
    stop = asyncio.Event()
    publisher = asyncio.create_task(_publish_steadily(settings, 500.0, stop))
    try:
        await asyncio.sleep(3.0)  # the worker checkpoints steadily
        await _killed_in_a_transaction(settings, worker)
        killed = time.perf_counter()
        stop.set()
        await publisher

        async def probing() -> None:
            while True:
                async with probe.transaction():
                    await probe.send(settings.progress_topic, b"probe", b"probe", partition=0)
                await asyncio.sleep(PROBE_EVERY)

        prober = asyncio.create_task(probing())
        try:
            while True:
                batches = await reader.getmany(timeout_ms=100)
                if any(record.key == b"probe" for batch in batches.values() for record in batch):
                    return time.perf_counter() - killed
        finally:
            prober.cancel()
    finally:
        await probe.stop()
        await reader.stop()


async def _killed_in_a_transaction(settings: Settings, worker: WorkerProcess) -> None:
    """SIGKILL the worker while a transaction of it holds progress records not yet committed."""
    place = TopicPartition(settings.progress_topic, 0)
    committed = AIOKafkaConsumer(isolation_level="read_committed", **settings.client_options())
    everything = AIOKafkaConsumer(**settings.client_options())
    await committed.start()
    await everything.start()
    try:
        while True:
            os.kill(worker.process.pid, signal.SIGSTOP)
            await asyncio.sleep(0.05)
            stable = (await committed.end_offsets([place]))[place]
            if stable < (await everything.end_offsets([place]))[place]:
                os.kill(worker.process.pid, signal.SIGKILL)
                return
            os.kill(worker.process.pid, signal.SIGCONT)
            await asyncio.sleep(random.uniform(0.01, 0.1))
    finally:
        await committed.stop()
        await everything.stop()


def measure(bootstrap: str, scratch: Path, timeout: float, kills: int) -> list[float]:
    stalls = []
    for kill in range(kills):
        settings = isolated_settings(bootstrap)
        asyncio.run(ensure_topics(settings))
        worker = WorkerProcess(
            settings, scratch / f"{timeout:g}-{kill}", env={"EVALSTREAM_TRANSACTION_TIMEOUT": f"{timeout:g}"}
        )
        try:
            worker.wait_serving()
            stalls.append(asyncio.run(_stall_after_kill(settings, worker)))
        finally:
            worker.stop()
    return stalls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeouts", default="10,60", help="transaction timeouts to measure, seconds")
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        servers = cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker")
        with servers as bootstrap:
            print("| transaction timeout | committed readers stalled after a kill -9: median | max |")
            print("|---|---|---|")
            for timeout in (float(value) for value in args.timeouts.split(",")):
                stalls = measure(bootstrap, Path(scratch), timeout, args.kills)
                print(f"| {timeout:g} s | {statistics.median(stalls):.1f} s | {max(stalls):.1f} s |", flush=True)


if __name__ == "__main__":
    main()
