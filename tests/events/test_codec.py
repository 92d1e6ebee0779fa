"""The v1 contract at the boundary: what decode accepts, what it refuses and why."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from events import fastpath
from events.codec import MAX_DEPTH, MAX_EVENT_BYTES, DecodeError, decode, decode_in_python, encode, validate
from events.models import RunClosed, ScoreEmitted
from tests.native import native

SCORE = {
    "schema_version": 1,
    "type": "score.emitted",
    "event_id": "e-3",
    "run_id": "run-7",
    "task_id": "nda",
    "trial_id": "nda__w5",
    "metric_type": "reward",
    "status": "completed",
    "outputs": [{"name": "score", "value": 1.0}],
}


def raw(**changes: object) -> bytes:
    body = {**SCORE, **changes}
    return orjson.dumps({key: value for key, value in body.items() if value is not ...})


def test_the_spec_examples_decode() -> None:
    started = decode(
        b'{"schema_version": 1, "type": "run.started", "event_id": "e-1", "run_id": "run-7", "attempts_per_task": 3,'
        b' "labels": {"benchmark": "contracts-v2"}, "tasks": [{"task_id": "nda", "metrics": [{"metric_type": "reward",'
        b' "outputs": [{"name": "score", "kind": "continuous"}]}], "views": [{"name": "quality", "reducer": "weighted",'
        b' "signals": [{"metric": "reward", "output": "score", "weight": 2.0}]}]}]}'
    )
    assert started.type == "run.started"
    trial = decode(
        b'{"schema_version": 1, "type": "trial.finished", "event_id": "e-2", "run_id": "run-7", "task_id": "nda",'
        b' "trial_id": "nda__p2", "status": "failed", "error": {"type": "SandboxTimeout", "message": "x"},'
        b' "usage": {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.02}}'
    )
    assert trial.type == "trial.finished"
    closed = decode(b'{"schema_version": 1, "type": "run.closed", "event_id": "e-99", "run_id": "run-7"}')
    assert isinstance(closed, RunClosed)
    assert closed.reason == "completed"


@pytest.mark.parametrize(
    ("wire", "expected"), [('"NaN"', math.nan), ('"Infinity"', math.inf), ('"-Infinity"', -math.inf)]
)
def test_non_finite_strings_decode_to_floats_and_encode_back(wire: str, expected: float) -> None:
    event = decode(raw(outputs=[{"name": "score", "value": orjson.loads(wire)}]))
    assert isinstance(event, ScoreEmitted)
    value = event.outputs[0].value
    assert isinstance(value, float)
    assert (math.isnan(value) and math.isnan(expected)) or value == expected
    assert f'"value":{wire}'.encode() in encode(event)


@pytest.mark.parametrize("value", [True, 3, 0.25, "yes", None])
def test_output_values_keep_their_json_type(value: object) -> None:
    event = decode(raw(outputs=[{"name": "score", "value": value}]))
    assert isinstance(event, ScoreEmitted)
    assert type(event.outputs[0].value) is type(value)


def test_encoding_is_deterministic_and_round_trips() -> None:
    wire = raw(occurred_at="2026-11-30T12:00:00.5+01:00", error={"type": "JudgeTimeout"})
    event = decode(wire)
    assert encode(event) == encode(decode(encode(event)))
    assert orjson.loads(encode(event)) == orjson.loads(wire)


@pytest.mark.parametrize(
    ("message", "code", "says"),
    [
        (b'{"schema_version": 1, "type": "run.clo', "not-json", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not-json", "not valid JSON"),
        (b"[1, 2]", "not-object", "one JSON object"),
        (b'"run.closed"', "not-object", "one JSON object"),
        (raw(type="run.paused"), "unknown-type", "unknown type 'run.paused'"),
        (raw(type=...), "missing-field", 'missing "type"'),
        (raw(schema_version=2), "schema-version", "unsupported schema_version 2"),
        (raw(schema_version=True), "schema-version", "unsupported schema_version True"),
        (raw(schema_version="1"), "schema-version", "unsupported schema_version '1'"),
        (raw(scroe=1), "unknown-field", "unknown field 'scroe'"),
        (raw(task_id=...), "missing-field", "field 'task_id'"),
        (raw(task_id=7), "invalid-field", "field 'task_id'"),
        (raw(event_id=""), "invalid-field", "field 'event_id'"),
        (raw(event_id="x" * 129), "invalid-field", "field 'event_id'"),
        (raw(run_id="r" * 257), "invalid-field", "field 'run_id'"),
        (raw(status="failed", outputs=[]), "missing-field", 'needs "failure"'),
        (raw(status="done"), "invalid-field", "field 'status'"),
        (raw(status=...), "invalid-field", "field 'status': Field required"),
        (raw(failure="trial"), "invalid-field", '"failure" is only allowed when status is failed'),
        (raw(status="failed", failure="trial"), "invalid-field", "a failed score has no outputs"),
        (raw(outputs=[{"name": "s", "value": [1]}]), "invalid-field", "must be a number, boolean, string or null"),
        (raw(outputs=[{"name": "s", "value": 1}, {"name": "s", "value": 2}]), "invalid-field", "appears twice"),
        (
            b'{"schema_version":1,"type":"score.emitted","event_id":"e","run_id":"r","task_id":"t","trial_id":"x",'
            b'"metric_type":"m","status":"completed","outputs":[{"name":"s","value":1e400}]}',
            "invalid-field",
            "out of range",
        ),
        (raw(outputs=[{"name": "s", "value": 7}]).replace(b"7", str(2**70).encode()), "invalid-field", "64 bits"),
        (raw(occurred_at="yesterday"), "invalid-field", "RFC 3339"),
        (raw(occurred_at="2026-11-30T12:00:00"), "invalid-field", "RFC 3339"),
        (b"[" * 5000 + b"]" * 5000, "not-json", "nested too deep"),
        (
            b'{"schema_version":1,"type":"run.started","event_id":"e","run_id":"r","tasks":[],"labels":"suite"}',
            "invalid-field",
            "run.started: field 'labels': Input should be an object",
        ),
        (raw(outputs=[["s", 1.0]]), "invalid-field", "field 'outputs.0': Input should be an object"),
    ],
)
def test_bad_messages_are_refused_with_a_reason(message: bytes, code: str, says: str) -> None:
    with pytest.raises(DecodeError) as refused:
        decode(message)
    assert refused.value.code == code
    assert says in str(refused.value)


def nested_objects(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def nested_arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


DEEP = 3_000
"""Past msgspec's recursion limit (~1,000) as well as pydantic's parser's."""


