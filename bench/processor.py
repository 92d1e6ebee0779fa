"""The worker's own work on a backlog of many small runs, in process, without Kafka.

Run: `python -m bench.processor` (by default `bench.e2e`'s backlog of small runs, 120k
events over 2,385 runs of two tasks), with the runs held in the Python fold, then in the
native one (`--fold` picks one); `--against PYTHON` also runs it first with another
checkout's interpreter, and that checkout's code.
`worker.runtime.processor.Processor` over a dict store: batches of `--batch` records handed
to `handle` with a clock advancing as if they came at `--rate` events/s, `progress_due`
after each, and a checkpoint's snapshot whenever one is due, its records put in the store.
Closed runs are retired as the worker retires them (the engine's order: the archive record,
then the marker and tombstones). Prints the CPU per event of the three (the step and the
processor's own part in `handle`, progress published from `progress_due`, the checkpoints:
their snapshots, retirements and the cache's eviction), and how many progress events, task
and header records and retired runs were made per event. Through a broker the worker does
this and the Kafka clients' work besides (`bench.e2e`); here there is nothing else, so it
is the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from bisect import bisect_left, insort
from collections.abc import Iterator

import orjson

from events.synthetic import interleave, synthetic_run
from worker.runtime.collector import quiet_collector
from worker.runtime.keys import HEADER_PREFIX
from worker.runtime.processor import Processor, Record


def backlog(events: int, runs: int) -> list[bytes]:
    """About `events` events over `runs` runs of five trials a task, interleaved (`bench.e2e`'s
    log; with many runs, each is open from the start of the log to its end)."""
    tasks = max(1, events // (runs * 5 * 5))
    sources = [synthetic_run(f"e2e-{i}", tasks=tasks, attempts=5, seed=1) for i in range(runs)]
    return [orjson.dumps(event) for event in interleave(sources, seed=1)]


class DictStore:
    """One partition's store, as the worker's local copy holds it: keys in order, so that a
    prefix is scanned in O(what it holds)."""

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.keys: list[bytes] = []

    def get(self, partition: int, key: bytes) -> bytes | None:
        return self.values.get(key)

    def scan(self, partition: int, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        keys = self.keys
        at = bisect_left(keys, prefix)
        found = []
        while at < len(keys) and keys[at].startswith(prefix):
            found.append((keys[at], self.values[keys[at]]))
            at += 1
        return iter(found)

    def write(self, key: bytes, value: bytes | None) -> None:
        """A record, or a tombstone (None)."""
        if value is None:
            if self.values.pop(key, None) is not None:
                del self.keys[bisect_left(self.keys, key)]
            return
        if key not in self.values:
            insort(self.keys, key)
        self.values[key] = value


def measure(events: int, runs: int, batch: int, rate: float, native: bool) -> str:
    lines = backlog(events, runs)
    records = [Record(offset, orjson.loads(line)["run_id"].encode(), line) for offset, line in enumerate(lines)]
    quiet_collector()
    store = DictStore()
    processor = Processor(store, native=native)
    processor.assign([0])
    spent = {"handle": 0.0, "progress": 0.0, "checkpoint": 0.0}
    made = {"progress": 0, "tasks": 0, "headers": 0, "retired": 0}
    now = 0.0
    for start in range(0, len(records), batch):
        now += batch / rate
        began = time.process_time()
        made["progress"] += sum(
            item.stream == "progress" for item in processor.handle(0, records[start : start + batch], now)
        )
        handled = time.process_time()
        made["progress"] += len(processor.progress_due(now))
        published = time.process_time()
        if processor.checkpoint_due(0):
            snapshot = processor.snapshot(0)
            assert snapshot is not None
            for key, value in snapshot.records:
                store.write(key, value)
                made["headers" if key.startswith(HEADER_PREFIX) else "tasks"] += 1
            retired = {}
            for retirement in snapshot.retirements:  # as the engine does once its archive record is answered
                made["retired"] += 1
                retired[retirement.run_id] = retirement.ref(0, made["retired"])
                for key, record in retirement.records(retired[retirement.run_id]):
                    store.write(key, record)
            processor.written(snapshot, retired)
        spent["handle"] += handled - began
        spent["progress"] += published - handled
        spent["checkpoint"] += time.process_time() - published
    count = len(records)
    total = sum(spent.values())
    parts = ", ".join(f"{name} {seconds / count * 1e6:.1f}" for name, seconds in spent.items())
    counts = ", ".join(f"{number / count:.2f} {name}" for name, number in made.items())
    return f"{total / count * 1e6:6.1f} us CPU an event ({parts}); an event: {counts}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=120_000)
    parser.add_argument("--runs", type=int, default=2385)
    parser.add_argument("--batch", type=int, default=500, help="records a batch")
    parser.add_argument("--rate", type=float, default=10_000.0, help="events/s the clock advances as")
    parser.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter, run first")
    parser.add_argument(
        "--fold", choices=["both", "native", "python"], default="both", help="the fold the runs are held in"
    )
    parser.add_argument("--figure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.figure:
        print(measure(args.events, args.runs, args.batch, args.rate, args.fold == "native"))
        return
    print(f"{args.events:,} events over {args.runs:,} runs, batches of {args.batch}, at {args.rate:,.0f} events/s:")
    given = [
        "--events",
        str(args.events),
        "--runs",
        str(args.runs),
        "--batch",
        str(args.batch),
        "--rate",
        str(args.rate),
    ]
    folds = ["python", "native"] if args.fold == "both" else [args.fold]
    for python in [*([args.against] if args.against else []), sys.executable]:
        for fold in folds:
            # This file, by its path, with the code of that interpreter's checkout (PYTHONSAFEPATH:
            # not this directory's), which may not have it.
            environment = {**os.environ, "PYTHONSAFEPATH": "1"}
            command = [python, __file__, "--figure", "--fold", fold, *given]
            result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
            print(f"  {python}, {fold} fold: {result.stdout.strip() or result.stderr.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
