"""Inspect AI's log records as v1 input events: the one conversion that the importer
(`inspect_log`) and the live hook (`events.clients.inspect_hook`) share.

It reads plain JSON as Inspect writes it (the log's `eval` spec, one sample, the log's
status), so a log read from disk and the objects a running eval hands its hooks convert
alike. The choices, where EVENTS.md and SEMANTICS.md leave them open:

- One run per log, i.e. per task execution: run id = the spec's `eval_id`. Labels from the
  spec: task, task_version, model, dataset (its name), eval_id, inspect_run_id, and
  eval_set_id and tags when there are.
- A sample is a task (task id = its id as text; the tasks are the dataset's `sample_ids`, in
  order); each epoch is a trial with the id `<sample id>:epoch<n>`; `attempts_per_task` is
  the spec's epochs.
- A scorer is a metric, named as the sample's `scores` name it (Inspect's unqualified,
  de-duplicated scorer name). A scalar value is the output `value`; a dict value gives one
  output per key; a list one per position ("0", "1", ...).
- Values become floats exactly as Inspect's own metrics read them, by `value_to_float`
  with its default sentinels: "C" 1, "P" 0.5, "I" and "N" 0; numbers and booleans as
  floats; "yes"/"true" 1 and "no"/"false" 0 in any case; strings of a finite number that
  number; anything else 0 (where Inspect logs a warning).
- Declared kinds: every declared output is `continuous` (value_to_float gives floats in
  which 1.0 is full credit). A scorer whose spec metrics are a list declares `value`; one
  whose metrics map keys declares those keys. Keys matched only by a glob such as "*"
  cannot be known before values arrive: they are left undeclared, so they get attempts and
  aggregates but no pass@k.
- Unscored results count as Inspect counts them, that is not at all: NaN at the root of a
  value (`Score.unscored()`, e.g. a judge whose verdict could not be parsed) is a metric
  failure (`failed`/`metric`, error type = its `reason`, else "Unscored"); NaN or null under
  a key leaves that key out of the score, which is then `partial` (every key: a metric
  failure). Old Inspect versions wrote NaN as null, hence null alike.
- A sample with an `error` is a trial that failed: `trial.finished` failed, error type =
  the exception's class. The scores it still has are kept (score_on_error, or the scorers
  that ran before one raised). A scorer without a score: when scoring had begun (a score
  exists, or the sample's events opened the scorers' span) that scorer raised, a grader
  failure: `failed`/`metric`; otherwise the sample died before it could be scored:
  `failed`/`trial`.
- Usage: the sample's `model_usage` summed over every model it called.
- Close reason from the log's status: success -> completed, cancelled -> cancelled,
  error -> failed; `started` (still running, or the process died) leaves the run open.
- Event ids: `inspect:<eval_id>:started` and `:closed`; per sample
  `inspect:<eval_id>:<sample id>:<epoch>:<sample uuid>:trial` and `...:score:<scorer>`, so
  importing a log twice, or importing the log a hooked eval wrote, is a redelivery.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from events.codec import from_object
from events.importers.source import SourceError, event_id
from events.models import InputEvent

SPEC_FIELDS = frozenset(
    {"eval_id", "run_id", "eval_set_id", "task", "task_version", "model", "dataset", "config", "scorers", "tags"}
)
"""The fields of an Inspect eval spec that the conversion reads."""
SAMPLE_FIELDS = frozenset({"id", "epoch", "uuid", "scores", "error", "model_usage", "events"})
"""The fields of an Inspect sample that the conversion reads."""

CLOSE_REASONS = {"success": "completed", "cancelled": "cancelled", "error": "failed"}
"""Inspect's log status -> run.closed reason; "started" (still running) has none."""

SCALAR_OUTPUT = "value"
_GLOB = re.compile(r"[*?\[]")
_EXCEPTION = re.compile(r"([A-Za-z_][\w.]*)\(")


def value_to_float(value: object) -> float:
    """Inspect's `value_to_float()` with its default sentinels (inspect_ai/scorer/_metric.py)."""
    if value == "C":
        return 1.0
    if value == "P":
        return 0.5
    if value in ("I", "N"):
        return 0.0
    if isinstance(value, int | float):  # bool is an int
        return float(value)
    if isinstance(value, str):
        lowered = value.lower()
        if lowered in ("yes", "true"):
            return 1.0
        if lowered in ("no", "false"):
            return 0.0
        try:
            number = float(lowered)
        except ValueError:
            return 0.0
        return number if math.isfinite(number) else 0.0
    return 0.0


