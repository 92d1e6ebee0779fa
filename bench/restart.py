"""Restart cost as closed runs pile up: from a worker's start to the first new summary.

Run: `python -m bench.restart` (EVALSTREAM_BOOTSTRAP if set, else a broker of its own);
`--runs 1000 10000 100000`, `--tasks`/`--attempts` for the runs' size (default 4 x 5: 20
attempts, 42 events a run, so that 10,000 runs fold in about a minute here; the changelog
holds one record per task, so restart cost from the changelog follows runs x tasks).

For each count, on topics of their own, the runs are folded and then the worker is
restarted four ways, each timed from the new process's start until probe runs (published
right after the start, one per partition at least) have their summaries on the topic:
- `same dir, clean`: SIGTERM, a new process on the same data dir under the same
  `EVALSTREAM_INSTANCE_ID` (the local copy is kept: only the changelog's tail is read);
- `same dir, kill -9`: the same after a kill -9;
- `fresh dir, clean` and `fresh dir, kill -9`: a new process on an empty data dir and with
  no instance id, as every restart was before the local copy was kept (the copy was wiped
  at start) and as a failover to another machine still is: the whole changelog is read,
  and after a kill -9 the group waits for the dead member's session to time out. Before
  these, the static worker is replaced by a dynamic one (untimed), so that each is timed
  after a worker like today's.
With `--workers 2` (2 partitions, two workers), one of them is restarted on its data dir
and the probes (on both partitions) wait for all their summaries; then it is killed for good
(`failover`: timed from the kill; the others take its partition over once its session is
over, 10 s, and restore it from the changelog); the fresh-dir figures are for one worker.
It also prints the changelog's bytes per closed run (keys and values, read back from the topic).

The changelog topic is made compacting as fast as the broker allows (segment.ms 500 ms,
tombstones dropped at once: the worker's own configs clean every 10 minutes), and the
figures are taken once the cleaner has removed every closed run's task records (the wait is
untimed and printed). `--against PYTHON` measures another checkout's worker (its venv's
interpreter) the same way, on topics of its own, right before this one's, and prints the
ratios: a before/after in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from bench.state import until_keys
from events.synthetic import synthetic_run
from worker.commands.clients import publish
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, free_port, isolated_settings
from worker.local.records import create_compacting_fast, read_whole
from worker.runtime.topics import ensure_topics
from worker.settings import Settings
from worker.topic_reader import topic_reader


def run_lines(count: int, tasks: int, attempts: int) -> Iterator[bytes]:
    for index in range(count):
        for event in synthetic_run(f"closed-{index:06d}", tasks=tasks, attempts=attempts, seed=index):
            yield orjson.dumps(event)


async def summaries_of(settings: Settings, lines: list[bytes], keys: set[bytes], timeout: float) -> None:
    consumer = await topic_reader(settings, settings.summaries_topic, at_end=True, wait=60)
    assert consumer is not None
    try:
        await publish(settings, lines)
        await until_keys(consumer, set(keys), timeout)
    finally:
        await consumer.stop()


def probe_lines(tag: str, partitions: int) -> tuple[list[bytes], set[bytes]]:
    """Small closed runs, enough that every partition gets one (keys hash at random)."""
    ids = [f"probe-{tag}-{n}" for n in range(4 * partitions)]
    lines = [orjson.dumps(e) for run_id in ids for e in synthetic_run(run_id, tasks=1, attempts=1)]
    return lines, {run_id.encode() for run_id in ids}


def changelog(settings: Settings) -> str:
    return f"{settings.app_id}-state-changelog"


def topic_bytes(settings: Settings, topic: str) -> int:
    """Keys and values of every record of `topic` (a restore from its start reads them)."""
    return sum(len(r.key or b"") + len(r.value or b"") for r in read_whole(settings, topic, timeout=600))


def until_retired(settings: Settings, timeout: float = 600) -> float:
    """Wait until the changelog holds no task record of a closed run (the cleaner has run);
    a probe run's events meanwhile make the worker write, which rolls the active segment."""
    began = time.perf_counter()
    for round_ in range(10**6):
        records = read_whole(settings, changelog(settings), timeout=600)
        left = sum(1 for r in records if (r.key or b"").startswith(b't["closed-'))
        if not left:
            return time.perf_counter() - began
        if time.perf_counter() - began > timeout:
            raise TimeoutError(f"{left} task records of closed runs still in the changelog after {timeout:.0f} s")
        lines, keys = probe_lines(f"nudge-{round_}", settings.partitions)
        asyncio.run(summaries_of(settings, lines, keys, 120))
        time.sleep(2)
    return time.perf_counter() - began