@pytest.mark.parametrize(
    "message",
    [
        nested_objects(DEEP),
        nested_arrays(DEEP),
        b'{"extra":' + nested_objects(DEEP) + b"," + raw()[1:],  # before "type": msgspec skips it
        raw()[:-1] + b',"extra":' + nested_objects(DEEP) + b"}",
        raw(outputs=[{"name": "s", "value": 7}]).replace(b"7", nested_arrays(DEEP)),
        raw(status="failed", failure="trial", outputs=...)[:-1] + b',"error":' + nested_objects(DEEP) + b"}",
        nested_objects(DEEP).decode(),
    ],
)
def test_a_message_nested_too_deep_is_not_json_on_every_path(message: bytes | str) -> None:
    """However deep, wherever the nesting is: the sender's fault, said as such, never a
    RecursionError (msgspec raises one where it skips a deep value)."""
    assert fastpath.recognise(message) is None
    for decoder in (decode, decode_in_python, validate):
        with pytest.raises(DecodeError) as refused:
            decoder(message)
        assert refused.value.code == "not-json"
        assert f"nested too deep: arrays and objects more than {MAX_DEPTH} levels deep" in str(refused.value)


def test_the_depth_limit_is_max_depth() -> None:
    with pytest.raises(DecodeError, match="one JSON object"):
        decode(nested_arrays(MAX_DEPTH))
    with pytest.raises(DecodeError, match="nested too deep"):
        decode(nested_arrays(MAX_DEPTH + 1))


def test_non_finite_numbers_are_refused_where_none_are_allowed() -> None:
    with pytest.raises(DecodeError, match="weight"):
        decode(
            b'{"schema_version":1,"type":"run.started","event_id":"e","run_id":"r","tasks":[{"task_id":"t",'
            b'"views":[{"name":"v","reducer":"mean","signals":[{"metric":"m","output":"o","weight":"NaN"}]}]}]}'
        )


def test_an_oversized_message_is_refused_before_parsing() -> None:
    message = raw(task_id="t" * 10) + b" " * MAX_EVENT_BYTES
    with pytest.raises(DecodeError) as refused:
        decode(message)
    assert refused.value.code == "oversized"


def outcome(decoder: Callable[[bytes | str], object], message: bytes | str) -> object:
    try:
        return decoder(message)
    except DecodeError as refused:
        return (refused.code, str(refused))


@pytest.mark.parametrize(
    "message",
    [
        raw(),  # the compiled recogniser's
        raw().decode(),  # as a str
        b'{"type": "score.emitted", ' + raw()[1:],  # a key given twice: the Python path's
        raw(outputs=[]),  # no outputs: refused by pydantic
        raw(status="unknown"),
        b"not json",
        raw(task_id="t" * 10) + b" " * MAX_EVENT_BYTES,  # oversized, with the recogniser's shape
        raw().decode() + " " * (MAX_EVENT_BYTES - len(raw()) + 1),  # oversized by the str's length
    ],
)
def test_the_compiled_decoder_hands_what_it_does_not_take_to_the_python_decode(message: bytes | str) -> None:
    """`decode` is events/native's `Decoder` where built, and decodes or refuses every
    message as `decode_in_python` does."""
    assert isinstance(decode, native().Decoder)
    assert outcome(decode, message) == outcome(decode_in_python, message)


def test_run_started_refuses_duplicate_task_ids() -> None:
    with pytest.raises(DecodeError, match="task_id 't' appears twice"):
        decode(
            b'{"schema_version":1,"type":"run.started","event_id":"e","run_id":"r","tasks":[{"task_id":"t"},{"task_id":"t"}]}'
        )


@pytest.mark.parametrize(
    ("task", "says"),
    [
        (
            {"task_id": "t", "metrics": [{"metric_type": "m", "outputs": [{"name": "s", "kind": "continuous"}] * 2}]},
            "metric 'm': output 's' appears twice",
        ),
        (
            {"task_id": "t", "metrics": [{"metric_type": "m", "outputs": []}] * 2},
            "task 't': metric_type 'm' appears twice",
        ),
        (
            {"task_id": "t", "views": [{"name": "v", "reducer": "mean", "signals": []}] * 2},
            "task 't': view 'v' appears twice",
        ),
    ],
)
def test_run_started_refuses_a_name_given_twice_in_a_task_spec_and_says_which(task: dict[str, Any], says: str) -> None:
    message = {"schema_version": 1, "type": "run.started", "event_id": "e", "run_id": "r", "tasks": [task]}
    with pytest.raises(DecodeError, match=re.escape(says)) as refused:
        decode(orjson.dumps(message))
    assert refused.value.code == "invalid-field"
