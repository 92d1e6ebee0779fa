"""`evalstream import nemo DIR` of a NeMo Evaluator 0.3 (`nel eval run`) output directory:
real runs (tests/fixtures/nemo/nel-*) against nel's own figures in their eval-*.json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from events.importers.nemo import read
from events.importers.source import ImportOptions, SourceError
from events.models import RunClosed, RunStarted, ScoreFailed, ScoreMeasured, TrialFinished
from tests.events.importers.harbor_stats import replayed, summaries
from worker.commands.importing import import_lines

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nemo"
RUNS = [FIXTURES / "nel-run", FIXTURES / "nel-resumed"]
BENCHMARKS = [bench for run in RUNS for bench in sorted(run.iterdir()) if bench.is_dir()]


def nel_scores(bench: Path) -> dict[str, Any]:
    (bundle,) = bench.glob("eval-*.json")
    scores: dict[str, Any] = json.loads(bundle.read_text())["benchmark"]["scores"]
    return scores


def figures(summary: dict[str, Any]) -> dict[str, float]:
    return {entry["name"]: entry["mean"] for entry in summary["summary"]["scores"]}


def summary_of(path: Path, options: ImportOptions | None = None) -> dict[str, Any]:
    (summary,) = summaries(replayed(import_lines("nemo", path, options or ImportOptions()))).values()
    return summary


@pytest.mark.parametrize("bench", BENCHMARKS, ids=[f"{b.parent.name}/{b.name}" for b in BENCHMARKS])
def test_the_replayed_figures_are_nels_own(bench: Path) -> None:
    """nel rounds to 4 decimals: pass@1, pass@<repeats>, each scorer's value (its pass@1 here:
    the scorers' rewards are 0 or 1) and, for a run with partial credit, mean_reward."""
    theirs = nel_scores(bench)
    ours = figures(summary_of(bench))
    repeats = json.loads(next(bench.glob("eval-*.json")).read_text())["benchmark"]["repeats"]
    if "mean_reward" in theirs:
        assert round(ours["nel.reward"], 4) == theirs["mean_reward"]["value"]
    else:
        for k in {1, repeats}:
            assert round(ours[f"nel.reward.pass@{k}"], 4) == theirs[f"pass@{k}"]["value"], k
    scorers = [name for name in theirs if name.startswith("scorer:")]
    for name in scorers:
        assert round(ours[f"nel.{name.removeprefix('scorer:')}.pass@1"], 4) == theirs[name]["value"], name
    assert scorers or bench.name == "evalfix-partial"


@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_a_nested_run_is_one_run_per_benchmark_labelled_with_model_and_config_hash(run: Path) -> None:
    events = list(read(run, ImportOptions()))
    starts = [event for event in events if isinstance(event, RunStarted)]
    nel_run = json.loads((run / "nel_run.json").read_text())["run_id"]
    assert [start.run_id for start in starts] == [f"{nel_run}:evalfix", f"{nel_run}:evalfix-partial"]
    for start in starts:
        bundle = json.loads(next((run / start.labels["benchmark"]).glob("eval-*.json")).read_text())
        assert start.labels["model"] == "scripted-m1" == bundle["config"]["model"]
        assert start.labels["config_hash"] == bundle["config_hash"]
        assert start.attempts_per_task == bundle["benchmark"]["repeats"]
    assert sum(isinstance(event, RunClosed) for event in events) == 2


def test_a_flat_benchmark_directory_is_the_same_run() -> None:
    nested = {s["run_id"]: s for s in summaries(replayed(import_lines("nemo", RUNS[0], ImportOptions()))).values()}
    flat = summary_of(RUNS[0] / "evalfix")
    assert flat == nested[flat["run_id"]]


def test_a_resumed_runs_cached_attempts_keep_their_scorers() -> None:
    """The cached lines of the resumed run have no scorer_rewards and no trajectory; their
    scorers' rewards come from scoring_details, so both runs say the same."""
    lines = [json.loads(line) for line in (RUNS[1] / "evalfix" / "results.jsonl").read_text().splitlines()]
    cached = [line for line in lines if "scorer_rewards" not in line]
    assert cached
    assert not any("trajectory" in line for line in cached)
    resumed, whole = figures(summary_of(RUNS[1] / "evalfix")), figures(summary_of(RUNS[0] / "evalfix"))
    assert {k: v for k, v in resumed.items() if "match" in k} == {k: v for k, v in whole.items() if "match" in k}


def test_each_way_an_attempt_ends() -> None:
    """p2's endpoint answers HTTP 500 (after retries: a dead trial); p3's is empty (a measured 0,
    as nel counts it); p1 is flaky."""
    events = list(read(RUNS[0] / "evalfix", ImportOptions()))
    ways: dict[str, set[tuple[str, str | None, str, str | None]]] = {}
    for finished in events:
        if isinstance(finished, TrialFinished):
            (score,) = [
                e for e in events if isinstance(e, ScoreMeasured | ScoreFailed) and e.trial_id == finished.trial_id
            ]
            failure = score.failure if isinstance(score, ScoreFailed) else None
            error = finished.error.type if finished.error else None
            ways.setdefault(finished.task_id, set()).add((finished.status, error, score.status, failure))
    assert ways == {
        "evalfix/0": {("completed", None, "completed", None)},
        "evalfix/1": {("completed", None, "completed", None)},
        "evalfix/2": {("failed", "infra_error", "failed", "trial")},
        "evalfix/3": {("completed", None, "completed", None)},
        "evalfix/4": {("completed", None, "completed", None)},
    }