class Workers:
    def __init__(self, settings: Settings, scratch: Path, count: int, *, python: str) -> None:
        self.settings, self.scratch, self.python = settings, scratch, python
        self.processes = [self._start(n, scratch / f"worker-{n}", named=True) for n in range(count)]

    def _start(self, n: int, data_dir: Path, *, named: bool) -> WorkerProcess:
        env = {"EVALSTREAM_INSTANCE_ID": f"bench-{n}"} if named else {"EVALSTREAM_INSTANCE_ID": ""}
        settings = self.settings.with_overrides(web_port=free_port())
        return WorkerProcess(settings, data_dir, env=env, python=self.python)

    def restart(self, how: str, fresh: bool, tag: str, *, settle: bool = False) -> float:
        """Stop worker 0 (`how`: clean or kill -9), start it again, and time until the probes'
        summaries. `settle`: first wait (untimed) for the group to drop the old member's
        session, as when a static member is replaced by a dynamic one."""
        old = self.processes[0]
        if how == "clean":
            old.stop()
        else:
            old.process.kill()
            old.process.wait()
        if settle:
            time.sleep(self.settings.session_timeout + 2)
        data_dir = self.scratch / f"fresh-{tag}" if fresh else self.scratch / "worker-0"
        began = time.perf_counter()
        self.processes[0] = self._start(0, data_dir, named=not fresh)
        lines, keys = probe_lines(tag, self.settings.partitions)
        asyncio.run(summaries_of(self.settings, lines, keys, 600))
        return time.perf_counter() - began

    def failover(self, tag: str) -> float:
        """Kill worker 0 for good and time until the probes' summaries: the group gives its
        partitions to the others once its session is over, and they restore them from the
        changelog (no local copy of them)."""
        old = self.processes.pop(0)
        old.process.kill()
        old.process.wait()
        began = time.perf_counter()
        lines, keys = probe_lines(tag, self.settings.partitions)
        asyncio.run(summaries_of(self.settings, lines, keys, 600))
        return time.perf_counter() - began

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


def measure(
    bootstrap: str, scratch: Path, runs: int, workers: int, *, tasks: int, attempts: int, python: str
) -> dict[str, float]:
    """The figures (name -> value) it prints, of the worker `python` runs."""
    figures: dict[str, float] = {}
    settings = isolated_settings(bootstrap, partitions=workers)
    asyncio.run(ensure_topics(settings))
    asyncio.run(create_compacting_fast(settings, changelog(settings)))
    group = Workers(settings, scratch, workers, python=python)
    try:
        for process in group.processes:
            process.wait_ready()
        began = time.perf_counter()
        keys = {f"closed-{index:06d}".encode() for index in range(runs)}
        asyncio.run(summaries_of(settings, list(run_lines(runs, tasks, attempts)), keys, 3600))
        folded = time.perf_counter() - began
        cleaned = until_retired(settings)
        per_run = topic_bytes(settings, changelog(settings)) / runs
        archived = topic_bytes(settings, settings.archive_topic) / runs
        figures["changelog bytes per closed run"] = per_run
        print(
            f"{runs:>7,} closed runs of {tasks * attempts} attempts, {workers} worker(s), {python}: "
            f"folded in {folded:.0f} s (+{cleaned:.0f} s until cleaned), "
            f"changelog {per_run:,.0f} bytes per closed run, archive {archived:,.0f}",
            flush=True,
        )
        for how in ("clean", "kill -9"):
            seconds = figures[f"same dir, {how}"] = group.restart(how, False, f"{runs}-{how[:4]}-same")
            print(f"  restart, same dir,  same name, {how:<7}: first new summary after {seconds:5.1f} s", flush=True)
        if workers > 1:
            seconds = figures["failover, kill -9"] = group.failover(f"{runs}-failover")
            print(f"  failover, worker 0 killed for good:   first new summary after {seconds:5.1f} s", flush=True)
            return figures
        # Today's restarts need a dynamic member before them (one that leaves the group on a
        # clean stop): replace the static one, untimed.
        group.restart("clean", True, f"{runs}-dynamic", settle=True)
        for how in ("clean", "kill -9"):
            seconds = figures[f"fresh dir, {how}"] = group.restart(how, True, f"{runs}-{how[:4]}-fresh")
            print(f"  restart, fresh dir, no name,   {how:<7}: first new summary after {seconds:5.1f} s", flush=True)
    finally:
        group.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[1_500, 15_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter, measured first")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (worker logs, broker state)")
    args = parser.parse_args()
    pythons = {"before": args.against, "this": sys.executable} if args.against else {"this": sys.executable}
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        with cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), root / "broker") as bootstrap:
            for workers in args.workers:
                for runs in args.runs:
                    measured = {
                        name: measure(
                            bootstrap,
                            root / f"{workers}-{runs}-{name}",
                            runs,
                            workers,
                            tasks=args.tasks,
                            attempts=args.attempts,
                            python=python,
                        )
                        for name, python in pythons.items()
                    }
                    if "before" in measured:
                        ratios = ", ".join(
                            f"{name} {value / measured['before'][name]:.2f}" for name, value in measured["this"].items()
                        )
                        print(f"  this / before, {runs:,} runs, {workers} worker(s): {ratios}", flush=True)


if __name__ == "__main__":
    main()
