"""Peers benchmark: evalstream against the NeMo evaluator SDK and Harbor on one run.

Run: `python -m bench.peers [--tasks 5000 --attempts 8] [--sdk-python PATH]`. One seeded run
of `tasks` x `attempts` trials, one continuous `reward.score` per trial (1.0 with the task's
hidden pass rate, else 0.0; 5% of trials die), given to each in its own form:
- evalstream: the run's events as JSON lines (run.started, a trial.finished and a
  score.emitted per trial, run.closed), replayed from memory (`worker.commands.replay`:
  decoded, folded, the summary at close encoded), and the fold alone (decoded events
  applied, the summary built and encoded), both under the collector policy that
  `evalstream replay` sets (`worker.runtime.collector`);
- NeMo evaluator SDK 0.6: `AgentEvalSummary.from_scores` over the SDK's own task, trial and
  score objects (the recompute of a run's summary), in memory;
- Harbor 0.25: its job stats over its own `TrialResult` objects (`JobStats.from_trial_results`
  and `compute_pass_at_k_by_evals`), in memory.
The peers run under the SDK's interpreter (`bench/peers_sdk.py`; Python 3.12, see
tests/fixtures/nemo/README.md for its venv). Times are CPU seconds, best of `--rounds`, on
the same machine in the same run; printed with trials/s and evalstream's ratio to each.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import projections
from events.codec import decode
from projections.assembly.summary import summary_bytes
from projections.fold.run import RunState, apply
from projections.native_events import NATIVE
from worker.commands.replay import replay
from worker.runtime.collector import quiet_collector

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "tests" / "fixtures" / "harbor" / "job-mixed"
"""Harbor trial results (one graded, one dead) that every trial of the run is made from."""
SDK_PYTHON = Path(os.environ.get("EVALSTREAM_NEMO_PYTHON", "nemo-venv/bin/python"))
"""The NeMo SDK's interpreter (its venv: tests/fixtures/nemo/README.md); relative paths are
to the working directory."""

Trial = tuple[str, str, float | None, str | None]
"""(task id, trial id, reward or None, error type or None)."""


def make_run(tasks: int, attempts: int, seed: int) -> tuple[list[str], list[Trial]]:
    rng = random.Random(seed)
    task_ids = [f"task-{index:05d}" for index in range(tasks)]
    rate = {task: rng.random() for task in task_ids}
    trials: list[Trial] = []
    for task in task_ids:
        for attempt in range(attempts):
            trial = f"{task}__{attempt}"
            if rng.random() < 0.05:
                trials.append((task, trial, None, "SandboxTimeout"))
            else:
                trials.append((task, trial, 1.0 if rng.random() < rate[task] else 0.0, None))
    rng.shuffle(trials)
    return task_ids, trials


def events(task_ids: list[str], trials: list[Trial]) -> list[bytes]:
    def envelope(kind: str, number: int) -> dict[str, Any]:
        return {"schema_version": 1, "type": kind, "event_id": f"{kind}:{number}", "run_id": "peers"}

    spec = [{"metric_type": "reward", "outputs": [{"name": "score", "kind": "continuous"}]}]
    made = [{**envelope("run.started", 0), "tasks": [{"task_id": task, "metrics": spec} for task in task_ids]}]
    for number, (task, trial, reward, error) in enumerate(trials, start=1):
        ids = {"task_id": task, "trial_id": trial}
        score: dict[str, Any]
        if error:
            made.append({**envelope("trial.finished", number), **ids, "status": "failed", "error": {"type": error}})
            score = {"status": "failed", "failure": "trial", "outputs": []}
        else:
            made.append({**envelope("trial.finished", number), **ids, "status": "completed"})
            score = {"status": "completed", "outputs": [{"name": "score", "value": reward}]}
        made.append({**envelope("score.emitted", number), **ids, "metric_type": "reward", **score})
    made.append({**envelope("run.closed", 0), "reason": "completed"})
    return [orjson.dumps(event) for event in made]


def best(function: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.process_time()
        function()
        times.append(time.process_time() - began)
    return min(times)


def replayed(lines: list[bytes], native: bool = True) -> None:
    """`lines` as a file's lines are read: each with its newline (the peers get their input in
    memory too)."""
    out = io.BytesIO()
    stats = replay(lines, out, io.StringIO(), native=native)
    assert stats.summaries == 1, stats
    assert stats.skipped == 0, stats


def folded(decoded: list[Any]) -> None:
    run = RunState("peers")
    for event in decoded:
        apply(run, event)
    summary_bytes(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--attempts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sdk-python", type=Path, default=SDK_PYTHON, help="the NeMo SDK venv's python")
    args = parser.parse_args()
    task_ids, trials = make_run(args.tasks, args.attempts, args.seed)
    lines = events(task_ids, trials)
    print(
        f"python {sys.version.split()[0]}, seed {args.seed}, the Python fold {projections.BUILD}, "
        f"the native fold {'built' if NATIVE is not None else 'not built'}: "
        f"{len(trials):,} trials of {len(task_ids):,} tasks"
    )
    quiet_collector()  # as `evalstream replay` does: full collections of the growing run find nothing
    read = [line + b"\n" for line in lines]
    ours = best(lambda: replayed(read), args.rounds)
    python = best(lambda: replayed(read, native=False), args.rounds)
    decoded = [decode(line) for line in lines]
    fold = best(lambda: folded(decoded), args.rounds)
    figures = {
        "evalstream replay (decode, fold, summary)": ours,
        "  the same through the Python fold": python,
        "  the Python fold and summary alone": fold,
    }
    if not args.sdk_python.exists():
        print(
            f"no SDK interpreter at {args.sdk_python}: make its venv (tests/fixtures/nemo/README.md), "
            "or pass --sdk-python"
        )
    else:
        with tempfile.TemporaryDirectory() as scratch:
            shared = Path(scratch) / "run.json"
            shared.write_text(json.dumps({"tasks": task_ids, "trials": trials}))
            command = [str(args.sdk_python), str(ROOT / "bench" / "peers_sdk.py"), str(shared), str(TEMPLATES)]
            done = subprocess.run([*command, str(args.rounds)], capture_output=True, text=True, check=True, cwd=scratch)
            peers = json.loads(done.stdout)
        figures["NeMo SDK 0.6 AgentEvalSummary.from_scores"] = peers["nemo"]
        figures["Harbor 0.25 job stats"] = peers["harbor"]
    for name, seconds in figures.items():
        print(
            f"{name:<45} {seconds:7.3f} s CPU  {len(trials) / seconds:>10,.0f} trials/s  "
            f"ours/this = {ours / seconds:.2f}"
        )
    print("  (ours/this < 1: evalstream replay is ahead)")


if __name__ == "__main__":
    main()
