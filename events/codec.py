"""Bytes to events and events to bytes.

`decode` turns one wire message (a Kafka value, a JSONL line) into a validated input
event or raises `DecodeError` with a reason code and a sentence that says what was
wrong and where; `decode_output` validates an output record. `encode` is deterministic:
the same record always gives the same bytes, with non-finite floats written as "NaN",
"Infinity" and "-Infinity".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from events import fastpath
from events.compiled import COMPILED, NATIVE
from events.models import InputEvent
from events.outputs import OutputEvent

MAX_EVENT_BYTES: Final = 8 * 1024 * 1024
"""Largest accepted input message (EVENTS.md leaves it open). 8 MiB: a run.started declaring
25,000 tasks with four metrics each is about 1.2 MB, over Kafka's 1 MB default, so the
topics and clients are configured for this limit instead."""

MAX_DEPTH: Final = 201
"""Deepest nesting of arrays and objects read; deeper is refused as "not-json" (the limit of
pydantic's JSON parser, which every refusal comes from: the fast paths leave a message they
cannot parse to it). A v1 event nests 7 deep at most."""

INPUT_TYPES: Final = ("run.started", "trial.finished", "score.emitted", "run.closed")

# Field names only in pydantic's string cache: a cached value outlives its message, and
# the values of a big run.started (its task ids, its keys), made among the message's
# transient objects, kept Python's heap at the size of that message's decoding after it
# was freed (~20 MB resident after a run.started of 3,000 tasks).
_ADAPTER: TypeAdapter[InputEvent] = TypeAdapter(InputEvent, config=ConfigDict(cache_strings="keys"))
_OUTPUT_ADAPTER: TypeAdapter[OutputEvent] = TypeAdapter(Annotated[OutputEvent, Field(discriminator="type")])


def from_object(event: Any) -> InputEvent:
    """Validate an event given as Python data (a harness building events in code)."""
    return _ADAPTER.validate_python(event)


class DecodeError(ValueError):
    """A message that is not a valid v1 input event.

    `code` is a short stable token (dead-letter header, counters); `str(error)` is the
    human sentence.
    """

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def decode_in_python(raw: bytes | str) -> InputEvent:
    """`decode` in Python: the size limit, the Python fast path (`events.fastpath`), then
    pydantic's validator."""
    if len(raw) > MAX_EVENT_BYTES:
        raise DecodeError(
            "oversized",
            f"message is {len(raw)} bytes, over the {MAX_EVENT_BYTES}-byte limit; split the run or trim outputs",
        )
    event = fastpath.recognise(raw)
    return event if event is not None else validate(raw)


decode: Final[Callable[[bytes | str], InputEvent]] = (
    decode_in_python
    if NATIVE is None or COMPILED is None
    else NATIVE.Decoder(COMPILED, decode_in_python, MAX_EVENT_BYTES)
)
"""Validate one message against the v1 contract (EVENTS.md). The common valid shapes are
recognised without pydantic; everything else, every refusal included, is `validate`'s. Where
`events/native` is built, its `Decoder`: the compiled recogniser's event (`events.compiled`),
else `decode_in_python`'s, in one call from the fold."""


def validate(raw: bytes | str) -> InputEvent:
    """`decode` by pydantic's validator alone: what the fast path must agree with."""
    try:
        return _ADAPTER.validate_json(raw)
    except ValidationError as error:
        raise _explain(error) from None


def decode_output(raw: bytes | str) -> OutputEvent:
    """One `run.summary` or `run.progress` record (what the worker publishes and replay
    prints), validated; raises pydantic's `ValidationError`."""
    return _OUTPUT_ADAPTER.validate_json(raw)


def output_problem(error: ValidationError) -> str:
    """The first thing wrong with an output record, and where in it, as a sentence."""
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"field {where!r}: {first['msg']}" if where else first["msg"]


def encode(record: BaseModel) -> bytes:
    """Deterministic compact JSON of any evalstream record: `model_dump_json()`'s, as bytes
    straight from pydantic's serializer (that method decodes them to a str, which this would
    encode back: two copies, a third of the time for a run.started)."""
    return record.__pydantic_serializer__.to_json(record)


def encode_payload(payload: Mapping[str, Any]) -> bytes:
    """Deterministic compact JSON of a JSON-ready output payload (non-finite floats already
    spelled as strings, as `projections.assembly.summary` builds them); key order is kept."""
    return orjson.dumps(payload)


def _explain(error: ValidationError) -> DecodeError:
    problems = error.errors(include_url=False)
    first = problems[0]
    kind = first["type"]
    if kind == "json_invalid":
        detail = first["ctx"]["error"]
        if detail.startswith("recursion limit exceeded"):
            return DecodeError(
                "not-json", f"nested too deep: arrays and objects more than {MAX_DEPTH} levels deep ({detail})"
            )
        return DecodeError("not-json", f"not valid JSON: {detail}")
    if kind.endswith("_type") and not first["loc"]:  # the message itself; a field's object is a field's
        return DecodeError("not-object", "a message must be one JSON object")
    if kind == "union_tag_not_found" and first["loc"] == ():
        return DecodeError("missing-field", f'missing "type"; expected one of {", ".join(INPUT_TYPES)}')
    if kind == "union_tag_invalid" and first["loc"] == ():
        tag = first["ctx"]["tag"]
        return DecodeError("unknown-type", f"unknown type {tag!r}; expected one of {', '.join(INPUT_TYPES)}")
    for problem in problems:
        if problem["loc"][-1:] == ("schema_version",):
            return DecodeError(
                "schema-version",
                f"unsupported schema_version {problem['input']!r}: this worker reads version 1 only",
            )
    return DecodeError(_code(kind), "; ".join(_describe(p) for p in problems[:5]))


def _code(kind: str) -> str:
    if kind == "extra_forbidden":
        return "unknown-field"
    if kind == "missing":
        return "missing-field"
    return "invalid-field"


_SCORE_SHAPES = ("completed", "partial", "failed")

_MESSAGES = {
    ("failure", "none_required"): '"failure" is only allowed when status is failed',
    ("failure", "missing"): 'a failed score needs "failure": "trial" or "metric"',
    ("outputs", "too_long"): "a failed score has no outputs; send them with status completed or partial",
}


def _describe(problem: Any) -> str:
    # loc starts with the union tag (the event type, then a score's status); the rest is the field path.
    event_type, *path = problem["loc"] or ("event",)
    if event_type == "score.emitted" and path and path[0] in _SCORE_SHAPES:
        path = path[1:]
    if problem["type"] == "union_tag_invalid":
        return f"{event_type}: field 'status': {problem['msg']}"
    if problem["type"] == "union_tag_not_found":
        return f"{event_type}: field 'status': Field required"
    message = _MESSAGES.get((path[0] if path else "", problem["type"])) or problem["msg"].removeprefix("Value error, ")
    if not path:
        return f"{event_type}: {message}"
    where = ".".join(str(part) for part in path)
    if problem["type"] == "extra_forbidden":
        return f"{event_type}: unknown field {where!r} (fields are closed so that a typo cannot drop data)"
    return f"{event_type}: field {where!r}: {message}"
