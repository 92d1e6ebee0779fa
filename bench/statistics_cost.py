"""The cost of SEMANTICS.md section 8 (`statistics`), against what progress showed before it.

Run: `python -m bench.statistics_cost` (in process: no broker). On open runs of
`events.synthetic` (two pass@k-eligible keys, reward.score and complete.passed, 5 attempts
a task), in CPU seconds, the best of several rounds:
1. one progress emission and one summary, `progress(run)` and `summary(run)`, with the run's
   figures kept from the call before (as a worker has them between two events);
2. section 8 computed afresh (the run's kept figures dropped first: every key's pass@k and
   pass^k columns, spreads and intervals), against what progress computed before it,
   pass@k's count, nan_count and mean (`center` of the same per-task figures) with no
   spread, interval or pass^k, and the ratio;
3. per event, replay end to end (`Replayer.feed`: decode, apply, progress every 100 events of
   a run, the summary at close) over closed runs. `apply` itself does no section 8 work: it
   is computed only when a progress or summary is built, from the (n, c) tallies kept per task.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson
from pydantic import TypeAdapter

from events.models import InputEvent
from events.synthetic import interleave, synthetic_run
from projections.assembly.attempts import key_tallies
from projections.assembly.contributions import SummaryCache
from projections.assembly.key_figures import statistics
from projections.assembly.progress import progress
from projections.assembly.summary import summary
from projections.figures.aggregates import center
from projections.figures.passk import by_k, estimates
from projections.figures.statistics import Statistics
from projections.fold.run import RunState, apply
from projections.replayer import Replayer

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


def afresh(run: RunState) -> Statistics:
    """Section 8 of `run` with none of its figures kept: every key's columns computed again."""
    return statistics(run)


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


def best(function: Callable[[], Any], rounds: int) -> float:
    """The fastest of `rounds` calls, after one that fills the per-(n, c) caches, as a
    running worker has them."""
    function()
    return min(timed(function) for _ in range(rounds))


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    for tasks in (500, 5_000):
        run, cache = open_run(tasks, args.seed), SummaryCache()
        print(f"open run of {tasks:,} tasks x {ATTEMPTS} attempts, {run.event_count:,} events applied:")
        emission, summarized = partial(progress, run, 1, cache=cache), partial(summary, run, cache)
        for label, build in (("progress emission", emission), ("summary", summarized)):
            print(f"  {label:<38} {best(build, args.rounds) * 1e3:9.1f} ms")
        with_8 = best(partial(afresh, run), args.rounds)
        before = best(partial(without_section_8, run), args.rounds)
        said = "section 8 afresh, against pass@k alone"
        print(
            f"  {said:<38} {with_8 * 1e3:9.1f} ms, {before * 1e3:9.1f} ms  ({with_8 / before:.2f}x; "
            f"{with_8 / tasks * 1e6:.2f} us per task)"
        )
    lines = replay_lines(runs=8, tasks=500, seed=args.seed)
    per_event = best(partial(replay_cost, lines), 3) / len(lines)
    print(f"replay of {len(lines):,} events (8 runs of 500 tasks), progress every 100 events of a run:")
    print(f"  {'per event':<38} {per_event * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
