"""`evalstream import nemo BUNDLE`: NeMo evaluator SDK bundles (tests/fixtures/nemo, made by the
SDK itself) against the SDK's own summary.json and, for bundles made from a Harbor job, against
that job's own Harbor stats."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest

from events.importers.nemo import read
from events.importers.source import ImportOptions
from events.models import RunStarted, ScoreFailed, ScoreMeasured, TrialFinished
from worker.commands.importing import import_lines
from worker.commands.replay import replay

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nemo"
EXTRA = os.environ.get("EVALSTREAM_NEMO_BUNDLES")
BUNDLES = sorted(
    path
    for folder in [FIXTURES, *([Path(EXTRA)] if EXTRA else [])]
    for path in folder.iterdir()
    if (path / "summary.json").is_file()
)
"""The fixtures, and the bundles in EVALSTREAM_NEMO_BUNDLES (a directory of bundles) when set."""
FROM_HARBOR = [path for path in BUNDLES if (path / "harbor-result.json").is_file()]

SDK_DIVERGES = {
    "harbor-job-b": "SDK 0.6 counts an output's total over the tasks declaring it (harbor_reward.format_ok: "
    "2, not 6 scores of the metric); SEMANTICS.md 4-5 count every score of the metric (A)",
    "synthetic": "SDK 0.6 counts tasks with 0 < n < k in pass@k's nan_count and keeps Label outputs in "
    "task_metric_values; SEMANTICS.md 1-2 do neither (B, C of without_known_divergences)",
    "random-20": "SDK 0.6 sorts pass@k by (metric type, output): judge before judge-2 (E); and C, D",
    "random-45": "SDK 0.6 emits pass@k up to a task's most scores of the metric, metric failures too (D)",
    "random-140": "SDK 0.6 skips a view reduction when a signal is NaN (F); and B",
}
"""Bundles whose summary.json the contract (SEMANTICS.md) does not reproduce, and why (see
`without_known_divergences`)."""


def lines(bundle: Path, *, as_recorded: bool = False, run_id: str | None = None) -> list[bytes]:
    return list(import_lines("nemo", bundle, ImportOptions(run_id=run_id, as_recorded=as_recorded)))


def replayed(log: Iterable[bytes]) -> dict[str, Any]:
    """The one run.summary that replaying `log` writes."""
    out = io.BytesIO()
    replay(log, out, io.StringIO())
    summaries = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert len(summaries) == 1, summaries
    summary: dict[str, Any] = summaries[0]
    return summary


def bits(value: Any) -> Any:
    """`value` with every float spelled by its bits, so that == compares them bit for bit."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, dict):
        return {key: bits(item) for key, item in value.items()}
    if isinstance(value, list):
        return [bits(item) for item in value]
    return value


def sdk_summary(bundle: Path) -> dict[str, Any]:
    """The bundle's summary.json, in the shape (and the order) of our `summary` object."""
    recorded = json.loads((bundle / "summary.json").read_text())
    values = recorded.get("task_metric_attempts", recorded.get("task_metric_values"))
    return {
        "scores": [{k: v for k, v in score.items() if k != "histogram"} for score in recorded["scores"]["scores"]],
        "metric_coverage": recorded["metric_coverage"],
        "task_metric_attempts": {
            task: {key: [_attempt(record) for record in records] for key, records in keys.items()}
            for task, keys in values.items()
        },
        "task_count": recorded["task_count"],
        "trial_count": recorded["trial_count"],
        "score_count": recorded["score_count"],
    }


def _attempt(record: dict[str, Any]) -> dict[str, Any]:
    # The SDK keeps each value in the type its metric gave (a count an int, a flag a bool);
    # ours are floats. Non-finite numbers are the same strings in both.
    value = record["value"]
    if isinstance(value, bool | int | float):
        value = float(value)
    return {"trial_id": record["trial_id"], "value": value}


def our_summary(bundle: Path) -> dict[str, Any]:
    summary = replayed(lines(bundle, as_recorded=True))["summary"]
    return {key: summary[key] for key in sdk_summary(bundle)}