def run_id(spec: Mapping[str, Any]) -> str:
    eval_id = spec.get("eval_id")
    if not isinstance(eval_id, str) or not eval_id:
        raise SourceError("the eval spec has no eval_id; is this an Inspect AI eval log?")
    return eval_id


def scorer_names(spec: Mapping[str, Any]) -> list[str]:
    """The spec's scorers as samples' `scores` name them (Inspect's `unique_scorer_name`)."""
    names: list[str] = []
    for scorer in spec.get("scorers") or []:
        base = str(scorer.get("name", "")).rsplit("/", 1)[-1]
        name, count = base, 1
        while name in names:
            name, count = f"{base}{count}", count + 1
        names.append(name)
    return names


def run_started(
    spec: Mapping[str, Any], samples: Sequence[Mapping[str, Any]] = (), *, run: str | None = None
) -> InputEvent:
    """The run's declarations from the eval spec; `samples` name the tasks and scorers
    only when the spec does not (logs of old Inspect versions)."""
    run = run or run_id(spec)
    sample_ids = (spec.get("dataset") or {}).get("sample_ids")
    task_ids = _unique(str(i) for i in sample_ids) if sample_ids else _unique(str(s["id"]) for s in samples)
    metrics = _declared_metrics(spec) if spec.get("scorers") else _seen_metrics(samples)
    epochs = (spec.get("config") or {}).get("epochs")
    return _event(
        f"run {run}",
        type="run.started",
        event_id=event_id("inspect", run_id(spec), "started"),
        run_id=run,
        tasks=[{"task_id": task, "metrics": metrics} for task in task_ids],
        attempts_per_task=epochs if isinstance(epochs, int) and epochs >= 1 else None,
        labels=_labels(spec),
    )


def sample_events(
    spec: Mapping[str, Any], sample: Mapping[str, Any], *, run: str | None = None
) -> Iterator[InputEvent]:
    """One sample (one epoch of it): its trial.finished, then one score per scorer."""
    run = run or run_id(spec)
    try:
        sample_id, epoch = sample["id"], sample["epoch"]
    except KeyError as absent:
        raise SourceError(f"a sample has no {absent}; is this an Inspect AI eval log?") from None
    task_id, where = str(sample_id), f"sample {sample_id!r} epoch {epoch}"
    trial_id = f"{task_id}:epoch{epoch}"
    base = ("inspect", run_id(spec), task_id, str(epoch), str(sample.get("uuid") or ""))
    common = {"run_id": run, "task_id": task_id, "trial_id": trial_id}
    error = _error(sample.get("error"))
    yield _event(
        where,
        type="trial.finished",
        event_id=event_id(*base, "trial"),
        status="failed" if error else "completed",
        error=error,
        usage=_usage(sample.get("model_usage") or {}),
        **common,
    )
    scores: Mapping[str, Any] = sample.get("scores") or {}
    no_score = {
        "status": "failed",
        "failure": "metric" if error is None or scores or _scoring_began(sample) else "trial",
    }
    for scorer in _unique([*scorer_names(spec), *scores]):
        fields = _score(scores[scorer]) if scorer in scores else {**no_score, "error": error}
        yield _event(
            where,
            type="score.emitted",
            event_id=event_id(*base, "score", scorer),
            metric_type=scorer,
            **common,
            **fields,
        )


def run_closed(spec: Mapping[str, Any], status: str, *, run: str | None = None) -> InputEvent | None:
    """The run's close from the log's status, or None while the log says it is running."""
    if status == "started":
        return None
    if status not in CLOSE_REASONS:
        raise SourceError(f"unknown log status {status!r}; expected started, success, cancelled or error")
    run = run or run_id(spec)
    return _event(
        f"run {run}",
        type="run.closed",
        event_id=event_id("inspect", run_id(spec), "closed"),
        run_id=run,
        reason=CLOSE_REASONS[status],
    )


