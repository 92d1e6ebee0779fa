"""Factories for input events: valid by default, every field overridable by keyword (for
tests, the fault-injection harness and examples; a harness records with `events.clients.recorder`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from events.codec import from_object
from events.models import RunClosed, RunStarted, ScoreFailed, ScoreMeasured, TrialFinished

_ids = itertools.count(1)


def _envelope(run_id: str, event_id: str | None) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": run_id, "event_id": event_id or f"e-{next(_ids)}"}


def task_spec(
    task_id: str, outputs: dict[str, str] | None = None, views: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A task declaration; `outputs` maps "metric.output" to its kind."""
    metrics: dict[str, list[dict[str, str]]] = {}
    for key, kind in (outputs or {}).items():
        metric, output = key.split(".", 1)
        metrics.setdefault(metric, []).append({"name": output, "kind": kind})
    return {
        "task_id": task_id,
        "metrics": [{"metric_type": metric, "outputs": outs} for metric, outs in metrics.items()],
        "views": views or [],
    }


def started(
    run_id: str = "run", tasks: Iterable[dict[str, Any]] = (), event_id: str | None = None, **fields: Any
) -> RunStarted:
    return RunStarted.model_validate(
        {**_envelope(run_id, event_id), "type": "run.started", "tasks": list(tasks), **fields}
    )


def score(
    task_id: str,
    trial_id: str,
    metric: str,
    outputs: dict[str, Any] | None = None,
    *,
    status: str = "completed",
    failure: str | None = None,
    run_id: str = "run",
    event_id: str | None = None,
) -> ScoreMeasured | ScoreFailed:
    """A score; `outputs` maps output name to value (failed scores take none)."""
    body: dict[str, Any] = {
        **_envelope(run_id, event_id),
        "type": "score.emitted",
        "task_id": task_id,
        "trial_id": trial_id,
        "metric_type": metric,
        "status": status,
        "outputs": [{"name": name, "value": value} for name, value in (outputs or {}).items()],
    }
    if failure is not None:
        body["failure"] = failure
    event = from_object(body)
    assert isinstance(event, ScoreMeasured | ScoreFailed)
    return event


def dead(task_id: str, trial_id: str, metric: str, run_id: str = "run") -> ScoreMeasured | ScoreFailed:
    """The score of a metric of a trial that died."""
    return score(task_id, trial_id, metric, status="failed", failure="trial", run_id=run_id)


def broken(task_id: str, trial_id: str, metric: str, run_id: str = "run") -> ScoreMeasured | ScoreFailed:
    """The score of a metric that itself broke (unmeasured)."""
    return score(task_id, trial_id, metric, status="failed", failure="metric", run_id=run_id)


def trial(
    task_id: str,
    trial_id: str,
    status: str = "completed",
    *,
    error_type: str | None = None,
    run_id: str = "run",
    event_id: str | None = None,
) -> TrialFinished:
    body: dict[str, Any] = {
        **_envelope(run_id, event_id),
        "type": "trial.finished",
        "task_id": task_id,
        "trial_id": trial_id,
        "status": status,
    }
    if error_type is not None:
        body["error"] = {"type": error_type, "message": "boom"}
    return TrialFinished.model_validate(body)


def closed(run_id: str = "run", reason: str = "completed", event_id: str | None = None) -> RunClosed:
    return RunClosed.model_validate({**_envelope(run_id, event_id), "type": "run.closed", "reason": reason})
