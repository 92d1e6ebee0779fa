"""`evalstream export mlflow`: one MLflow run per evalstream run, updated in place as revisions land.

The MLflow run of an evalstream run is the one in its experiment tagged `evalstream.run_key`
= `flat.run_key(run_id)` (32 hex digits: a run id may hold characters a search filter
cannot), created the first time, named after the run id, its status from the closed reason
(completed FINISHED, failed FAILED, cancelled KILLED). What each revision writes:

- metrics, each at step = the revision (so a metric's history is its value per revision, and
  its latest value is the newest revision's): per pass@k key and k, `<key>.pass_at_<k>` and
  `<key>.pass_hat_<k>`, each with `.stderr`, `.ci95_low` and `.ci95_high`; `<key>.tasks`
  (measured tasks) and `<key>.verdicts.<verdict>` (task counts); `<aggregate>.mean` for each
  metric output and view; `task_count`, `trial_count`, `score_count`, `event_count`. A
  character MLflow refuses in a name (anything but letters, digits, `_ - . / :` and space)
  is written `_`.
- params: `closed_reason`, `attempts_per_task` (`flat.attempts_per_task`) and `label.<name>`
  for each label. MLflow never changes a param: a later revision writes only params new to
  the run, and a value that changed goes in the tag `param.<name>`.
- tags: `evalstream.run_id`, `evalstream.run_key`, `evalstream.version`, and last, once the
  rest is written, `evalstream.revision`: the revision the run holds. A summary whose
  revision is not above it writes nothing (idempotent by (run, revision)); a crash before it
  writes the revision again, at the same step with the same values.
- artifacts: `summary.json` (the record as published) and `attempts.csv` (task_id, key,
  attempt, trial_id, value, passed: one row per attempt), replaced by each revision.

A run MLflow refuses (a label too long for a param, a name too long) is reported with
MLflow's reason; a server that cannot be reached stops the export (`SinkUnavailable`).
Runs of a batch are written by a few threads at once: each run's writes are its own.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from importlib.metadata import version

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, RunStatus, RunTag
from mlflow.exceptions import MlflowException

from events.outputs import RunSummary
from worker.export.flat import PASS_AT, attempt_rows, attempts_per_task, figures, run_key
from worker.export.sink import REFUSED, UNCHANGED, WRITTEN, Exported, Result, SinkUnavailable

RUN_KEY, RUN_ID, REVISION, VERSION = (
    "evalstream.run_key",
    "evalstream.run_id",
    "evalstream.revision",
    "evalstream.version",
)
THREADS = 8
"""Runs written at once."""
ONE_REQUEST, ONE_REQUEST_TAGS = 1000, 100
"""What MLflow's `log_batch` sends in one request, at most."""
STATUS = {"completed": RunStatus.FINISHED, "failed": RunStatus.FAILED, "cancelled": RunStatus.KILLED}
_REFUSED_CHARACTER = re.compile(r"[^/\w.\- :]")


def metric_name(name: str) -> str:
    return _REFUSED_CHARACTER.sub("_", name)


def metrics(summary: RunSummary) -> dict[str, float]:
    """Every metric a revision writes, by name."""
    found: dict[str, float] = {}
    for figure in figures(summary):
        if figure.k is None:
            found[f"{figure.key}.{figure.figure}"] = figure.value
            continue
        name = f"{figure.key}.{'pass_at' if figure.figure == PASS_AT else 'pass_hat'}_{figure.k}"
        found[name] = figure.value
        for suffix, value in (
            ("stderr", figure.stderr),
            ("ci95_low", figure.ci95_low),
            ("ci95_high", figure.ci95_high),
        ):
            if value is not None:
                found[f"{name}.{suffix}"] = value
    counts = summary.summary
    for name, count in (
        ("task_count", counts.task_count),
        ("trial_count", counts.trial_count),
        ("score_count", counts.score_count),
        ("event_count", summary.event_count),
    ):
        found[name] = float(count)
    return {metric_name(name): value for name, value in found.items()}


def params(summary: RunSummary) -> dict[str, str]:
    found = {"closed_reason": summary.closed_reason, "attempts_per_task": attempts_per_task(summary)}
    found.update({f"label.{name}": value for name, value in summary.labels.items()})
    return {metric_name(name): value for name, value in found.items()}


def attempts_csv(summary: RunSummary) -> str:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(("task_id", "key", "attempt", "trial_id", "value", "passed"))
    for row in attempt_rows(summary):
        value = "" if row.value is None else repr(row.value) if math.isfinite(row.value) else str(row.value)
        writer.writerow((row.task_id, row.key, row.attempt, row.trial_id, value, str(row.passed).lower()))
    return text.getvalue()


