"""The v1 input events as pydantic models (EVENTS.md, "Input events").

Every model refuses unknown fields and is frozen: a decoded event is a record handed
out, never edited. Validation is strict (no "1" for 1), except that output values and
the fields EVENTS.md lets be non-finite accept the strings "NaN", "Infinity" and
"-Infinity" and read them as floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, model_validator

from events.nonfinite import NONFINITE_STRINGS
from events.timestamps import epoch_seconds, rfc3339

EVENT_ID_MAX = 128
RUN_ID_MAX = 256
NAME_MAX = 256
"""Bound for task ids, trial ids, metric types and output names (EVENTS.md is silent; chosen)."""


INT_LIMIT = 2**63
"""Integers on the wire must fit in 64 bits: larger ones are refused, not rounded."""


def _output_value(value: object, info: ValidationInfo) -> object:
    kind = type(value)
    if kind is str:
        return NONFINITE_STRINGS.get(value, value)  # type: ignore[call-overload]
    # From JSON a non-finite float can only be a literal that overflowed (1e400); from
    # Python code (a harness) math.nan is the way to say NaN.
    if kind is float and info.mode == "json" and not math.isfinite(value):  # type: ignore[arg-type]
        raise ValueError('number out of range; write non-finite values as "NaN", "Infinity" or "-Infinity"')
    if kind is int and not -INT_LIMIT <= value < INT_LIMIT:  # type: ignore[operator]
        raise ValueError("integer does not fit in 64 bits")
    if kind in (list, dict):
        raise ValueError("must be a number, boolean, string or null")
    return value


EventId = Annotated[str, Field(min_length=1, max_length=EVENT_ID_MAX)]
RunId = Annotated[str, Field(min_length=1, max_length=RUN_ID_MAX)]
Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX)]
Timestamp = Annotated[str, AfterValidator(rfc3339)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
OutputValue = Annotated[bool | int | float | str | None, BeforeValidator(_output_value)]
"""A number, a boolean, a label, null, or a non-finite number (read from its string)."""

OutputKind = Literal["continuous", "discrete", "boolean", "label", "model"]
Reducer = Literal["single", "all", "any", "mean", "weighted"]
TrialStatus = Literal["completed", "failed"]
ScoreStatus = Literal["completed", "partial", "failed"]
Failure = Literal["trial", "metric"]
CloseReason = Literal["completed", "cancelled", "failed"]
HarborRules = Literal["0.26", "0.25"]
"""Which Harbor version's arithmetic a run's `harbor` block follows (SEMANTICS.md section 6)."""
DEFAULT_HARBOR_RULES: Final[HarborRules] = "0.26"
"""The rules of a run whose run.started names none, or that has no run.started."""


MOMENT: Final = "_moment"
"""The attribute of a decoded event that holds its `occurred_at` as epoch seconds (None: no
occurred_at), for the fold: read once, where decoding checks it. An event built without
validation (`model_construct`, a copy) has none; the fold reads its timestamp then."""


def _omit_none(value: object) -> bool:
    return value is None


class Record(BaseModel):
    """Base of every wire record: strict, closed to unknown fields, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, ser_json_inf_nan="strings")


def _unique(names: list[str], what: Callable[[], str]) -> None:
    """Refuse a repeated name; `what` says what the names are, made only then (the
    validators run once per spec of a run.started: the usual case costs one set)."""
    if len(set(names)) == len(names):
        return
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what()} {name!r} appears twice; each must be unique")
        seen.add(name)


class OutputSpec(Record):
    name: Name
    kind: OutputKind


class MetricSpec(Record):
    metric_type: Name
    outputs: list[OutputSpec]

    @model_validator(mode="after")
    def _outputs_unique(self) -> MetricSpec:
        if len(self.outputs) > 1:
            _unique([o.name for o in self.outputs], lambda: f"metric {self.metric_type!r}: output")
        return self


class Signal(Record):
    metric: Name
    output: Name
    weight: FiniteFloat = 1.0


class ViewSpec(Record):
    name: Name
    reducer: Reducer
    signals: list[Signal]


class TaskSpec(Record):
    task_id: Name
    metrics: list[MetricSpec] = []
    views: list[ViewSpec] = []

    @model_validator(mode="after")
    def _names_unique(self) -> TaskSpec:
        _unique([m.metric_type for m in self.metrics], lambda: f"task {self.task_id!r}: metric_type")
        _unique([v.name for v in self.views], lambda: f"task {self.task_id!r}: view")
        return self