def _event(where: str, **body: Any) -> InputEvent:
    try:
        return from_object({"schema_version": 1, **{k: v for k, v in body.items() if v is not None}})
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        # loc starts with the union tags: the event type, then a score's status
        path = [str(part) for part in problem["loc"][1:] if part not in ("completed", "partial", "failed")]
        field = ".".join(path)
        raise SourceError(f"{where}: cannot be a v1 event: field {field!r}: {problem['msg']}") from None


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _labels(spec: Mapping[str, Any]) -> dict[str, str]:
    labels = {
        "task": spec.get("task"),
        "task_version": spec.get("task_version"),
        "model": spec.get("model"),
        "dataset": (spec.get("dataset") or {}).get("name"),
        "eval_id": spec.get("eval_id"),
        "inspect_run_id": spec.get("run_id"),
        "eval_set_id": spec.get("eval_set_id"),
        "tags": ",".join(spec.get("tags") or []),
    }
    return {key: str(value) for key, value in labels.items() if value not in (None, "")}


def _declared_metrics(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    declared = []
    for name, scorer in zip(scorer_names(spec), spec.get("scorers") or [], strict=True):
        keys = _metric_keys(scorer.get("metrics"))
        outputs = [SCALAR_OUTPUT] if keys is None else [key for key in keys if not _GLOB.search(key)]
        declared.append({"metric_type": name, "outputs": [{"name": o, "kind": "continuous"} for o in outputs]})
    return declared


def _metric_keys(metrics: object) -> list[str] | None:
    """The keys a scorer's metrics map (a dict-valued scorer), or None for a scalar scorer."""
    if isinstance(metrics, dict):
        return list(metrics)
    if not isinstance(metrics, list):
        return None
    # In a list, a metric is {"name": ..., "options": ...}; a key mapping has lists as values.
    mappings = [m for m in metrics if isinstance(m, dict) and m and all(isinstance(v, list) for v in m.values())]
    return _unique(key for mapping in mappings for key in mapping) if mappings else None


def _seen_metrics(samples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    outputs: dict[str, list[str]] = {}
    for sample in samples:
        for scorer, score in (sample.get("scores") or {}).items():
            value = score.get("value")
            names = [SCALAR_OUTPUT] if not isinstance(value, dict | list) else [n for n, _ in _items(value)]
            outputs[scorer] = _unique([*outputs.get(scorer, []), *names])
    return [
        {"metric_type": scorer, "outputs": [{"name": name, "kind": "continuous"} for name in names]}
        for scorer, names in outputs.items()
    ]


def _items(value: dict[str, Any] | list[Any]) -> list[tuple[str, Any]]:
    return list(value.items()) if isinstance(value, dict) else [(str(i), v) for i, v in enumerate(value)]


def _unscored(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _score(score: Mapping[str, Any]) -> dict[str, Any]:
    value = score.get("value")
    if _unscored(value):
        reason = score.get("reason") or (score.get("metadata") or {}).get("unscored_reason") or "Unscored"
        explanation = score.get("explanation")
        return {"status": "failed", "failure": "metric", "error": {"type": str(reason), "message": explanation}}
    if not isinstance(value, dict | list):
        return {"status": "completed", "outputs": [{"name": SCALAR_OUTPUT, "value": value_to_float(value)}]}
    items = _items(value)
    outputs = [{"name": name, "value": value_to_float(v)} for name, v in items if not _unscored(v)]
    if not outputs:
        return {"status": "failed", "failure": "metric", "error": {"type": "Unscored", "message": "every key is NaN"}}
    return {"status": "partial" if len(outputs) < len(items) else "completed", "outputs": outputs}


def _scoring_began(sample: Mapping[str, Any]) -> bool:
    return any(e.get("event") == "span_begin" and e.get("type") == "scorers" for e in sample.get("events") or [])


def _error(error: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Inspect's EvalError (`message` is the exception's repr) as a v1 error."""
    if not error:
        return None
    message = str(error.get("message") or "")
    named = _EXCEPTION.match(message)
    if named:
        kind = named.group(1).rsplit(".", 1)[-1]
    else:
        last = str(error.get("traceback") or "").strip().rsplit("\n", 1)[-1]
        kind = last.split(":", 1)[0].rsplit(".", 1)[-1] if ":" in last else "UnknownError"
    return {"type": kind, "message": message}


def _usage(model_usage: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    if not model_usage:
        return None
    usages = list(model_usage.values())
    costs = [u["total_cost"] for u in usages if u.get("total_cost") is not None]
    return {
        "input_tokens": sum(int(u.get("input_tokens") or 0) for u in usages),
        "output_tokens": sum(int(u.get("output_tokens") or 0) for u in usages),
        "cost_usd": math.fsum(costs) if costs else None,
    }
