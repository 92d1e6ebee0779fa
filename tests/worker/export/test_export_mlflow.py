"""`evalstream export mlflow` against a real MLflow tracking server (SQLite backend, artifacts
served by it), read back with MLflow's own client."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run

from events.outputs import RunSummary
from tests.builders import closed, score, scored_run, started, task_spec
from tests.worker.export.exporting import benchmark_runs, evalstream, replayed, summaries_of
from worker.export.flat import run_key
from worker.local.mlflow_server import mlflow_server
from worker.local.processes import free_port


@pytest.fixture(scope="module")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replayed(tmp_path_factory.mktemp("mlflow-summaries"), benchmark_runs())


def export(uri: str, *args: str) -> tuple[int, str]:
    done = evalstream("export", "mlflow", *args, env={**os.environ, "MLFLOW_TRACKING_URI": uri})
    assert "Traceback" not in done.stderr
    assert done.stdout == ""  # MLflow's own "View run" lines are kept off stdout
    return done.returncode, done.stderr


def runs_of(client: MlflowClient, run_id: str) -> list[Run]:
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    return list(client.search_runs(experiments, f"tags.`evalstream.run_key` = '{run_key(run_id)}'"))


def expected_metrics(summary: RunSummary) -> dict[str, float]:
    """The metrics a summary's figures make, by the names docs/export.md gives."""
    wanted: dict[str, float] = {}
    for key, statistics in summary.statistics.items():
        for name, entries in (("pass_at", statistics.pass_at_k), ("pass_hat", statistics.pass_hat_k)):
            for entry in entries:
                figure = f"{key}.{name}_{entry.k}"
                for suffix, value in (
                    ("", entry.mean),
                    (".stderr", entry.stderr),
                    (".ci95_low", entry.ci95_low),
                    (".ci95_high", entry.ci95_high),
                ):
                    if value is not None:
                        wanted[figure + suffix] = value
        wanted[f"{key}.tasks"] = statistics.tasks
    return wanted


@pytest.fixture(scope="module")
def exported(tracking: str, summaries: Path) -> MlflowClient:
    code, err = export(tracking, "--from-file", str(summaries), "--experiment-label", "benchmark")
    assert code == 0, err
    assert "4 runs written to MLflow at " in err
    return MlflowClient(tracking)


def test_each_run_is_one_mlflow_run_with_the_summarys_figures(summaries: Path, exported: MlflowClient) -> None:
    for run_id, summary in summaries_of(summaries).items():
        (run,) = runs_of(exported, run_id)
        metrics = run.data.metrics
        for name, value in expected_metrics(summary).items():
            assert metrics[name] == value, (run_id, name)
        assert run.data.tags["evalstream.run_id"] == run_id
        assert run.data.tags["evalstream.revision"] == str(summary.revision)
        assert run.data.tags["evalstream.version"] == "0.1.0"
        assert run.info.run_name == run_id
        assert run.info.status == "FINISHED"
        experiment = exported.get_experiment(run.info.experiment_id)
        assert experiment.name == summary.labels["benchmark"]
        for metric in ("reward.score.pass_at_1", "task_count"):
            history = exported.get_metric_history(run.info.run_id, metric)
            assert [entry.step for entry in history] == [summary.revision]


def test_params_counts_and_means(summaries: Path, exported: MlflowClient) -> None:
    latest = summaries_of(summaries)
    (new,) = runs_of(exported, "new")
    assert new.data.params == {
        "closed_reason": "completed",
        "attempts_per_task": "2",
        "label.benchmark": "flips",
        "label.model": "m-2",
    }
    metrics = new.data.metrics
    assert (metrics["reward.score.verdicts.solved"], metrics["reward.score.verdicts.failed"]) == (2.0, 3.0)
    assert (metrics["task_count"], metrics["trial_count"], metrics["score_count"]) == (5.0, 10.0, 10.0)
    assert metrics["event_count"] == latest["new"].event_count
    (synthetic,) = runs_of(exported, "synthetic")
    for aggregate in latest["synthetic"].summary.scores:
        if ".pass@" not in aggregate.name and aggregate.mean is not None:
            assert synthetic.data.metrics[f"{aggregate.name}.mean"] == aggregate.mean


