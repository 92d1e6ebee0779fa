"""The cost of SEMANTICS.md section 8 (`statistics`), against the same code without it.

Run: `python -m bench.statistics_cost` (pure: no broker). In one process, on open runs of
`events.synthetic` (two pass@k-eligible keys, reward.score and complete.passed, 5 attempts
a task), each figure is timed twice, in CPU seconds, with section 8 and without it (alternating,
the best of several rounds), and printed with the ratio:
1. one progress emission, `progress(run)`; without section 8 its statistics are replaced by
   what progress computed before it, pass@k's count, nan_count and mean (`center` of the
   same per-task figures), with no spread, interval or pass^k;
2. one summary, `summary(run)`; without section 8, no `statistics` object;
3. per event, replay end to end (`Replayer.feed`: decode, apply, progress every 100 events of
   a run, the summary at close) over closed runs. `apply` itself is unchanged: section 8 is
   computed only when a progress or summary is built, from the (n, c) tallies kept per task.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from unittest import mock

import orjson
from pydantic import TypeAdapter

from events.models import InputEvent
from events.synthetic import interleave, synthetic_run
from projections.aggregates import center
from projections.attempts import key_tallies
from projections.passk import estimates
from projections.progress import progress
from projections.replayer import Replayer
from projections.run import RunState, apply
from projections.statistics import Statistics, by_k, statistics
from projections.summary import summary

EVENT: TypeAdapter[InputEvent] = TypeAdapter(InputEvent)
ATTEMPTS = 5


def without_section_8(run: RunState) -> Statistics:
    """What progress computed before section 8: pass@k's count, nan_count and mean only."""
    figures: Statistics = {}
    for name, measured, unmeasured in key_tallies(run):
        if measured:
            entries = []
            for k, values in enumerate(by_k(measured, estimates), start=1):
                middle = center(values, len(values) + unmeasured)
                entries.append({"k": k, "count": middle.count, "nan_count": middle.nan_count, "mean": middle.mean})
            figures[name] = {"tasks": len(measured), "pass_at_k": entries, "pass_hat_k": []}
    return figures


@contextmanager
def section_8(on: bool) -> Iterator[None]:
    """Progress and summaries with section 8 (`on`) or without it."""
    if on:
        yield
        return
    with (
        mock.patch("projections.progress.statistics", without_section_8),
        mock.patch("projections.summary.statistics", return_value={}),
    ):
        yield


def timed(function: Callable[[], Any]) -> float:
    """One call's CPU seconds (this process's: a busy shared machine does not count in them),
    with the cyclic collector held off (a summary of a big run makes enough objects to start
    its passes over the whole heap)."""
    gc.collect()
    gc.disable()
    try:
        began = time.process_time()
        function()
        return time.process_time() - began
    finally:
        gc.enable()


def with_and_without(function: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """The fastest of `rounds` calls with section 8 and without it, the two alternating so
    that the machine's load weighs on both alike."""
    for on in (True, False):
        with section_8(on):
            function()  # the per-(n, c) caches, as a running worker has them
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for on in (True, False):
            with section_8(on):
                times[on].append(timed(function))
    return min(times[True]), min(times[False])


def open_run(tasks: int, seed: int) -> RunState:
    run = RunState("bench")
    for event in synthetic_run("bench", tasks=tasks, attempts=ATTEMPTS, seed=seed):
        if event["type"] != "run.closed":
            apply(run, EVENT.validate_python(event))
    return run


def replay_lines(runs: int, tasks: int, seed: int) -> list[bytes]:
    sources = [synthetic_run(f"run-{i}", tasks=tasks, attempts=ATTEMPTS, seed=seed) for i in range(runs)]
    return [orjson.dumps(event) for event in interleave(sources, seed)]


def replay_cost(lines: list[bytes]) -> None:
    replayer = Replayer(progress_every=100)
    for number, line in enumerate(lines, 1):
        replayer.feed(number, line)


def row(what: str, on: float, off: float, unit: str, scale: float) -> str:
    return f"  {what:<38} {on * scale:9.1f} {unit} with, {off * scale:9.1f} {unit} without  ({on / off:.2f}x)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    for tasks in (500, 5_000):
        run = open_run(tasks, args.seed)
        print(f"open run of {tasks:,} tasks x {ATTEMPTS} attempts, {run.event_count:,} events applied:")
        builds: list[tuple[str, Callable[[], Any]]] = [
            ("progress emission", partial(progress, run, 1)),
            ("summary", partial(summary, run)),
        ]
        for label, build in builds:
            print(row(label, *with_and_without(build, args.rounds), "ms", 1e3))
        alone = min(timed(partial(statistics, run)) for _ in range(args.rounds))
        said = "section 8 alone, statistics(run)"
        print(f"  {said:<38} {alone * 1e3:9.1f} ms, {alone / tasks * 1e6:.2f} us per task")
    lines = replay_lines(runs=8, tasks=500, seed=args.seed)
    on, off = with_and_without(partial(replay_cost, lines), 3)
    print(f"replay of {len(lines):,} events (8 runs of 500 tasks), progress every 100 events of a run:")
    print(row("per event", on / len(lines), off / len(lines), "us", 1e6))


if __name__ == "__main__":
    main()
