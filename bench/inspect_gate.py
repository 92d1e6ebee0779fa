"""The Inspect manager (`worker.early_stopping.GateStopping`) on real Inspect evals: the share of
samples not run when the candidate regressed, and when it did not (false stops).

Run: `python -m bench.inspect_gate --seeds 80` (`make bench-gate` runs it after `bench.gate`; ~10
minutes: 80 seeds are what it takes for an interval on false stops to lie below 5%).
Each seed is three evals of tests/fixtures/inspect/tasks/planted.py with `mockllm` (40 samples
x 3 epochs, one sample at a time, as Inspect schedules them: every sample's first epoch, then
the second, ...): a baseline, folded into its summary as `evalstream import inspect | replay`
would; a candidate with a planted drop of `--drop` on every sample's pass probability; and a
candidate without one, both with the manager against the baseline (threshold 0, stopping on
BLOCK). Every eval has its own seed. Prints the shares with 95% intervals (Wilson).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from events.codec import encode_payload
from events.importers.inspect_log import read
from events.importers.source import ImportOptions
from events.outputs import RunSummary
from projections.assembly.summary import summary
from projections.fold.run import RunState, apply
from worker.early_stopping import GateStopping

TASK = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "inspect" / "tasks" / "planted.py"


def planted() -> ModuleType:
    spec = importlib.util.spec_from_file_location("planted", TASK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary_of_log(location: str) -> RunSummary:
    events = list(read(Path(location), ImportOptions()))
    run = RunState(events[0].run_id)
    for event in events:
        apply(run, event)
    return RunSummary.model_validate_json(encode_payload(summary(run)))


def not_run(log: Any, total: int) -> float:
    stopping = log.results.early_stopping
    return len(stopping.early_stops) / total if stopping is not None else 0.0


def wilson(hits: int, n: int) -> str:
    if n == 0:
        return "-"
    z = 1.96
    centre = (hits + z * z / 2) / (n + z * z)
    half = z * math.sqrt(hits * (n - hits) / n + z * z / 4) / (n + z * z)
    return f"{100 * hits / n:.1f}% [{100 * max(0.0, centre - half):.1f}, {100 * min(1.0, centre + half):.1f}]"


def mean_interval(values: list[float]) -> str:
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return f"{100 * mean:.1f}% (+-{100 * half:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=80)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--drop", type=float, default=0.3)
    args = parser.parse_args()
    task = planted()
    total = args.samples * args.epochs
    shape = {"samples": args.samples, "epochs": args.epochs}
    worse, same = [], []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.seeds):
            base = task.run(f"{folder}/b{seed}", seed=3 * seed, **shape)
            baseline = summary_of_log(base.location)
            worse.append(
                task.run(
                    f"{folder}/w{seed}", seed=3 * seed + 1, drop=args.drop, stopping=GateStopping(baseline), **shape
                )
            )
            same.append(task.run(f"{folder}/s{seed}", seed=3 * seed + 2, stopping=GateStopping(baseline), **shape))
    print(
        f"{args.seeds} seeds, {args.samples} samples x {args.epochs} epochs, mockllm, one sample at a time "
        f"({time.perf_counter() - start:.0f} s)"
    )
    stopped = [log for log in worse if log.results.early_stopping.metadata["stopped"]]
    print(f"planted drop of {args.drop:g}: stopped early in {wilson(len(stopped), len(worse))} of the evals;")
    print(f"  samples not run: {mean_interval([not_run(log, total) for log in worse])} on average")
    false = [log for log in same if log.results.early_stopping.metadata["stopped"]]
    print(f"no regression: stopped (a false stop) in {wilson(len(false), len(same))} of the evals;")
    print(f"  samples not run: {mean_interval([not_run(log, total) for log in same])} on average")
    print("(the gate's own false-alarm rate is at most 5%; [a, b]: a 95% Wilson interval, +-: a 95% normal margin)")


if __name__ == "__main__":
    main()