class MlflowSink:
    def __init__(self, tracking_uri: str, *, experiment: str, experiment_label: str | None) -> None:
        self.name = f"MLflow at {tracking_uri}"
        self._client = MlflowClient(tracking_uri)
        self._experiment = experiment
        self._label = experiment_label
        self._experiments: dict[str, str] = {}
        self._version = version("evalstream")
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # it prints a line per run
        with _retries(0):
            try:
                self._client.search_experiments(max_results=1)
            except MlflowException as error:
                raise SinkUnavailable(
                    f"cannot reach the MLflow tracking server at {tracking_uri}: {_first_line(error)}; start it, or "
                    "point --tracking-uri (or MLFLOW_TRACKING_URI) at one"
                ) from None

    def write(self, batch: Sequence[Exported]) -> list[Result]:
        with ThreadPoolExecutor(THREADS) as pool:
            return list(pool.map(self._write, batch))

    def _write(self, exported: Exported) -> Result:
        summary = exported.summary
        try:
            return self._write_run(exported)
        except MlflowException as error:
            if 400 <= error.get_http_status_code() < 500:  # type: ignore[no-untyped-call]  # MLflow leaves it untyped
                return Result(summary.run_id, summary.revision, REFUSED, f"MLflow refused it: {_first_line(error)}")
            raise SinkUnavailable(f"{self.name} failed: {_first_line(error)}") from None

    def _write_run(self, exported: Exported) -> Result:
        summary, client = exported.summary, self._client
        experiment = self._experiment_id(summary)
        key = run_key(summary.run_id)
        found = client.search_runs([experiment], f"tags.`{RUN_KEY}` = '{key}'", max_results=1)
        run: Run | None = found[0] if found else None
        if run is not None and int(run.data.tags.get(REVISION, "0")) >= summary.revision:
            return Result(summary.run_id, summary.revision, UNCHANGED)
        if run is None:
            run = client.create_run(
                experiment,
                start_time=int(exported.published * 1000),
                tags={RUN_KEY: key, RUN_ID: summary.run_id},
                run_name=summary.run_id,
            )
            client.set_terminated(
                run.info.run_id, RunStatus.to_string(STATUS[summary.closed_reason]), int(exported.published * 1000)
            )
        run_id = run.info.run_id
        held = run.data.params
        wanted = params(summary)
        now = int(time.time() * 1000)
        tags = [
            RunTag(VERSION, self._version),
            *(RunTag(f"param.{name}", value) for name, value in wanted.items() if held.get(name, value) != value),
        ]
        figures = [Metric(name, value, now, summary.revision) for name, value in metrics(summary).items()]
        news = [Param(name, value) for name, value in wanted.items() if name not in held]
        client.log_text(run_id, exported.raw.decode(), "summary.json")
        client.log_text(run_id, attempts_csv(summary), "attempts.csv")
        done = RunTag(REVISION, str(summary.revision))
        if len(figures) + len(news) + len(tags) < ONE_REQUEST and len(news) + len(tags) < ONE_REQUEST_TAGS:
            # One request: MLflow's server writes its params, metrics, then tags, in that order.
            client.log_batch(run_id, metrics=figures, params=news, tags=[*tags, done])
        else:  # MLflow splits it into several requests: the revision goes after them all
            client.log_batch(run_id, metrics=figures, params=news, tags=tags)
            client.set_tag(run_id, done.key, done.value)
        return Result(summary.run_id, summary.revision, WRITTEN)

    def _experiment_id(self, summary: RunSummary) -> str:
        name = summary.labels.get(self._label, self._experiment) if self._label else self._experiment
        known = self._experiments.get(name)
        if known is not None:
            return known
        experiment = self._client.get_experiment_by_name(name)
        if experiment is not None:
            known = experiment.experiment_id
        else:
            try:
                known = self._client.create_experiment(name)
            except MlflowException:  # another writer created it meanwhile
                experiment = self._client.get_experiment_by_name(name)
                if experiment is None:
                    raise
                known = experiment.experiment_id
        self._experiments[name] = known
        return known


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


@contextmanager
def _retries(count: int) -> Iterator[None]:
    """MLflow's HTTP retries set to `count` for the block, unless the user set them: a server
    that is not there is said at once, not after minutes of backing off."""
    name = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
    if name in os.environ:
        yield
        return
    os.environ[name] = str(count)
    try:
        yield
    finally:
        del os.environ[name]
