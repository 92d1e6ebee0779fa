"""A NeMo evaluator SDK agent-eval bundle (nemo-platform 0.6, `AgentEvalResult.persist`) as
one run's event log. A NeMo Evaluator 0.3 (`nel`) output directory, which has no
`tasks.jsonl`, is read by `events.importers.nel` instead.

The bundle is a directory: `tasks.jsonl` (one `AgentEvalTask` a line: its metrics'
`outputs` with a `value_schema` name, and its `views`), `trials.jsonl` (one
`AgentEvalTrial` a line), `scores.jsonl` (one `AgentEvalTaskScore` a line: one metric on
one trial), and `summary.json` with `run.json` and `metadata.json` beside them. They are
read with plain JSON; every line is checked before the first event is handed out, so a
broken bundle gives an error (file, line, what to do) and no partial log.

The log: `run.started` (the tasks in bundle order, labels from `metadata.json`), one
`trial.finished` per trial in `trials.jsonl` order (the order the runner returned them,
the nearest a bundle has to the order they ended), one `score.emitted` per score in
`scores.jsonl` order (the order the SDK aggregated them in, so metric figures add up in
the same order), and `run.closed` (completed: a bundle is a finished run).

Mapping choices (where neither the SDK nor EVENTS.md decides):
- value schema -> kind: `ContinuousScore` continuous, `DiscreteScore` discrete,
  `BooleanValue` boolean, `Label` label, any other schema (a pydantic model) model.
- view reducer `weighted_mean` -> `weighted`; a signal without a weight weighs 1.0.
- a trial failed when its status is `failed` or it carries an `error` (an errored
  Harbor trial is `partial` so that the SDK still scores it); its error is `error.type`
  / `error.message`, else the `error_type` / `error` its metadata names (the SDK's
  callable and online runners put them there). A `partial` trial without an error ran
  and is `completed`.
- a `failed` score is `failure: trial` when a diagnostic says `trial_status: failed`
  (the SDK's own `is_trial_failure`), else `failure: metric`; its error is the first
  error-severity diagnostic (type from `details.exception_type`).
- an output value that is an object or a list (a model-schema output) becomes null: it
  was carried but is no number, which is how the SDK counts it.
- dead trials (not with `as_recorded`): a completed or partial score of a trial that did
  not complete (`partial` or `failed`) whose diagnostics say an output was `absent` did
  not measure that output: the SDK's Harbor metric writes 0.0 for a missing primary
  reward. Such outputs are dropped; a score left with none is `failed`, `failure:
  trial`: Harbor's own stats count that trial as ungraded and as a failed attempt.
- event ids: `nemo:<bundle run id>:trial:<trial id>`, `nemo:score:<score id>` (the
  SDK's score id names run, task, trial and metric), `...:started`, `...:closed`; an id
  the bundle repeats gets `:#2`, `:#3`, ... in file order, so that both are kept.
- run id: `run.json`'s `run_id`, else the scores' `run_id`, else the directory's name.
- a bundle made from a Harbor job (`metadata.json`'s `target.name` "harbor") declares
  `harbor_rules` "0.25": the SDK records no reward validity (Harbor 0.26's), so its trials
  are read as Harbor 0.25 reads them, every graded reward counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from events.codec import from_object
from events.importers import nel
from events.importers.source import ImportOptions, SourceError, event_id, json_lines, json_value
from events.models import InputEvent, TaskSpec

BUNDLE_FILES = ("tasks.jsonl", "trials.jsonl", "scores.jsonl")
"""What the importer reads; `run.json` and `metadata.json` are read when present."""

KINDS = {"ContinuousScore": "continuous", "DiscreteScore": "discrete", "BooleanValue": "boolean", "Label": "label"}
"""The SDK's value schema names -> EVENTS.md kinds; any other schema is a `model`."""
REDUCERS = {"weighted_mean": "weighted"}
"""The SDK's view reducers whose EVENTS.md name differs."""

SCORE_STATUSES = ("completed", "partial", "failed")
TRIAL_STATUS_DETAIL = "trial_status"
"""The diagnostic detail the SDK stamps on the scores of a failed trial."""
ABSENT = "absent"
"""The reason a diagnostic gives for an output nothing emitted."""

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Line:
    """One JSON object of a bundle file, and where it came from (for error messages)."""

    where: str
    row: Row


