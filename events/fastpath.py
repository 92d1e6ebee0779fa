"""The common shapes of valid input events, recognised without pydantic's validator.

pydantic's validator spends ~3.5 us on a typical `score.emitted`, most of it in its unions,
the output values' Python callbacks and building the models. `recognise` parses a message
with msgspec into private shapes that carry the same bounds as `events.models` (closed to
unknown fields, strict types, string lengths, the literals, integer ranges), checks in
Python what a shape cannot say (`schema_version` 1, the timestamp, a failed score's
`failure` and empty outputs, names given twice, integers past 64 bits), and builds the same
frozen models directly (`_new`).

On anything it is not certain of it returns None and `decode` validates the message with
pydantic. So every refusal comes from the pydantic path, its code and sentence unchanged by
construction; what must hold here is only that what this accepts, pydantic accepts with
equal fields (`tests/events/test_fastpath.py`).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType
from pydantic import BaseModel

from events.models import (
    EVENT_ID_MAX,
    INT_LIMIT,
    NAME_MAX,
    RUN_ID_MAX,
    CloseReason,
    ErrorInfo,
    Failure,
    InputEvent,
    MetricSpec,
    Output,
    OutputKind,
    OutputSpec,
    Record,
    Reducer,
    RunClosed,
    RunStarted,
    ScoreFailed,
    ScoreMeasured,
    ScoreStatus,
    Signal,
    TaskSpec,
    TrialFinished,
    TrialStatus,
    Usage,
    ViewSpec,
    rfc3339,
)
from events.nonfinite import NONFINITE_STRINGS

M = TypeVar("M", bound=Record)

_EventId = Annotated[str, Meta(min_length=1, max_length=EVENT_ID_MAX)]
_RunId = Annotated[str, Meta(min_length=1, max_length=RUN_ID_MAX)]
_Name = Annotated[str, Meta(min_length=1, max_length=NAME_MAX)]
_Tokens = Annotated[int, Meta(ge=0, le=INT_LIMIT - 1)]


class _Shape(Struct, forbid_unknown_fields=True, kw_only=True, gc=False):
    """Parsed and bounded, not yet a model. UNSET: the field was not in the message."""


class _Envelope(_Shape, tag_field="type"):
    schema_version: int
    event_id: _EventId
    run_id: _RunId
    occurred_at: str | UnsetType | None = UNSET


class _Error(_Shape):
    type: str | UnsetType | None = UNSET
    message: str | UnsetType | None = UNSET


class _Usage(_Shape):
    input_tokens: _Tokens | UnsetType | None = UNSET
    output_tokens: _Tokens | UnsetType | None = UNSET
    cost_usd: Annotated[float, Meta(ge=0)] | UnsetType | None = UNSET


class _Output(_Shape):
    name: _Name
    value: bool | int | float | str | None


class _Score(_Envelope, tag="score.emitted", kw_only=True):
    task_id: _Name
    trial_id: _Name
    metric_type: _Name
    status: ScoreStatus
    failure: Failure | UnsetType | None = UNSET
    outputs: list[_Output] | UnsetType = UNSET
    error: _Error | UnsetType | None = UNSET


class _Trial(_Envelope, tag="trial.finished", kw_only=True):
    task_id: _Name
    trial_id: _Name
    status: TrialStatus
    error: _Error | UnsetType | None = UNSET
    usage: _Usage | UnsetType | None = UNSET


class _Closed(_Envelope, tag="run.closed", kw_only=True):
    reason: CloseReason | UnsetType = UNSET


class _OutputSpec(_Shape):
    name: _Name
    kind: OutputKind


class _Metric(_Shape):
    metric_type: _Name
    outputs: list[_OutputSpec]


class _Signal(_Shape):
    metric: _Name
    output: _Name
    weight: float | UnsetType = UNSET


class _View(_Shape):
    name: _Name
    reducer: Reducer
    signals: list[_Signal]


class _Task(_Shape):
    task_id: _Name
    metrics: list[_Metric] | UnsetType = UNSET
    views: list[_View] | UnsetType = UNSET


class _Started(_Envelope, tag="run.started", kw_only=True):
    tasks: list[_Task]
    attempts_per_task: Annotated[int, Meta(ge=1, le=1000000)] | UnsetType | None = UNSET
    labels: dict[str, str] | UnsetType = UNSET


_DECODER: Final = msgspec.json.Decoder(_Score | _Trial | _Started | _Closed)

_object = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__

_ENVELOPE_GIVEN: Final = frozenset({"schema_version", "type", "event_id", "run_id"})
_SCORE_GIVEN: Final = _ENVELOPE_GIVEN | {"task_id", "trial_id", "metric_type", "status"}
_TRIAL_GIVEN: Final = _ENVELOPE_GIVEN | {"task_id", "trial_id", "status"}
_OUTPUT_GIVEN: Final = frozenset({"name", "value"})


class _Unsure(Exception):
    """Raised while building: leave the message to pydantic."""


def recognise(raw: bytes | str) -> InputEvent | None:
    """The event `raw` holds, when it has a common valid shape; None: validate it with pydantic."""
    try:
        shape = _DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    at = shape.occurred_at
    if shape.schema_version != 1 or (type(at) is str and not _timestamp(at)):
        return None
    try:
        if type(shape) is _Score:
            return _score(shape)
        if type(shape) is _Trial:
            return _trial(shape)
        if type(shape) is _Closed:
            return _closed(shape)
        return _started(shape)
    except _Unsure:
        return None


def _new(cls: type[M], values: dict[str, Any], given: set[str]) -> M:
    """What pydantic's validator builds: the values in field order, the fields given, no
    extras, no private attributes (the slots set directly: half the cost of `setattr`)."""
    model = _object(cls)
    _set_dict(model, values)
    _set_fields(model, given)
    _set_extra(model, None)
    _set_private(model, None)
    return model


def _timestamp(value: str) -> bool:
    try:
        rfc3339(value)
    except ValueError:
        return False
    return True


def _envelope(shape: _Envelope, given: frozenset[str]) -> tuple[dict[str, Any], set[str]]:
    """The envelope's values in field order, and the fields given so far."""
    present = set(given)
    if shape.occurred_at is not UNSET:
        present.add("occurred_at")
    values = {
        "schema_version": 1,
        "event_id": shape.event_id,
        "run_id": shape.run_id,
        "occurred_at": None if shape.occurred_at is UNSET else shape.occurred_at,
    }
    return values, present