def test_artifacts_are_the_summary_and_its_attempts(summaries: Path, exported: MlflowClient, tmp_path: Path) -> None:
    summary = summaries_of(summaries)["late"]
    (run,) = runs_of(exported, "late")
    assert sorted(artifact.path for artifact in exported.list_artifacts(run.info.run_id)) == [
        "attempts.csv",
        "summary.json",
    ]
    folder = Path(exported.download_artifacts(run.info.run_id, "", str(tmp_path)))
    assert RunSummary.model_validate_json((folder / "summary.json").read_bytes()) == summary
    rows = list(csv.DictReader(io.StringIO((folder / "attempts.csv").read_text())))
    assert [(row["task_id"], row["attempt"], row["value"], row["passed"]) for row in rows] == [
        ("a", "0", "1.0", "true"),
        ("a", "1", "0.0", "false"),
        ("a", "2", "1.0", "true"),
        ("b", "0", "1.0", "true"),
        ("b", "1", "1.0", "true"),
        ("b", "2", "0.0", "false"),
    ]


def test_a_later_revision_updates_the_same_run_and_nothing_doubles(tracking: str, tmp_path: Path) -> None:
    client = MlflowClient(tracking)
    first = replayed(tmp_path, scored_run("grows", {"a": [1, 1]}), name="first")
    code, err = export(tracking, "--from-file", str(first))
    assert code == 0, err
    (run,) = runs_of(client, "grows")
    assert run.data.metrics["reward.score.pass_at_1"] == 1.0
    later = replayed(tmp_path, [*scored_run("grows", {"a": [1, 1]}), *scored_run("grows", {"a": [0]})[1:-1]], "later")
    assert export(tracking, "--from-file", str(later))[0] == 0
    assert "1 unchanged" in export(tracking, "--from-file", str(later))[1]  # the same revision again: nothing
    assert "1 unchanged" in export(tracking, "--from-file", str(first))[1]  # an older one: nothing
    (updated,) = runs_of(client, "grows")
    assert updated.info.run_id == run.info.run_id
    assert updated.data.tags["evalstream.revision"] == "2"
    assert updated.data.params["attempts_per_task"] == "2"  # MLflow keeps a param's first value
    assert updated.data.tags["param.attempts_per_task"] == "3"
    history = client.get_metric_history(run.info.run_id, "reward.score.pass_at_1")
    assert [(entry.step, entry.value) for entry in history] == [(1, 1.0), (2, pytest.approx(2 / 3))]


def test_a_run_mlflow_refuses_is_named_and_the_rest_written(tracking: str, tmp_path: Path) -> None:
    # MLflow refuses a metric name that a file path would read as another ("a//b" is "a/b").
    events = [
        started("odd", [task_spec("t", {"a//b.score": "continuous"})]),
        score("t", "t-1", "a//b", {"score": 1.0}, run_id="odd"),
        closed("odd"),
        *scored_run("fine", {"a": [1]}),
    ]
    code, err = export(tracking, "--from-file", str(replayed(tmp_path, events)))
    assert code == 3
    assert "run 'odd' revision 1 not written: MLflow refused it: " in err
    assert "1 runs written" in err
    assert len(runs_of(MlflowClient(tracking), "fine")) == 1


def test_no_server_exits_1_at_once(summaries: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    code, err = export(uri, "--from-file", str(summaries))
    assert code == 1
    assert f"evalstream export: cannot reach the MLflow tracking server at {uri}" in err
    done = evalstream("export", "mlflow", "--from-file", str(summaries), env={**os.environ, "MLFLOW_TRACKING_URI": ""})
    assert done.returncode == 2
    assert "name the MLflow tracking server: --tracking-uri URI, or MLFLOW_TRACKING_URI" in done.stderr