@pytest.mark.parametrize(
    "bundle",
    [
        pytest.param(path, marks=pytest.mark.xfail(strict=True, reason=SDK_DIVERGES[path.name]))
        if path.name in SDK_DIVERGES
        else path
        for path in BUNDLES
    ],
    ids=lambda path: path.name,
)
def test_as_recorded_replay_reproduces_the_bundles_own_summary_bit_for_bit(bundle: Path) -> None:
    assert bits(our_summary(bundle)) == bits(sdk_summary(bundle))


def declared(bundle: Path) -> dict[str, dict[tuple[str, str], str]]:
    """task id -> (metric type, output) -> the SDK's value schema name, from tasks.jsonl."""
    tasks = [json.loads(line) for line in (bundle / "tasks.jsonl").read_text().splitlines()]
    return {
        task["id"]: {
            (metric["type"], output["name"]): output["value_schema"]
            for metric in task["metrics"]
            for output in metric["outputs"]
        }
        for task in tasks
    }


def without_known_divergences(summary: dict[str, Any], bundle: Path) -> dict[str, Any]:
    """`summary` less the figures where SDK 0.6 and SEMANTICS.md disagree, each by its rule
    (found on the fixtures and on random runs the SDK summarized, make/random_runs.py):
    A. an output not every task of its metric declares: the SDK counts its total (nan_count;
       coverage total, failed, missing) over the scores of the tasks declaring it only;
    B. pass@k nan_count: the SDK counts every task declaring the key with fewer than k
       attempts (n < k), SEMANTICS.md only the unmeasured ones;
    C. Label outputs: the SDK keeps their values in task_metric_values, SEMANTICS.md drops them;
    D. pass@k k: the SDK goes up to the most scores of the metric a task has (metric failures
       too), so its last ks can have count 0; SEMANTICS.md stops at the largest n;
    E. pass@k order: the SDK sorts by (metric type, output), SEMANTICS.md by the key's name
       ("judge-2.x" before "judge.x");
    F. a view signal that is NaN: the SDK skips that reduction, SEMANTICS.md reduces it."""
    tasks = declared(bundle)
    partial = {
        (metric, output)
        for keys in tasks.values()
        for metric, output in keys
        if any(any(m == metric for m, _ in other) and (metric, output) not in other for other in tasks.values())
    }
    labels = {f"{m}.{o}" for keys in tasks.values() for (m, o), schema in keys.items() if schema == "Label"}
    nan_signals = _nan_view_signals(bundle)
    scores = [masked for score in summary["scores"] if (masked := _masked(score, partial, nan_signals)) is not None]
    passk = sorted(
        (score for score in scores if ".pass@" in score["name"]), key=lambda score: _passk_order(score["name"])
    )
    scores = [score for score in scores if ".pass@" not in score["name"]] + passk  # E
    coverage = {
        metric: {
            output: {**counts, "total": None, "failed": None, "missing": None}
            if (metric, output) in partial
            else counts
            for output, counts in outputs.items()
        }
        for metric, outputs in summary["metric_coverage"].items()
    }
    attempts = {
        task: {key: values for key, values in keys.items() if key not in labels}  # C
        for task, keys in summary["task_metric_attempts"].items()
    }
    return {**summary, "scores": scores, "metric_coverage": coverage, "task_metric_attempts": attempts}


def _masked(score: dict[str, Any], partial: set[tuple[str, str]], nan_signals: bool) -> dict[str, Any] | None:
    name = score["name"]
    if ".pass@" in name and score["count"] == 0:
        return None  # D
    if name.startswith("view.") and nan_signals:
        return {"name": name}  # F
    if ".pass@" in name or _output(name) in partial:
        return {**score, "nan_count": None}  # B, A
    return score


def _output(name: str) -> tuple[str, str]:
    metric, _, output = name.partition(".")
    return metric, output


def _passk_order(name: str) -> tuple[str, str, int]:
    key, _, k = name.rpartition(".pass@")
    return (*_output(key), int(k))


