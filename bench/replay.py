"""Replay benchmark: throughput, memory per attempt, and the cost of one more attempt.

Run: `make bench` (or `python -m bench.replay --events 1000000`). Prints figures and the
ratios against baselines measured in the same run:
1. end-to-end replay (file -> summaries, decoding included) events/s, against the raw
   `orjson.loads` rate of the same file (the ceiling) and the standard library's `json.loads`
   (the yardstick of a Python tool that only parses), through the native fold where it is
   built and through the Python fold (its bytes checked equal), on a log of a few big runs and on
   one of many small runs whose last trial lands after the close (a summary at the close
   and one revision per late event, as a busy topic of short evals has them); beside them
   `decode` alone, and what a replay at 0.2 of the ceiling would leave the fold once decoded;
2. resident memory per stored attempt of a fully applied log, on both logs, the Python fold's
   state and, where it is built, the native fold's (native/Python); and that of a whole
   replay of the small runs (state and summary caches), with the closed runs' caches bounded
   (the default budget) against unbounded;
3. apply cost per attempt for a run already holding ~1k, ~100k and ~1M events;
4. the naive alternative (rebuild the summary from all stored scores after every event)
   against incremental apply, on a log small enough to finish;
5. the cost of a step's savepoint (what a failed step rolls back to) against the whole step.
The log is `events.synthetic` (seeded, documented there).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import orjson
import psutil
from pydantic import TypeAdapter

import projections
from events.builds import PURE_SETTING
from events.codec import decode
from events.models import InputEvent
from events.synthetic import interleave, synthetic_run
from projections.assembly.summary import summary
from projections.closed_caches import CLOSED_CACHES_BYTES
from projections.fold.run import RunState, apply
from projections.fold.savepoint import Savepoint
from projections.held import Held
from projections.native_events import NATIVE
from projections.native_replay import NativeReplayer
from projections.replayer import Replayer
from projections.step import step
from worker.commands.replay import replay
from worker.runtime.collector import quiet_collector

ATTEMPTS = 8
T = TypeVar("T")
EVENT: TypeAdapter[InputEvent] = TypeAdapter(InputEvent)


def write_log(path: Path, events: int, runs: int, seed: int) -> int:
    """A log of about `events` events over `runs` interleaved runs; returns the line count."""
    per_run_tasks = max(1, events // (runs * ATTEMPTS * 5))
    sources = [synthetic_run(f"run-{i}", tasks=per_run_tasks, attempts=ATTEMPTS, seed=seed) for i in range(runs)]
    count = 0
    with path.open("wb") as out:
        for event in interleave(sources, seed):
            out.write(orjson.dumps(event) + b"\n")
            count += 1
    return count


SMALL_TASKS = 10
SMALL_ATTEMPTS = 5


def write_small_runs_log(path: Path, events: int, seed: int) -> int:
    """About `events` events of runs of `SMALL_TASKS` x `SMALL_ATTEMPTS` trials, interleaved,
    each run's last trial (its trial.finished and scores) after its run.closed."""
    per_run = SMALL_TASKS * SMALL_ATTEMPTS * 5 + 2

    def late(index: int) -> Iterator[dict[str, object]]:
        made = list(synthetic_run(f"small-{index}", tasks=SMALL_TASKS, attempts=SMALL_ATTEMPTS, seed=seed))
        close = made.pop()
        cut = next(at for at in range(len(made) - 1, 0, -1) if made[at]["type"] == "trial.finished")
        return iter([*made[:cut], close, *made[cut:]])

    count = 0
    with path.open("wb") as out:
        for event in interleave([late(index) for index in range(max(1, events // per_run))], seed):
            out.write(orjson.dumps(event) + b"\n")
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class Rates:
    """Lines a second over one file, measured in one process."""

    replay: float
    """`evalstream replay` end to end (with the number of processes asked for): through the
    native fold where it is built."""
    python: float
    """The same, one process, through the Python fold (compiled by mypyc where built)."""
    ceiling: float
    """`orjson.loads` alone: parsing, no checks and no models."""
    stdlib: float
    """The standard library's `json.loads` alone."""
    decoding: float
    """`events.codec.decode` alone: the events the fold is given, before any fold."""

    def budget(self, share: float) -> str:
        """What replay at `share` of the ceiling leaves the fold, in us an event, once decoded."""
        whole, decoding = 1e6 / (share * self.ceiling), 1e6 / self.decoding
        return (
            f"at {share} of the ceiling replay has {whole:.1f} us an event; decoding alone takes "
            f"{decoding:.1f} ({decoding / whole:.0%}), the fold, summaries and writing {whole - decoding:.1f}"
        )


def throughput(path: Path, lines: int, jobs: int, pure: bool = False) -> Rates:
    """Replay's rate with `jobs` processes, and orjson's and the decoder's alone, over the same
    file, in a process of its own with the collector policy `evalstream replay` sets."""
    return _fresh(_throughput, path, lines, jobs, pure=pure)


def _throughput(path: Path, lines: int, jobs: int) -> Rates:
    quiet_collector()
    with path.open("rb") as stream:
        raw = stream.readlines()
    began = time.perf_counter()
    for line in raw:
        orjson.loads(line)
    ceiling = lines / (time.perf_counter() - began)
    began = time.perf_counter()
    for line in raw:
        json.loads(line)
    stdlib = lines / (time.perf_counter() - began)
    began = time.perf_counter()
    for line in raw:
        decode(line)
    decoding = lines / (time.perf_counter() - began)
    del raw
    gc.collect()
    sink = io.BytesIO()
    began = time.perf_counter()
    with path.open("rb") as stream:
        stats = replay(stream, sink, sys.stderr, jobs=jobs)
    rate = lines / (time.perf_counter() - began)
    assert stats.skipped == 0
    assert stats.summaries > 0
    folded = sink.getvalue()
    del sink
    gc.collect()
    sink = io.BytesIO()
    began = time.perf_counter()
    with path.open("rb") as stream:
        replay(stream, sink, sys.stderr, native=False)
    python = lines / (time.perf_counter() - began)
    assert jobs > 1 or sink.getvalue() == folded, "the native fold wrote other bytes than the Python fold"
    return Rates(rate, python, ceiling, stdlib, decoding)


def report(rates: Rates) -> None:
    decoding, replaying = rates.decoding / rates.ceiling, rates.replay / rates.ceiling
    print(f"orjson.loads only:          {rates.ceiling:>10,.0f} lines/s  (the ceiling)")
    print(
        f"json.loads only:            {rates.stdlib:>10,.0f} lines/s"
        f"  json.loads/ceiling = {rates.stdlib / rates.ceiling:.2f}"
    )
    print(f"decode only:                {rates.decoding:>10,.0f} events/s  decode/ceiling = {decoding:.2f}")
    print(
        f"replay end to end, 1 job:   {rates.replay:>10,.0f} events/s  replay/ceiling = {replaying:.2f}"
        f"  replay/json.loads = {rates.replay / rates.stdlib:.2f}"
    )
    if NATIVE is not None:
        print(
            f"  the Python fold:          {rates.python:>10,.0f} events/s  replay/ceiling = "
            f"{rates.python / rates.ceiling:.2f}  replay/json.loads = {rates.python / rates.stdlib:.2f}"
            f"  native/Python = {rates.replay / rates.python:.2f}"
        )
    print(f"  ({rates.budget(0.2)})")


def against_source(path: Path, lines: int, rate: float) -> None:
    """The same replay with `EVALSTREAM_PURE=1` (the fold's Python source, and decoding without the
    compiled recogniser), when the rate above is the compiled one's."""
    if projections.BUILD == "compiled":
        source = throughput(path, lines, 1, pure=True).replay
        print(f"  the Python sources alone: {source:>10,.0f} events/s  compiled/source = {rate / source:.2f}")


def decoded(path: Path) -> Iterator[InputEvent]:
    with path.open("rb") as stream:
        for line in stream:
            yield decode(line)


def _fresh(function: Callable[..., T], *args: object, pure: bool = False) -> T:
    """Run `function` in a new process, so that its RSS growth is its own (a process that
    freed memory earlier would reuse it without growing); with `pure`, on the fold's Python
    source even where `make install` compiled it (projections/__init__.py)."""
    environment = dict(os.environ)
    if pure:
        os.environ[PURE_SETTING] = "1"  # the spawned process starts with it
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return pool.submit(function, *args).result()
    finally:
        os.environ.clear()
        os.environ.update(environment)


def rss_growth_applying(path: Path) -> tuple[int, int]:
    """(RSS growth, attempts stored) applying the whole log, runs kept."""
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    runs: dict[str, RunState] = {}
    for event in decoded(path):
        run = runs.get(event.run_id)
        if run is None:
            run = runs[event.run_id] = RunState(event.run_id)
        apply(run, event)
    gc.collect()
    return process.memory_info().rss - before, sum(attempts_in(run) for run in runs.values())


def rss_growth_replaying(path: Path, closed_caches_bytes: int) -> tuple[int, int]:
    """(RSS growth, attempts stored) of a replay of the whole log, summaries built as
    `evalstream replay` builds them, in a process of its own (`_fresh`). Memory only grows
    in a replay (a dropped cache's blocks are taken again by later ones), so the growth at
    the end is its peak. Not `ru_maxrss`: a spawned process's counts what it was forked from."""
    quiet_collector()
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    replayer = Replayer(closed_caches_bytes=closed_caches_bytes)
    with path.open("rb") as stream:
        for number, line in enumerate(stream, 1):
            replayer.feed(number, line)
    return process.memory_info().rss - before, sum(attempts_in(held.run) for held in replayer.runs.values())


def rss_growth_native(path: Path) -> tuple[int, int]:
    """(RSS growth, attempts stored) applying the whole log to the native fold's runs, kept
    (`NativeReplayer.apply`: no summary), as `rss_growth_applying` measures the Python fold's."""
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    replayer = NativeReplayer()
    with path.open("rb") as stream:
        for line in stream:
            replayer.apply(line.rstrip(b"\r\n"))
    gc.collect()
    grown = process.memory_info().rss - before
    # A task's fifth field (`NativeRun.tasks`): (key, n, c) of each of its keys.
    return grown, sum(n for run in replayer.runs.values() for task in run.tasks() for _, n, _ in task[4])


def attempts_in(run: RunState) -> int:
    """The attempts the run holds, over all its tasks' keys."""
    return sum(n for task in run.tasks.values() for _, n, _ in task.tallies())


def rss_growth_run(tasks: int, attempts: int, seed: int) -> tuple[int, int]:
    """(RSS growth, attempts stored) for one synthetic run of `tasks` x `attempts` trials."""
    process = psutil.Process()
    gc.collect()
    before = process.memory_info().rss
    run = RunState("m")
    for event in synthetic_run("m", tasks=tasks, attempts=attempts, seed=seed):  # one at a time, as replay reads
        apply(run, EVENT.validate_python(event))
    gc.collect()
    return process.memory_info().rss - before, attempts_in(run)


def marginal_memory(seed: int, tasks: int = 2000) -> float:
    """RSS bytes per attempt added to existing tasks: runs of the same tasks with 4 and 20
    attempts each, each in a fresh process; the difference over the difference in attempts."""
    (small, small_n), (large, large_n) = (_fresh(rss_growth_run, tasks, attempts, seed) for attempts in (4, 20))
    return (large - small) / (large_n - small_n)


def apply_cost(size: int, seed: int, probes: int = 2000) -> float:
    """Microseconds per applied attempt-bearing score on a run that holds `size` events."""
    tasks = max(1, size // (ATTEMPTS * 5))
    run = RunState("big")
    # Validated from Python objects: the 1M-event run's run.started (25,000 tasks) is over the
    # wire limit, and only the fold's cost is measured here.
    events = [EVENT.validate_python(e) for e in synthetic_run("big", tasks=tasks, attempts=ATTEMPTS, seed=seed)]
    for event in events[:-1]:  # leave it open
        apply(run, event)
    del events  # a million live event objects would make the collector's passes part of the figure
    extra = [
        EVENT.validate_python(
            {
                "schema_version": 1,
                "type": "score.emitted",
                "event_id": f"probe-{i}",
                "run_id": "big",
                "task_id": f"task-{i % tasks:05d}",
                "trial_id": f"probe-trial-{i}",
                "metric_type": "reward",
                "status": "completed",
                "outputs": [{"name": "score", "value": 1.0 if i % 3 else 0.5}],
            }
        )
        for i in range(probes)
    ]
    gc.collect()
    began = time.perf_counter()
    for event in extra:
        apply(run, event)
    return (time.perf_counter() - began) / probes * 1e6


def naive_ratio(seed: int, events: int = 3000) -> tuple[float, float]:
    """(incremental us/event, naive us/event): apply alone vs apply + full summary rebuild."""
    log = [
        decode(orjson.dumps(e))
        for e in synthetic_run("small", tasks=events // (ATTEMPTS * 5), attempts=ATTEMPTS, seed=seed)
    ]
    run = RunState("small")
    began = time.perf_counter()
    for event in log:
        apply(run, event)
    incremental = (time.perf_counter() - began) / len(log) * 1e6
    run = RunState("small")
    began = time.perf_counter()
    for event in log:
        apply(run, event)
        summary(run)
    naive = (time.perf_counter() - began) / len(log) * 1e6
    return incremental, naive


def savepoint_share(seed: int, tasks: int = 500) -> tuple[float, float]:
    """(us per savepoint, us per step) over one synthetic run's events, CPU time, best of
    several rounds: the savepoints taken on the applied run, the steps from the wire."""
    wires = [orjson.dumps(event) for event in synthetic_run("s", tasks=tasks, attempts=ATTEMPTS, seed=seed)]
    events = [decode(wire) for wire in wires]

    def steps() -> None:
        held = Held(RunState("s"))
        for wire in wires:
            step(wire, lambda _: held)

    run = RunState("s")
    for event in events:
        apply(run, event)

    def savepoints() -> None:
        for event in events:
            Savepoint(run, event)

    rounds = 7
    stepping = min(_cpu(steps) for _ in range(rounds)) / len(wires) * 1e6
    saving = min(_cpu(savepoints) for _ in range(rounds)) / len(events) * 1e6
    return saving, stepping


def _cpu(function: Callable[[], None]) -> float:
    began = time.process_time()
    function()
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--small-events", type=int, default=400_000, help="events in the log of many small runs")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    native = "built" if NATIVE is not None else "not built"
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, seed {args.seed}, "
        f"the Python fold {projections.BUILD}, the native fold {native}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "log.jsonl"
        lines = write_log(path, args.events, args.runs, args.seed)
        size = path.stat().st_size
        print(f"log: {lines:,} events over {args.runs} runs, {size / 1e6:.0f} MB")
        jobs = os.cpu_count() or 1
        single = throughput(path, lines, 1)
        rate = throughput(path, lines, jobs).replay
        report(single)
        print(f"replay end to end, {jobs} jobs:  {rate:>10,.0f} events/s  replay/ceiling = {rate / single.ceiling:.2f}")
        print("  (target >= 150,000 events/s)")
        against_source(path, lines, single.replay)
        small = Path(scratch) / "small.jsonl"
        small_lines = write_small_runs_log(small, args.small_events, args.seed)
        many = throughput(small, small_lines, 1)
        print(
            f"log of many small runs: {small_lines:,} events, runs of {SMALL_TASKS} tasks x {SMALL_ATTEMPTS} trials, "
            "the last trial after the close"
        )
        report(many)
        against_source(small, small_lines, many.replay)
        for name, log, target in (("", path, " (target <= 200)"), (", the small runs", small, "")):
            grown, attempts = _fresh(rss_growth_applying, log)
            print(f"memory{name}: {grown / attempts:.0f} B RSS per stored attempt over {attempts:,} attempts{target}")
            if NATIVE is not None:
                native_grown, _ = _fresh(rss_growth_native, log)
                print(
                    f"  native state per stored attempt: {native_grown / attempts:.0f} B RSS "
                    f"(native/Python = {native_grown / grown:.2f})"
                )
        bounded, _ = _fresh(rss_growth_replaying, small, CLOSED_CACHES_BYTES)
        unbounded, _ = _fresh(rss_growth_replaying, small, 2**62)
        print(
            f"replay, the small runs: {bounded / attempts:.0f} B RSS per stored attempt with the closed runs' "
            f"summary caches within {CLOSED_CACHES_BYTES >> 20} MiB, {unbounded / attempts:.0f} unbounded "
            f"(bounded/unbounded = {bounded / unbounded:.2f})"
        )
    print(
        f"memory: {marginal_memory(args.seed):.0f} B RSS per attempt added to existing tasks (per-task cost excluded)"
    )
    gc.collect()
    costs = {size: apply_cost(size, args.seed) for size in (1_000, 100_000, 1_000_000)}
    for size, cost in costs.items():
        print(f"apply one attempt, run of {size:>9,} events: {cost:6.2f} us")
    print(f"apply cost 1M / 1k = {costs[1_000_000] / costs[1_000]:.2f}  (target <= 2)")
    incremental, naive = naive_ratio(args.seed)
    ratio = naive / incremental
    print(
        f"3k-event run: incremental {incremental:.1f} us/event, naive rebuild {naive:.0f} us/event, ratio {ratio:,.0f}x"
    )
    saving, stepping = savepoint_share(args.seed)
    print(f"step: {stepping:.1f} us/event, of which its savepoint {saving:.2f} us ({saving / stepping:.1%})")


if __name__ == "__main__":
    main()
