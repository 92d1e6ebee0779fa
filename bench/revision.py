"""Revision benchmark: the cost of one `run.summary` revision after one late attempt.

Run: `python -m bench.revision [--tasks 5000 --attempts 8]`. A closed synthetic run of
`tasks` tasks x `attempts` trials (`events.synthetic`) gets its summary at close; then,
round after round, one late attempt (a new trial's completed `reward` score, for a task
taken in turn across the run) is applied and the summary revision it makes due is built
and encoded, as `projections.step` does. Printed: the median and best CPU time of a
revision over the rounds, and, as the baseline measured in the same run, the cost of
folding the whole run's events (what a revision costing O(run) is to compare with).
Counted in instructions, a revision is what `--rounds 20` adds to `--rounds 0`, divided by
20 (`valgrind --tool=callgrind python -m bench.revision --rounds N`: the same run, fold and
summary at close either way).
The revision is `summary_bytes` with the run's summary cache, what the worker and replay
publish. (Reading the bytes back into dicts, as `summary` does, costs 50 to 120 ms of
allocation on a 7.4 MB summary, varying from call to call: it is no part of a revision.)
Then the same through the native fold, where it is built, each revision through the run's
native summary cache (`evalstream replay` of a file goes through it).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter

import projections
from events.models import InputEvent
from events.synthetic import synthetic_run
from projections.assembly.contributions import SummaryCache
from projections.assembly.summary import summary_bytes
from projections.fold.run import RunState, apply
from projections.native_events import NATIVE, native_apply
from projections.packed.trial_ids import count
from worker.runtime.collector import quiet_collector

EVENT: TypeAdapter[InputEvent] = TypeAdapter(InputEvent)


def late_attempt(run_id: str, task: int, number: int) -> InputEvent:
    return EVENT.validate_python(
        {
            "schema_version": 1,
            "type": "score.emitted",
            "event_id": f"late-{number}",
            "run_id": run_id,
            "task_id": f"task-{task:05d}",
            "trial_id": f"late-trial-{number}",
            "metric_type": "reward",
            "status": "completed",
            "outputs": [{"name": "score", "value": 1.0 if number % 3 else 0.5}],
        }
    )


Fold = tuple[Callable[[InputEvent], object], Callable[[], bytes], Callable[[], int]]
"""A fresh run of a fold: apply an event to it, its summary encoded, the trials it holds."""


def python_fold() -> Fold:
    """The Python fold's run, its summary through the run's summary cache."""
    run, cache = RunState("r"), SummaryCache()
    return (
        lambda event: apply(run, event),
        lambda: summary_bytes(run, cache),
        lambda: sum(count(task.trials) for task in run.tasks.values()),
    )


def native_fold() -> Fold:
    """The native fold's run (`projections.native_events`), its summaries through its own cache."""
    assert NATIVE is not None, "the native fold is not built"
    run = NATIVE.NativeRun("r")
    # A task's third field (`NativeRun.tasks`): its trial ids.
    return (
        lambda event: native_apply(run, event, None),
        run.summary_bytes,
        lambda: sum(len(task[2]) for task in run.tasks()),
    )


def measure(tasks: int, attempts: int, rounds: int, seed: int, fold: Fold) -> dict[str, Any]:
    """The fold's figures; "digests": of its summary at close, then of each revision."""
    apply_event, encode, held = fold
    # Validated from Python objects: a run.started of thousands of tasks is over the wire limit.
    events = [EVENT.validate_python(event) for event in synthetic_run("r", tasks=tasks, attempts=attempts, seed=seed)]
    began = time.process_time()
    for event in events:
        apply_event(event)
    fold_cost = time.process_time() - began
    del events
    gc.collect()
    began = time.process_time()
    encoded = encode()
    at_close = time.process_time() - began
    digests = [hashlib.blake2b(encoded).digest()]
    costs = []
    for number in range(rounds):
        event = late_attempt("r", number * 7919 % tasks, number)
        began = time.process_time()
        apply_event(event)
        encoded = encode()
        costs.append(time.process_time() - began)
        digests.append(hashlib.blake2b(encoded).digest())
    return {
        "fold": fold_cost,
        "at_close": at_close,
        "median": statistics.median(costs) if costs else None,
        "best": min(costs, default=None),
        "bytes": len(encoded),
        "trials": held(),
        "digests": digests,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--attempts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    # As the worker and `evalstream replay` run: with CPython's default policy, the full
    # collections a summary's new objects set off walk the whole run and are most of the
    # figure's variance.
    quiet_collector()
    build = getattr(projections, "BUILD", "pure")  # a tree older than the compiled fold has only its source
    print(f"python {sys.version.split()[0]}, seed {args.seed}, the fold {build}")
    figures = measure(args.tasks, args.attempts, args.rounds, args.seed, python_fold())
    print(
        f"run: {args.tasks:,} tasks x {args.attempts} trials ({figures['trials']:,} trials), "
        f"summary {figures['bytes'] / 1e6:.1f} MB encoded"
    )
    print(f"fold of the whole run (baseline): {figures['fold'] * 1e3:9.1f} ms CPU")
    print(f"summary at close:                 {figures['at_close'] * 1e3:9.1f} ms CPU")
    median, best = figures["median"], figures["best"]
    if median is None:  # --rounds 0: the baseline of an instruction count (see the docstring)
        return
    print(
        f"one revision after a late attempt: {median * 1e3:8.1f} ms CPU median, {best * 1e3:.1f} ms best of "
        f"{args.rounds}; revision/fold = {median / figures['fold']:.3f}"
    )
    if NATIVE is None:
        print("the native fold is not built")
        return
    native = measure(args.tasks, args.attempts, args.rounds, args.seed, native_fold())
    assert native["trials"] == figures["trials"], "the native fold holds other trials than the Python fold"
    assert native["digests"] == figures["digests"], "the native fold's summaries are not the Python fold's"
    print("the native fold (each revision through its summary cache, its bytes checked equal):")
    print(f"  fold of the whole run (models):   {native['fold'] * 1e3:9.1f} ms CPU")
    print(f"  summary at close:                 {native['at_close'] * 1e3:9.1f} ms CPU")
    print(
        f"  one revision after a late attempt: {native['median'] * 1e3:8.1f} ms CPU median, "
        f"{native['best'] * 1e3:.1f} ms best; native/Python = {native['median'] / median:.2f}"
    )


if __name__ == "__main__":
    main()