def _nan_view_signals(bundle: Path) -> bool:
    """Whether some score carries NaN in an output that a view of its task reads."""
    tasks = {task["id"]: task for task in map(json.loads, (bundle / "tasks.jsonl").read_text().splitlines())}
    for score in map(json.loads, (bundle / "scores.jsonl").read_text().splitlines()):
        views = tasks[score["task_id"]]["views"].values()
        read = {(signal["metric"], signal["output"]) for view in views for signal in view["signals"]}
        if any(
            output["value"] == "NaN" and (score["metric_type"], output["name"]) in read for output in score["outputs"]
        ):
            return True
    return False


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda path: path.name)
def test_as_recorded_replay_equals_the_bundles_summary_outside_the_known_divergences(bundle: Path) -> None:
    ours, theirs = our_summary(bundle), sdk_summary(bundle)
    assert bits(without_known_divergences(ours, bundle)) == bits(without_known_divergences(theirs, bundle))


def harbor_stats(bundle: Path) -> dict[str, Any]:
    """The Harbor job's own stats for its one eval (agent/model/dataset group)."""
    evals = json.loads((bundle / "harbor-result.json").read_text())["stats"]["evals"]
    assert len(evals) == 1, "a bundle holds one run: make it from a job of one eval group"
    stats: dict[str, Any] = next(iter(evals.values()))
    return stats


def as_sets(reward_stats: dict[str, dict[str, list[str]]], prefix: str = "") -> dict[str, dict[float, set[str]]]:
    return {
        key.removeprefix(prefix): {float(value): set(trials) for value, trials in values.items()}
        for key, values in reward_stats.items()
    }


@pytest.mark.parametrize("bundle", FROM_HARBOR, ids=lambda path: path.name)
def test_a_bundle_from_a_harbor_job_gives_that_jobs_own_harbor_stats(bundle: Path) -> None:
    ours, theirs = replayed(lines(bundle))["harbor"], harbor_stats(bundle)
    assert (ours["n_trials"], ours["n_errors"]) == (theirs["n_trials"], theirs["n_errors"])
    assert {kind: set(trials) for kind, trials in ours["exception_stats"].items()} == {
        kind: set(trials) for kind, trials in theirs["exception_stats"].items()
    }
    assert as_sets(ours["reward_stats"], "harbor_reward.") == as_sets(theirs["reward_stats"])
    if theirs["pass_at_k"]:
        (key,) = theirs["reward_stats"]
        assert bits(ours["pass_at_k"]) == bits({f"harbor_reward.{key}": theirs["pass_at_k"]})
    else:
        # Harbor drops pass@k for the whole eval when a trial has several reward keys; we keep
        # it per key (SEMANTICS.md 6). Otherwise none either.
        assert not ours["pass_at_k"] or len(theirs["reward_stats"]) > 1


def absent_rewards(bundle: Path) -> set[str]:
    """Trials the SDK scored 0.0 because their reward was absent (its diagnostics say so)."""
    scores = [json.loads(line) for line in (bundle / "scores.jsonl").read_text().splitlines()]
    return {
        score["trial_id"]
        for score in scores
        if score["status"] == "completed"
        and any(item["details"].get("reason") == "absent" for item in score["diagnostics"])
    }


def test_a_score_of_a_trial_that_died_without_its_reward_is_a_dead_trial() -> None:
    bundle = FIXTURES / "harbor-job-mixed"
    dead = absent_rewards(bundle)
    default, recorded = list(read(bundle, ImportOptions())), list(read(bundle, ImportOptions(as_recorded=True)))
    failed_trials = {
        event.trial_id for event in default if isinstance(event, TrialFinished) and event.status == "failed"
    }
    assert dead
    assert dead < failed_trials
    for event in default:
        if isinstance(event, ScoreMeasured | ScoreFailed):
            assert isinstance(event, ScoreFailed) == (event.trial_id in dead)
            if isinstance(event, ScoreFailed):
                assert event.failure == "trial"
    for event in recorded:
        if isinstance(event, ScoreMeasured | ScoreFailed) and event.trial_id in dead:
            assert isinstance(event, ScoreMeasured)
            assert [(output.name, output.value) for output in event.outputs] == [("reward", 0.0)]
    graded = replayed(lines(bundle, as_recorded=True))["harbor"]["n_trials"]
    assert graded == harbor_stats(bundle)["n_trials"] + len(dead)