def test_run_id_overrides_name_the_runs() -> None:
    assert summary_of(RUNS[0] / "evalfix", ImportOptions(run_id="mine"))["run_id"] == "mine"
    runs = {event.run_id for event in read(RUNS[0], ImportOptions(run_id="mine"))}
    assert runs == {"mine:evalfix", "mine:evalfix-partial"}


def test_a_run_still_writing_leaves_its_run_open(tmp_path: Path) -> None:
    bench = tmp_path / "evalfix"
    shutil.copytree(RUNS[0] / "evalfix", bench)
    results = bench / "results.jsonl"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:7]))
    events = list(read(bench, ImportOptions()))
    assert not any(isinstance(event, RunClosed) for event in events)
    assert sum(isinstance(event, TrialFinished) for event in events) == 7


def test_a_stopped_benchmark_is_read_from_its_live_log_and_left_open(tmp_path: Path) -> None:
    """Stopped before its end, a benchmark has only nel's live log: its attempts are the same
    events as the finished benchmark's, and its run stays open."""
    shutil.copy(RUNS[0] / "nel_run.json", tmp_path)
    bench = tmp_path / "evalfix"
    bench.mkdir()
    lines = (RUNS[0] / "evalfix" / "verified_log.jsonl").read_text().splitlines(keepends=True)
    (bench / "verified_log.jsonl").write_text("".join(lines[:9]))
    stopped = list(read(bench, ImportOptions()))
    assert not any(isinstance(event, RunClosed) for event in stopped)
    trials = [event for event in stopped if not isinstance(event, RunStarted)]
    assert len(trials) == 18
    whole = {event.event_id: event for event in read(RUNS[0] / "evalfix", ImportOptions())}
    assert all(whole[event.event_id] == event for event in trials)


def test_the_minimal_fields_of_nels_result_format_are_enough(tmp_path: Path) -> None:
    """`result-format.mdx`: only `problem_idx` and `reward` are required (`repeat` defaults to
    0), and a bundle needs only `benchmark.name` and `benchmark.scores`."""
    flat = tmp_path / "results"
    flat.mkdir()
    lines = [
        {"problem_idx": 0, "reward": 1.0, "repeat": 0},
        {"problem_idx": 0, "reward": 0.0, "repeat": 1},
        {"problem_idx": 1, "reward": 1.0},
    ]
    (flat / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    bundle = {"benchmark": {"name": "mmlu_pro", "scores": {"pass@1": {"value": 0.75}}}}
    (flat / "eval-mmlu_pro.json").write_text(json.dumps(bundle))
    summary = summary_of(flat)
    assert summary["run_id"] == "results"
    assert summary["labels"] == {"benchmark": "mmlu_pro"}
    assert summary["closed_reason"] == "completed"
    assert figures(summary)["nel.reward.pass@1"] == 0.75
    assert sorted(summary["summary"]["task_metric_attempts"]) == ["results/0", "results/1"]


def _cli_import(path: Path) -> subprocess.CompletedProcess[str]:
    cli = [sys.executable, "-m", "worker.commands.cli", "import", "nemo", str(path)]
    return subprocess.run(cli, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (
            lambda b: (b / "results.jsonl").write_text('{"problem_idx": 0, "rep'),
            "results.jsonl, line 1: not valid JSON",
        ),
        (lambda b: (b / "results.jsonl").write_text('{"problem_idx": -1}\n'), "results.jsonl, line 1: `problem_idx`"),
        (
            lambda b: (b / "results.jsonl").write_text('{"problem_idx": 0, "repeat": 0, "reward": "1"}\n'),
            "results.jsonl, line 1: `reward` is not a number",
        ),
        (
            lambda b: (b / "results.jsonl").write_text('{"problem_idx": 0, "repeat": 0, "reward": 1}\n' * 2),
            "results.jsonl, line 2: problem 0 repeat 0 is given twice",
        ),
        (lambda b: next(b.glob("eval-*.json")).write_text("[]"), "no `benchmark` object"),
    ],
    ids=["half-a-line", "not-a-count", "reward-not-a-number", "attempt-twice", "bundle-not-an-object"],
)
def test_a_garbled_nel_output_is_named_with_exit_2_and_no_traceback(tmp_path: Path, damage: Any, said: str) -> None:
    bench = tmp_path / "evalfix"
    shutil.copytree(RUNS[0] / "evalfix", bench)
    damage(bench)
    done = _cli_import(bench)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert str(bench) in done.stderr
    assert "Traceback" not in done.stderr


def test_a_directory_that_is_neither_bundle_nor_nel_output_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"tasks\.jsonl: missing"):
        list(read(tmp_path, ImportOptions()))