def read(path: Path, options: ImportOptions) -> Iterator[InputEvent]:
    """The bundle at `path` as a v1 event log, in log order (see the module docstring); a
    NeMo Evaluator 0.3 (`nel`) output directory is read by `events.importers.nel`."""
    if not path.is_dir():
        raise SourceError(
            f"{path}: no such directory; pass the directory a NeMo evaluator run was persisted to "
            f"(the one holding {', '.join(BUNDLE_FILES)} and summary.json), or a `nel eval run` output directory"
        )
    if not (path / BUNDLE_FILES[0]).exists() and nel.is_nel(path):
        yield from nel.read(path, options)
        return
    tasks, trials, scores = (list(_jsonl(path / name)) for name in BUNDLE_FILES)
    bundle_run = _bundle_run_id(path, scores)
    ids = _Ids()
    started: Row = {
        "type": "run.started",
        "event_id": event_id("nemo", bundle_run, "started"),
        "tasks": [_task(line) for line in tasks],
        "labels": _labels(path),
    }
    if _runner(path) == "harbor":
        started["harbor_rules"] = "0.25"
    bodies: list[tuple[str, Row]] = [(str(path / "tasks.jsonl"), started)]
    unfinished: dict[tuple[str, str], bool] = {}
    for line in trials:
        body = _trial(line)
        unfinished.setdefault((body["task_id"], body["trial_id"]), line.row.get("status") != "completed")
        body["event_id"] = ids.unique(event_id("nemo", bundle_run, "trial", body["trial_id"]))
        bodies.append((line.where, body))
    for line in scores:
        body = _score(line, as_recorded=options.as_recorded, unfinished=unfinished)
        body["event_id"] = ids.unique(event_id("nemo", "score", _text(line, "id")))
        bodies.append((line.where, body))
    bodies.append((str(path), {"type": "run.closed", "event_id": event_id("nemo", bundle_run, "closed")}))
    run_id = options.run_id or bundle_run
    # Every event is validated before the first is handed out: no partial log from a broken bundle.
    yield from [_event(where, body, run_id) for where, body in bodies]


class _Ids:
    """Event ids, made unique in file order when the bundle repeats a trial or score id."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def unique(self, base: str) -> str:
        count = self.seen[base] = self.seen.get(base, 0) + 1
        return base if count == 1 else event_id(base, f"#{count}")


def _event(where: str, body: Row, run_id: str) -> InputEvent:
    try:
        return from_object({"schema_version": 1, "run_id": run_id, **body})
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        # loc starts with the union tags: the event type, then a score's status.
        path = [str(part) for part in problem["loc"][1:] if part not in SCORE_STATUSES]
        field = ".".join(path) or "event"
        raise SourceError(
            f"{where}: cannot become a {body['type']} event ({field}: {problem['msg']}); "
            "fix that line or persist the run again with the NeMo evaluator SDK"
        ) from None


def _jsonl(file: Path) -> Iterator[Line]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError(
            f"{file}: missing; a NeMo evaluator bundle holds {', '.join(BUNDLE_FILES)} and summary.json "
            "(written by AgentEvalResult.persist), a `nel eval run` output directory its benchmarks' results.jsonl "
            "and eval-*.json: point at one of those"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(f"{file}: cannot be read ({error}); check the file and its permissions") from None
    for where, row in json_lines(
        text.splitlines(), file, "each line of a bundle file is one JSON object: repair or remove that line"
    ):
        yield Line(where, row)


def _text(line: Line, field: str) -> str:
    value = line.row.get(field)
    if not isinstance(value, str) or not value:
        raise SourceError(f"{line.where}: field {field!r} must be a non-empty string, got {value!r}")
    return value


def _json_object(file: Path) -> Row:
    """A bundle's optional JSON object file (`run.json`, `metadata.json`); {} when absent."""
    try:
        value = json_value(file.read_text(encoding="utf-8"), str(file))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SourceError(f"{file}: cannot be read as JSON ({error}); repair it or remove it") from None
    if not isinstance(value, dict):
        raise SourceError(f"{file}: must hold one JSON object")
    return value


def _bundle_run_id(path: Path, scores: list[Line]) -> str:
    recorded = _json_object(path / "run.json").get("run_id")
    if isinstance(recorded, str) and recorded:
        return recorded
    for line in scores:
        if isinstance(run := line.row.get("run_id"), str) and run:
            return run
    return path.resolve().name


def _runner(path: Path) -> str | None:
    """The name of the runner the bundle's metadata.json names (`target.name`: "harbor" for
    a bundle made from a Harbor job)."""
    target = _json_object(path / "metadata.json").get("target")
    name = target.get("name") if isinstance(target, Mapping) else None
    return name if isinstance(name, str) else None