def test_declarations_failures_and_labels_come_from_the_bundle() -> None:
    events = list(read(FIXTURES / "synthetic", ImportOptions()))
    started = events[0]
    assert isinstance(started, RunStarted)
    assert started.labels == {"agent": "scripted", "benchmark": "synthetic"}
    task = started.tasks[0]
    kinds = {(metric.metric_type, output.name): output.kind for metric in task.metrics for output in metric.outputs}
    assert {output: kind for (metric, output), kind in kinds.items() if metric == "rubric"} == {
        "score": "continuous",
        "passed": "boolean",
        "steps": "discrete",
        "verdict": "label",
        "usage": "model",
        "bonus": "continuous",
    }
    views = {view.name: (view.reducer, [signal.weight for signal in view.signals]) for view in task.views}
    assert views == {"quality": ("weighted", [2.0, 1.0]), "strict": ("all", [1.0, 1.0])}
    failed = [event for event in events if isinstance(event, ScoreFailed)]
    judge = [event for event in failed if event.failure == "metric"]
    assert judge
    assert all(event.metric_type == "judge" and event.error for event in judge)
    assert {event.error.type for event in judge if event.error} == {"TimeoutError"}
    died = {event.trial_id for event in events if isinstance(event, TrialFinished) and event.status == "failed"}
    assert died == {event.trial_id for event in failed if event.failure == "trial"}
    usage = [
        output.value
        for event in events
        if isinstance(event, ScoreMeasured)
        for output in event.outputs
        if output.name == "usage"
    ]
    assert usage
    assert all(value is None for value in usage)


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda path: path.name)
def test_importing_twice_is_a_redelivery(bundle: Path) -> None:
    once = lines(bundle)
    assert lines(bundle) == once  # ids and bytes are the bundle's, not the moment's
    twice = replayed(once + once)
    assert twice == replayed(once)


def test_run_id_comes_from_the_bundle_and_run_id_overrides_it() -> None:
    bundle = FIXTURES / "synthetic"
    recorded = json.loads((bundle / "run.json").read_text())["run_id"]
    assert {event.run_id for event in read(bundle, ImportOptions())} == {recorded}
    renamed = list(read(bundle, ImportOptions(run_id="mine")))
    assert {event.run_id for event in renamed} == {"mine"}
    assert [event.event_id for event in renamed] == [event.event_id for event in read(bundle, ImportOptions())]


def evalstream(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_cli_pipes_a_bundle_into_replay() -> None:
    bundle = FIXTURES / "harbor-job-mixed"
    imported = evalstream("import", "nemo", str(bundle), "--as-recorded")
    assert imported.returncode == 0, imported.stderr
    assert replayed(imported.stdout.encode().splitlines()) == replayed(lines(bundle, as_recorded=True))


def broken_bundle(tmp_path: Path, name: str) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(FIXTURES / name, copy)
    return copy


def test_a_missing_directory_is_named_exit_2(tmp_path: Path) -> None:
    done = evalstream("import", "nemo", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert f"{tmp_path / 'nowhere'}: no such directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_file_is_named_exit_2(tmp_path: Path) -> None:
    bundle = broken_bundle(tmp_path, "synthetic")
    (bundle / "trials.jsonl").unlink()
    done = evalstream("import", "nemo", str(bundle))
    assert (done.returncode, done.stdout) == (2, "")
    assert f"{bundle / 'trials.jsonl'}: missing" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"id": "x", "task_id": ', "not valid JSON"),
        ("[1, 2]", "one JSON object"),
        ("[" * 100_000 + "]" * 100_000, "nested deeper than a JSON reader follows"),
        ('{"id": "x", "task_id": "add", "trial_id": "t", "metric_type": "m", "status": "done"}', "status"),
    ],
)
def test_a_bad_line_is_named_by_file_and_line_exit_2_and_nothing_is_written(
    tmp_path: Path, line: str, says: str
) -> None:
    bundle = broken_bundle(tmp_path, "synthetic")
    scores = (bundle / "scores.jsonl").read_text().splitlines()
    scores[2] = line
    (bundle / "scores.jsonl").write_text("\n".join(scores) + "\n")
    done = evalstream("import", "nemo", str(bundle))
    assert (done.returncode, done.stdout) == (2, "")
    assert f"{bundle / 'scores.jsonl'}, line 3: " in done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
