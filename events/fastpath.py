"""Valid `score.emitted`, `trial.finished` and `run.closed` events, recognised without
pydantic's validator.

pydantic's validator spends 3-4 us on a typical `score.emitted`, most of it in its nested
unions and the output values' Python callbacks. `recognise` parses a message with msgspec
into private shapes that carry the same bounds as `events.models` (closed to unknown fields,
strict types, string lengths, the literals, integer ranges), checks in Python what a shape
cannot say (`schema_version` 1, the timestamp, a failed score's `failure` and empty outputs,
output names given twice, integers past 64 bits), and builds the same frozen models directly
(`_new`), the moment its timestamp check read kept on the event (`events.models.MOMENT`), as
pydantic's path keeps it. `run.started` is left to pydantic: building its many small models in Python costs
about what pydantic takes to validate them.

On anything it is not certain of, or cannot parse, it returns None and `decode` validates
the message with pydantic. So every refusal comes from the pydantic path, its code and sentence unchanged by
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
    Output,
    Record,
    RunClosed,
    ScoreFailed,
    ScoreMeasured,
    ScoreStatus,
    TrialFinished,
    TrialStatus,
    Usage,
    set_moment,
)
from events.nonfinite import NONFINITE_STRINGS
from events.timestamps import epoch_seconds

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


_DECODER: Final = msgspec.json.Decoder(_Score | _Trial | _Closed)

_object = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__

ENVELOPE_GIVEN: Final = frozenset({"schema_version", "type", "event_id", "run_id"})
SCORE_GIVEN: Final = ENVELOPE_GIVEN | {"task_id", "trial_id", "metric_type", "status"}
TRIAL_GIVEN: Final = ENVELOPE_GIVEN | {"task_id", "trial_id", "status"}
OUTPUT_GIVEN: Final = frozenset({"name", "value"})


class _Unsure(Exception):
    """Raised while building: leave the message to pydantic."""


def recognise(raw: bytes | str) -> InputEvent | None:
    """The event `raw` holds, when it has a common valid shape; None: validate it with pydantic."""
    try:
        shape = _DECODER.decode(raw)
    # UnicodeError: a str with a lone surrogate. RecursionError: msgspec's depth limit, met
    # where it skips a value nested ~1,000 deep (pydantic's parser refuses it sooner).
    except (msgspec.DecodeError, UnicodeError, RecursionError):
        return None
    if shape.schema_version != 1:
        return None
    at = shape.occurred_at
    moment = None
    if type(at) is str:
        try:
            moment = epoch_seconds(at)
        except ValueError:
            return None
    try:
        event: ScoreMeasured | ScoreFailed | TrialFinished | RunClosed
        if type(shape) is _Score:
            event = _score(shape)
        elif type(shape) is _Trial:
            event = _trial(shape)
        else:
            event = _closed(shape)
    except _Unsure:
        return None
    set_moment(event, moment)  # read by the check above: the fold reads it here, not again
    return event


def _new(cls: type[M], values: dict[str, Any], given: set[str]) -> M:
    """What pydantic's validator builds: the values in field order, the fields given, no
    extras, no private attributes (the slots set directly: half the cost of `setattr`)."""
    model = _object(cls)
    _set_dict(model, values)
    _set_fields(model, given)
    _set_extra(model, None)
    _set_private(model, None)
    return model


def _distinct(names: list[str]) -> None:
    if len(set(names)) != len(names):
        raise _Unsure


def _error(shape: _Error) -> ErrorInfo:
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


def _usage(shape: _Usage) -> Usage:
    given = {name for name in ("input_tokens", "output_tokens", "cost_usd") if getattr(shape, name) is not UNSET}
    values = {
        "input_tokens": None if shape.input_tokens is UNSET else shape.input_tokens,
        "output_tokens": None if shape.output_tokens is UNSET else shape.output_tokens,
        "cost_usd": None if shape.cost_usd is UNSET else shape.cost_usd,
    }
    return _new(Usage, values, given)


def _score(shape: _Score) -> ScoreMeasured | ScoreFailed:
    at, failure, outputs, error = shape.occurred_at, shape.failure, shape.outputs, shape.error
    given = set(SCORE_GIVEN)
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
            built.append(_new(Output, {"name": output.name, "value": value}, set(OUTPUT_GIVEN)))
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
        "error": _error(error) if error else None,  # a struct is true, None and UNSET false
    }
    return _new(cls, values, given)


def _trial(shape: _Trial) -> TrialFinished:
    at, error, usage = shape.occurred_at, shape.error, shape.usage
    given = set(TRIAL_GIVEN)
    if at is not UNSET:
        given.add("occurred_at")
    if error is not UNSET:
        given.add("error")
    if usage is not UNSET:
        given.add("usage")
    values = {
        "schema_version": 1,
        "event_id": shape.event_id,
        "run_id": shape.run_id,
        "occurred_at": None if at is UNSET else at,
        "type": "trial.finished",
        "task_id": shape.task_id,
        "trial_id": shape.trial_id,
        "status": shape.status,
        "error": _error(error) if error else None,
        "usage": _usage(usage) if usage else None,
    }
    return _new(TrialFinished, values, given)


def _closed(shape: _Closed) -> RunClosed:
    at, reason = shape.occurred_at, shape.reason
    given = set(ENVELOPE_GIVEN)
    if at is not UNSET:
        given.add("occurred_at")
    if reason is not UNSET:
        given.add("reason")
    values = {
        "schema_version": 1,
        "event_id": shape.event_id,
        "run_id": shape.run_id,
        "occurred_at": None if at is UNSET else at,
        "type": "run.closed",
        "reason": "completed" if reason is UNSET else reason,
    }
    return _new(RunClosed, values, given)