def _labels(path: Path) -> dict[str, str]:
    labels = _json_object(path / "metadata.json").get("labels") or {}
    if not isinstance(labels, Mapping):
        raise SourceError(f"{path / 'metadata.json'}: 'labels' must be an object of strings")
    return {str(key): str(value) for key, value in labels.items()}


def _objects(line: Line, holder: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
    """A list-of-objects field (absent or null: none), or an error naming the line."""
    items = holder.get(field) or []
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise SourceError(f"{line.where}: {field!r} must be a list of objects, got {items!r:.80}")
    return items


def _task(line: Line) -> Row:
    metrics = [
        {
            "metric_type": metric.get("type"),
            "outputs": [
                {"name": output.get("name"), "kind": KINDS.get(str(output.get("value_schema")), "model")}
                for output in _objects(line, metric, "outputs")
            ],
        }
        for metric in _objects(line, line.row, "metrics")
    ]
    declared_views = line.row.get("views") or {}
    if not isinstance(declared_views, Mapping) or not all(
        isinstance(view, Mapping) for view in declared_views.values()
    ):
        raise SourceError(f"{line.where}: 'views' must be an object of view name -> view object")
    views = [
        {
            "name": name,
            "reducer": REDUCERS.get(view.get("reducer"), view.get("reducer")),
            "signals": [
                {"metric": signal.get("metric"), "output": signal.get("output")}
                | ({} if signal.get("weight") is None else {"weight": signal["weight"]})
                for signal in _objects(line, view, "signals")
            ],
        }
        for name, view in declared_views.items()
    ]
    spec = {"task_id": _text(line, "id"), "metrics": metrics, "views": views}
    try:
        TaskSpec.model_validate(spec)
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        field = ".".join(str(part) for part in problem["loc"]) or "task"
        raise SourceError(f"{line.where}: not a task this importer can declare ({field}: {problem['msg']})") from None
    return spec


def _trial(line: Line) -> Row:
    trial = line.row
    failed = trial.get("status") == "failed" or trial.get("error") is not None
    body: Row = {
        "type": "trial.finished",
        "task_id": _text(line, "task_id"),
        "trial_id": _text(line, "id"),
        "status": "failed" if failed else "completed",
    }
    if failed and (error := _trial_error(trial)):
        body["error"] = error
    return body


def _trial_error(trial: Row) -> Row | None:
    error = trial.get("error")
    metadata = trial.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    if isinstance(error, Mapping):
        kind, message = error.get("type"), error.get("message")
    else:
        kind, message = metadata.get("error_type"), metadata.get("error")
    found = {name: value for name, value in (("type", kind), ("message", message)) if isinstance(value, str)}
    return found or None


def _details(diagnostic: Mapping[str, Any]) -> Mapping[str, Any]:
    details = diagnostic.get("details")
    return details if isinstance(details, Mapping) else {}


def _score(line: Line, *, as_recorded: bool, unfinished: Mapping[tuple[str, str], bool]) -> Row:
    score = line.row
    body: Row = {
        "type": "score.emitted",
        "task_id": _text(line, "task_id"),
        "trial_id": _text(line, "trial_id"),
        "metric_type": _text(line, "metric_type"),
        "status": score.get("status"),
    }
    diagnostics = _objects(line, score, "diagnostics")
    if score.get("status") == "failed":
        died = any(_details(item).get(TRIAL_STATUS_DETAIL) == "failed" for item in diagnostics)
        body["failure"] = "trial" if died else "metric"
        if error := _score_error(diagnostics):
            body["error"] = error
        return body
    outputs = []
    for output in _objects(line, score, "outputs"):
        value = output.get("value")
        outputs.append({"name": output.get("name"), "value": None if isinstance(value, dict | list) else value})
    if not as_recorded and unfinished.get((body["task_id"], body["trial_id"]), False):
        absent = {_details(item).get("output") for item in diagnostics if _details(item).get("reason") == ABSENT}
        outputs = [output for output in outputs if output["name"] not in absent]
        if not outputs and absent:
            return body | {"status": "failed", "failure": "trial"}
    return body | {"outputs": outputs}


def _score_error(diagnostics: list[Mapping[str, Any]]) -> Row | None:
    for diagnostic in diagnostics:
        if diagnostic.get("severity") == "error":
            found: Row = {}
            if isinstance(kind := _details(diagnostic).get("exception_type"), str):
                found["type"] = kind
            if isinstance(message := diagnostic.get("message"), str):
                found["message"] = message
            return found or None
    return None
