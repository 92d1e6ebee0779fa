"""Factories for input events: valid by default, every field overridable by keyword (for the
tests, the fault-injection harness of `tests/faults` and the benchmarks; a harness records with
`events.clients.recorder`); and a fold of events into a run state and its summary."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from events.codec import encode_payload, from_object
from events.models import InputEvent, RunClosed, RunStarted, ScoreFailed, ScoreMeasured, TrialFinished
from events.outputs import RunSummary
from projections.assembly.summary import summary
from projections.fold.run import RunState, apply

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


def fold(events: Iterable[InputEvent], run_id: str = "run") -> RunState:
    """A run state with `events` applied in order."""
    run = RunState(run_id)
    for event in events:
        apply(run, event)
    return run


def scored_run(
    run_id: str,
    attempts: Mapping[str, Sequence[object]],
    *,
    labels: Mapping[str, str] | None = None,
    harbor_rules: str | None = None,
) -> list[InputEvent]:
    """A closed run declaring `reward.score` continuous on each task of `attempts`, with one
    trial per value in order (None: a dead trial; no value: a task nothing was measured for)."""
    events: list[InputEvent] = [
        started(
            run_id,
            [task_spec(task_id, {"reward.score": "continuous"}) for task_id in attempts],
            labels=dict(labels or {}),
            harbor_rules=harbor_rules,
        )
    ]
    for task_id, values in attempts.items():
        for number, value in enumerate(values):
            trial_id = f"{task_id}-{number}"
            if value is None:
                events.append(dead(task_id, trial_id, "reward", run_id=run_id))
            else:
                events.append(score(task_id, trial_id, "reward", {"score": value}, run_id=run_id))
    return [*events, closed(run_id)]


def summary_pair(
    baseline: Mapping[str, Sequence[object]], candidate: Mapping[str, Sequence[object]]
) -> tuple[RunSummary, RunSummary]:
    """The summaries of two `scored_run`s, "base" and "cand", as a gate compares them."""
    return summary_of(scored_run("base", baseline), "base"), summary_of(scored_run("cand", candidate), "cand")


def summary_of(events: Iterable[InputEvent], run_id: str = "run") -> RunSummary:
    """The run.summary of a closed run's events, as a subscriber reads it."""
    return RunSummary.model_validate_json(encode_payload(summary(fold(events, run_id))))