class ErrorInfo(Record):
    type: str | None = Field(default=None, exclude_if=_omit_none)
    message: str | None = Field(default=None, exclude_if=_omit_none)


class Usage(Record):
    input_tokens: Annotated[int, Field(ge=0, lt=INT_LIMIT)] | None = Field(default=None, exclude_if=_omit_none)
    output_tokens: Annotated[int, Field(ge=0, lt=INT_LIMIT)] | None = Field(default=None, exclude_if=_omit_none)
    cost_usd: Annotated[FiniteFloat, Field(ge=0)] | None = Field(default=None, exclude_if=_omit_none)


class Output(Record):
    name: Name
    value: OutputValue


class Envelope(Record):
    """What every input event carries. Beside its fields, an event decoded or validated carries
    the moment its `occurred_at` names, read where its timestamp was checked (`MOMENT`)."""

    # The moment, epoch seconds or None (no occurred_at), in a slot of its own rather than
    # a pydantic private attribute: those live in `__pydantic_private__`, which equality
    # compares, a copy carries past an update of `occurred_at`, and reading goes through
    # BaseModel.__getattr__. A slot is on no wire, in no equality, repr or copy (a copy reads
    # the timestamp again), and its read is a plain attribute's. Set by `events.fastpath`,
    # the compiled recogniser (`events/native`) and `_read_moment`.
    __slots__ = (MOMENT,)

    # Not Literal[1]: pydantic's literal check lets `true` pass as 1.
    schema_version: Annotated[int, Field(ge=1, le=1)]
    event_id: EventId
    run_id: RunId
    occurred_at: Timestamp | None = Field(default=None, exclude_if=_omit_none)

    @model_validator(mode="after")
    def _read_moment(self) -> Envelope:
        # pydantic's path (run.started, and what the fast paths leave to it) and events built
        # in code; the timestamp's validator saw the text alone, not the event to keep it on.
        at = self.occurred_at
        set_moment(self, None if at is None else epoch_seconds(at))
        return self


set_moment: Final[Callable[[Envelope, float | None], None]] = Envelope.__dict__[MOMENT].__set__
"""`set_moment(event, moment)`: keep the moment on the event, past the frozen `__setattr__`."""


class RunStarted(Envelope):
    type: Literal["run.started"]
    tasks: list[TaskSpec]
    attempts_per_task: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(default=None, exclude_if=_omit_none)
    labels: dict[str, str] = {}
    harbor_rules: HarborRules | None = Field(default=None, exclude_if=_omit_none)

    @model_validator(mode="after")
    def _tasks_unique(self) -> RunStarted:
        _unique([t.task_id for t in self.tasks], lambda: "task_id")
        return self


class TrialFinished(Envelope):
    type: Literal["trial.finished"]
    task_id: Name
    trial_id: Name
    status: TrialStatus
    error: ErrorInfo | None = Field(default=None, exclude_if=_omit_none)
    usage: Usage | None = Field(default=None, exclude_if=_omit_none)


class ScoreEmitted(Envelope):
    """One metric scored one trial. Decoding gives one of its two shapes, told apart by
    `status` in pydantic's core (no Python validator on the hot path):
    `ScoreMeasured` (completed/partial: outputs, no failure) and `ScoreFailed`."""

    type: Literal["score.emitted"]
    task_id: Name
    trial_id: Name
    metric_type: Name
    status: ScoreStatus
    failure: Failure | None = Field(default=None, exclude_if=_omit_none)
    outputs: list[Output] = []
    error: ErrorInfo | None = Field(default=None, exclude_if=_omit_none)


def _distinct_outputs(outputs: list[Output]) -> list[Output]:
    if len(outputs) > 1:
        _unique([output.name for output in outputs], lambda: "output")
    return outputs


class ScoreMeasured(ScoreEmitted):
    status: Literal["completed", "partial"]
    failure: None = Field(default=None, exclude_if=_omit_none)
    outputs: Annotated[list[Output], AfterValidator(_distinct_outputs)] = []


class ScoreFailed(ScoreEmitted):
    status: Literal["failed"]
    failure: Failure
    """"trial": the trial died (an attempt that did not pass); "metric": the metric broke (unmeasured)."""
    outputs: Annotated[list[Output], Field(max_length=0)] = []


Score = Annotated[ScoreMeasured | ScoreFailed, Field(discriminator="status")]


class RunClosed(Envelope):
    type: Literal["run.closed"]
    reason: CloseReason = "completed"


InputEvent = Annotated[RunStarted | TrialFinished | Score | RunClosed, Field(discriminator="type")]
"""Any v1 input event, told apart by `type`."""
