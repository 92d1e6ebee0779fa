"""Inspect AI early stopping on the live gate (worker.early_stopping): real Inspect evals
(`mockllm`, tests/fixtures/inspect/tasks/planted.py) against a baseline eval's summary. A planted
regression stops early and its log says why; without one the eval runs to the end; and the
manager's figures are those of `gate --live` on the same events, over a real broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import EvalLog, read_eval_log

from worker.local.processes import isolated_settings, topic_flags

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tests" / "fixtures" / "inspect" / "tasks" / "planted.py"
SAMPLES, EPOCHS = 40, 3


def evalstream(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *args], input=stdin, capture_output=True, timeout=300, check=False
    )


def inspect_eval(log_dir: Path, *args: str) -> EvalLog:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(TASK), str(log_dir), "--samples", str(SAMPLES), "--epochs", str(EPOCHS), *args],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return read_eval_log(done.stdout.strip().splitlines()[-1])


def summaries_of(log: EvalLog, path: Path) -> str:
    """The log's run folded as `evalstream import inspect | evalstream replay -` does; its run id."""
    imported = evalstream("import", "inspect", log.location)
    assert imported.returncode == 0, imported.stderr
    replayed = evalstream("replay", "-", stdin=imported.stdout)
    assert replayed.returncode == 0, replayed.stderr
    path.write_bytes(replayed.stdout)
    return str(json.loads(replayed.stdout.splitlines()[-1])["run_id"])


def test_a_planted_regression_stops_early_and_says_why_and_no_regression_runs_to_the_end(
    bootstrap: str, tmp_path: Path
) -> None:
    baseline = tmp_path / "baseline.jsonl"
    base_run = summaries_of(inspect_eval(tmp_path / "base", "--seed", "1"), baseline)
    against = ["--baseline", str(baseline), "--baseline-run", base_run]

    worse = inspect_eval(tmp_path / "worse", "--seed", "2", "--drop", "0.3", *against)
    assert worse.results is not None
    stopping = worse.results.early_stopping
    assert stopping is not None
    assert stopping.manager == "evalstream-live-gate"
    facts: dict[str, Any] = stopping.metadata
    assert (facts["decision"], facts["stopped"], facts["baseline"]) == ("block", True, base_run)
    run = facts["decided_after_samples"]
    assert run == len(worse.samples or []) < SAMPLES * EPOCHS  # stopped early: the rest never ran
    assert len(stopping.early_stops) == facts["samples_skipped"] == SAMPLES * EPOCHS - run
    reason = stopping.early_stops[0].reason or ""
    assert reason.startswith(f"evalstream live gate against {base_run}: BLOCK (threshold 0) after {run} samples: ")
    (key,) = facts["keys"]
    assert key["interval"][1] < 0.0

    same = inspect_eval(tmp_path / "same", "--seed", "3", *against)
    assert same.results is not None
    assert same.results.early_stopping is not None
    assert same.results.early_stopping.early_stops == []
    assert same.results.early_stopping.metadata["decision"] is None
    assert len(same.samples or []) == SAMPLES * EPOCHS

    # The same events through `gate --live`: the decision and its figures are the manager's.
    settings = isolated_settings(bootstrap)
    published = evalstream("import", "inspect", worse.location, "--publish", *topic_flags(settings))
    assert published.returncode == 0, published.stderr
    gate = evalstream(
        "gate", "--live", base_run, worse.eval.eval_id, "--from-file", str(baseline), "--json", "--timeout", "60",
        *topic_flags(settings),
    )  # fmt: skip
    assert gate.returncode == 3, gate.stderr
    decision = json.loads(gate.stdout.splitlines()[-1])
    (live,) = decision["keys"]
    assert (live["key"], live["pairs"], live["paired"]) == (key["key"], key["pairs"], key["paired"])
    assert live["interval"] == pytest.approx(key["interval"])
    assert decision["trials"] == run