def _distinct(names: list[str]) -> None:
    if len(set(names)) != len(names):
        raise _Unsure


def _error(shape: _Error | UnsetType | None) -> ErrorInfo | None:
    if not shape:  # None or UNSET (a struct is always true)
        return None
    given = set()
    if shape.type is not UNSET:
        given.add("type")
    if shape.message is not UNSET:
        given.add("message")
    values = {
        "type": None if shape.type is UNSET else shape.type,
        "message": None if shape.message is UNSET else shape.message,
    }
    return _new(ErrorInfo, values, given)


def _usage(shape: _Usage | UnsetType | None) -> Usage | None:
    if not shape:
        return None
    given = {name for name in ("input_tokens", "output_tokens", "cost_usd") if getattr(shape, name) is not UNSET}
    values = {
        "input_tokens": None if shape.input_tokens is UNSET else shape.input_tokens,
        "output_tokens": None if shape.output_tokens is UNSET else shape.output_tokens,
        "cost_usd": None if shape.cost_usd is UNSET else shape.cost_usd,
    }
    return _new(Usage, values, given)


def _score(shape: _Score) -> ScoreMeasured | ScoreFailed:
    at, failure, outputs, error = shape.occurred_at, shape.failure, shape.outputs, shape.error
    given = set(_SCORE_GIVEN)
    if at is not UNSET:
        given.add("occurred_at")
    if failure is not UNSET:
        given.add("failure")
    if outputs is not UNSET:
        given.add("outputs")
    if error is not UNSET:
        given.add("error")
    cls: type[ScoreMeasured | ScoreFailed] = ScoreMeasured
    built: list[Output] = []
    if shape.status == "failed":
        if not failure or outputs:  # required; no outputs
            raise _Unsure
        cls = ScoreFailed
    elif failure:
        raise _Unsure
    elif outputs:
        for output in outputs:
            value = output.value
            if type(value) is str:
                value = NONFINITE_STRINGS.get(value, value)
            elif type(value) is int and not -INT_LIMIT <= value < INT_LIMIT:
                raise _Unsure  # msgspec keeps integers past 64 bits, pydantic refuses them
            built.append(_new(Output, {"name": output.name, "value": value}, set(_OUTPUT_GIVEN)))
        if len(built) > 1:
            _distinct([output.name for output in outputs])
    values = {
        "schema_version": 1,
        "event_id": shape.event_id,
        "run_id": shape.run_id,
        "occurred_at": None if at is UNSET else at,
        "type": "score.emitted",
        "task_id": shape.task_id,
        "trial_id": shape.trial_id,
        "metric_type": shape.metric_type,
        "status": shape.status,
        "failure": None if failure is UNSET else failure,
        "outputs": built,
        "error": _error(error) if error else None,
    }
    return _new(cls, values, given)


def _trial(shape: _Trial) -> TrialFinished:
    values, given = _envelope(shape, _TRIAL_GIVEN)
    if shape.error is not UNSET:
        given.add("error")
    if shape.usage is not UNSET:
        given.add("usage")
    values["type"] = "trial.finished"
    values["task_id"] = shape.task_id
    values["trial_id"] = shape.trial_id
    values["status"] = shape.status
    values["error"] = _error(shape.error)
    values["usage"] = _usage(shape.usage)
    return _new(TrialFinished, values, given)


def _closed(shape: _Closed) -> RunClosed:
    values, given = _envelope(shape, _ENVELOPE_GIVEN)
    if shape.reason is not UNSET:
        given.add("reason")
    values["type"] = "run.closed"
    values["reason"] = "completed" if shape.reason is UNSET else shape.reason
    return _new(RunClosed, values, given)


def _metric(shape: _Metric) -> MetricSpec:
    specs = [_new(OutputSpec, {"name": spec.name, "kind": spec.kind}, {"name", "kind"}) for spec in shape.outputs]
    _distinct([spec.name for spec in shape.outputs])
    return _new(MetricSpec, {"metric_type": shape.metric_type, "outputs": specs}, {"metric_type", "outputs"})


def _signal(shape: _Signal) -> Signal:
    given = {"metric", "output"}
    weight = 1.0
    if shape.weight is not UNSET:
        given.add("weight")
        weight = shape.weight
    return _new(Signal, {"metric": shape.metric, "output": shape.output, "weight": weight}, given)


def _view(shape: _View) -> ViewSpec:
    values = {"name": shape.name, "reducer": shape.reducer, "signals": [_signal(s) for s in shape.signals]}
    return _new(ViewSpec, values, {"name", "reducer", "signals"})


def _task(shape: _Task) -> TaskSpec:
    given = {"task_id"}
    metrics: list[MetricSpec] = []
    views: list[ViewSpec] = []
    if shape.metrics is not UNSET:
        given.add("metrics")
        metrics = [_metric(metric) for metric in shape.metrics]
        _distinct([metric.metric_type for metric in shape.metrics])
    if shape.views is not UNSET:
        given.add("views")
        views = [_view(view) for view in shape.views]
        _distinct([view.name for view in shape.views])
    return _new(TaskSpec, {"task_id": shape.task_id, "metrics": metrics, "views": views}, given)


def _started(shape: _Started) -> RunStarted:
    values, given = _envelope(shape, _ENVELOPE_GIVEN | {"tasks"})
    tasks = [_task(task) for task in shape.tasks]
    _distinct([task.task_id for task in shape.tasks])
    if shape.attempts_per_task is not UNSET:
        given.add("attempts_per_task")
    if shape.labels is not UNSET:
        given.add("labels")
    values["type"] = "run.started"
    values["tasks"] = tasks
    values["attempts_per_task"] = None if shape.attempts_per_task is UNSET else shape.attempts_per_task
    values["labels"] = {} if shape.labels is UNSET else shape.labels
    return _new(RunStarted, values, given)
