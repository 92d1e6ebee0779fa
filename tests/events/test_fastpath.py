"""The fast paths agree with pydantic: what they accept, pydantic accepts with equal fields,
and every message they leave alone gets pydantic's code and sentence. Every test runs on the
Python fast path (`events.fastpath`) and on the recogniser compiled from Rust
(`events.compiled`), which must be built. The compiled one takes run.started too, which the
Python fast path leaves to pydantic."""

from __future__ import annotations

import copy
import json
import math
import struct
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from events import compiled, fastpath
from events.codec import DecodeError, decode, encode, validate
from events.compiled import Recognise
from events.models import MOMENT, Envelope, RunClosed, RunStarted, ScoreMeasured, TrialFinished
from events.synthetic import interleave, synthetic_run
from events.timestamps import epoch_seconds
from tests.native import native
from tests.projections.examples import EXAMPLE_LOG


@pytest.fixture(scope="module", params=["python", "compiled"])
def recognise(request: pytest.FixtureRequest) -> Recognise:
    return fastpath.recognise if request.param == "python" else built()


def built() -> Recognise:
    """The compiled recogniser (the cases only it takes, run.started, call it directly)."""
    native()  # fails the test where the module is not built
    assert compiled.COMPILED is not None  # made whenever the module is there
    return compiled.COMPILED


def takes_started(recognise: Recognise) -> bool:
    return recognise is compiled.COMPILED


TRICKY: tuple[Any, ...] = (
    None, True, False, 0, 1, -1, 2, 1.0, 0.0, -0.0, 0.5, 1e19, -1e19, 1e308, 5e-324,
    2**53 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**70, -(2**70),
    "NaN", "Infinity", "-Infinity", "nan", "", "x", "completed", "failed", "trial",
    [], {}, [1], {"a": 1}, {"name": "n", "value": 1},
)  # fmt: skip
"""JSON values at the edges of the rules: bool against int, int against float, 64 bits, the
non-finite strings, empty strings, the wrong containers."""

json_values = st.one_of(
    st.sampled_from(TRICKY),
    st.integers(),
    st.integers(2**63 - 2, 2**64 + 2),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
)


def mostly(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`valid` nine times in ten: most messages are refused for one reason at most."""
    return st.integers(1, 10).flatmap(lambda roll: invalid if roll == 5 else valid)


names = mostly(
    st.one_of(
        st.sampled_from(["t", "score", "é", "😀" * 256, "x" * 256, 'a\\b"c\u2028', "\ud800"]),
        st.text(min_size=1, max_size=3),
    ),
    st.sampled_from(["😀" * 257, "x" * 257, ""]),
)
ids = mostly(
    st.one_of(st.sampled_from(["e-1", "x" * 128, "r" * 256]), st.text(min_size=1, max_size=3)),
    st.sampled_from(["x" * 129, "r" * 257, ""]),
)
timestamps = mostly(
    st.sampled_from(
        [
            "2026-11-30T12:00:00Z",
            "2026-11-30T12:00:00.5+01:00",
            "2026-11-30t12:00:00.123456789z",
            "2016-12-31T23:59:60Z",  # a leap second: valid, read as the next second
        ]
    ),
    st.sampled_from(
        [
            "2026-11-30T12:00:00",
            "2026-02-30T12:00:00Z",
            "2026-11-30T24:00:00Z",
            "\u0662\u0660\u0662\u0666-11-30T12:00:00Z",
            "yesterday",
            "",
        ]
    ),
)


def optional(draw: st.DrawFn, body: dict[str, Any], key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        body[key] = draw(st.one_of(strategy, st.none()))


@st.composite
def envelopes(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schema_version": draw(mostly(st.just(1), st.sampled_from([2, 1.0, True, "1"]))),
        "type": kind,
        "event_id": draw(ids),
        "run_id": draw(ids),
    }
    optional(draw, body, "occurred_at", timestamps)
    return body


def errors() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {}, optional={"type": st.one_of(names, st.none()), "message": st.one_of(names, st.none())}
    )


@st.composite
def scores(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(envelopes("score.emitted"))
    body |= {"task_id": draw(names), "trial_id": draw(names), "metric_type": draw(names)}
    body["status"] = draw(mostly(st.sampled_from(["completed", "partial", "failed"]), st.just("done")))
    if body["status"] == "failed" or draw(mostly(st.just(False), st.just(True))):
        body["failure"] = draw(mostly(st.sampled_from(["trial", "metric"]), st.sampled_from(["other", None])))
    outputs = st.lists(
        st.fixed_dictionaries({"name": st.sampled_from(["score", "pass", "a", ""]), "value": json_values}), max_size=3
    )
    if draw(st.booleans()):
        body["outputs"] = [] if body["status"] == "failed" and draw(st.booleans()) else draw(outputs)
    optional(draw, body, "error", errors())
    return body


@st.composite
def trials(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(envelopes("trial.finished"))
    body |= {"task_id": draw(names), "trial_id": draw(names)}
    body["status"] = draw(mostly(st.sampled_from(["completed", "failed"]), st.just("partial")))
    optional(draw, body, "error", errors())
    usage_value = st.one_of(json_values, st.integers(0, 10**6), st.floats(0, 10))
    usage = st.fixed_dictionaries(
        {}, optional=dict.fromkeys(("input_tokens", "output_tokens", "cost_usd"), usage_value)
    )
    optional(draw, body, "usage", usage)
    return body


@st.composite
def closes(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(envelopes("run.closed"))
    if draw(st.booleans()):
        body["reason"] = draw(
            mostly(st.sampled_from(["completed", "cancelled", "failed"]), st.sampled_from(["x", None]))
        )
    return body


@st.composite
def starts(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(envelopes("run.started"))
    small = st.sampled_from(["reward", "score", "pass", "q"])
    spec = st.fixed_dictionaries({"name": small, "kind": st.sampled_from(["continuous", "boolean", "label", "bad"])})
    metric = st.fixed_dictionaries({"metric_type": small, "outputs": st.lists(spec, max_size=2)})
    signal = st.fixed_dictionaries(
        {"metric": small, "output": small}, optional={"weight": st.one_of(json_values, st.floats(-2, 2))}
    )
    reducers = st.sampled_from(["single", "all", "any", "mean", "weighted", "max"])
    view = st.fixed_dictionaries({"name": small, "reducer": reducers, "signals": st.lists(signal, max_size=2)})
    task = st.fixed_dictionaries(
        {"task_id": st.sampled_from(["t0", "t1", "t2"])},
        optional={"metrics": st.lists(metric, max_size=2), "views": st.lists(view, max_size=2)},
    )
    body["tasks"] = draw(st.lists(task, max_size=3))
    optional(draw, body, "attempts_per_task", st.sampled_from([0, 1, 5, 10**6, 10**6 + 1, True, 2.0]))
    optional(draw, body, "harbor_rules", st.sampled_from(["0.26", "0.25", None, "0.24", "", 0.26, ["0.25"]]))
    if draw(st.booleans()):
        body["labels"] = draw(
            st.dictionaries(st.text(max_size=3), st.one_of(st.text(max_size=3), json_values), max_size=3)
        )
    return body


def places(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a parsed message, the message itself first."""
    found: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((node, key))
            found.extend(places(value))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.append((node, index))
            found.extend(places(value))
    return found


ADDED_NAMES = [
    "extra",
    "Type",
    "value",
    "name",
    "outputs",
    "metric_type",
    "failure",
    "usage",
    "reason",
    "task_id",
    "trial_id",
    "status",
    "error",
    "tasks",
]


@st.composite
def mutated(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any]:
    """`body` with up to two fields dropped, replaced by an edge value, or joined by an unknown
    one or another type's."""
    body = copy.deepcopy(body)  # its values may be TRICKY's own lists and dicts: never change those
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        container, key = draw(st.sampled_from(places(body)))
        action = draw(st.sampled_from(["drop", "replace", "add"]))
        if action == "drop":
            del container[key]
        elif action == "replace":
            container[key] = copy.deepcopy(draw(json_values))
        elif isinstance(container, dict):
            # Unknown names, and the fields of the other event types: the compiled recogniser
            # reads every type's fields into one shape and must refuse those a type lacks.
            name = draw(st.sampled_from(ADDED_NAMES))
            container[name] = copy.deepcopy(draw(json_values))
    return body


events = st.one_of(scores(), scores(), trials(), closes(), starts())


@st.composite
def messages(draw: st.DrawFn, mutate: bool = True, duplicate: bool = True) -> bytes | str:
    """A message as a producer might write it: any key order, ASCII-escaped or raw UTF-8,
    integers past 64 bits, spaces; maybe a top-level key given a second time; as bytes
    (a lone surrogate written as such: not UTF-8) or as a str."""
    body = draw(events)
    if mutate:
        body = draw(mutated(body))
    keys = list(body)
    order = draw(st.permutations(keys)) if keys else []
    text = json.dumps({key: body[key] for key in order}, ensure_ascii=draw(st.booleans()), separators=(",", ":"))
    if duplicate and keys and draw(mostly(st.just(False), st.just(True))):
        again = draw(st.sampled_from(keys))
        text = (
            text[:-1] + f",{json.dumps(again)}:{json.dumps(draw(st.one_of(json_values, st.just(body[again]))))}" + "}"
        )
    if draw(st.booleans()):
        text = f" {text} \n"
    return text if draw(st.booleans()) else text.encode(errors="surrogatepass")


def bits(value: Any) -> Any:
    return struct.pack("<d", value) if type(value) is float else value


def assert_same(fast: Any, slow: Any, where: str = "event") -> None:
    """Equal type, value (floats to the bit), fields given and field order, recursively; an
    event's moment (`events.models.MOMENT`) too, which every path keeps on what it decodes."""
    assert type(fast) is type(slow), where
    if isinstance(slow, Envelope):
        assert bits(getattr(fast, MOMENT)) == bits(getattr(slow, MOMENT)), where
    if isinstance(slow, BaseModel):
        assert list(fast.__dict__) == list(slow.__dict__), where
        assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__, where
        assert fast.__pydantic_extra__ == slow.__pydantic_extra__, where
        assert fast.__pydantic_private__ == slow.__pydantic_private__, where
        for name, value in slow.__dict__.items():
            assert_same(fast.__dict__[name], value, f"{where}.{name}")
    elif isinstance(slow, list):
        assert len(fast) == len(slow), where
        for index, (one, other) in enumerate(zip(fast, slow, strict=True)):
            assert_same(one, other, f"{where}[{index}]")
    elif isinstance(slow, dict):
        assert list(fast.items()) == list(slow.items()), where
    else:
        assert bits(fast) == bits(slow), where


def outcome(raw: bytes | str) -> tuple[str, str] | None:
    """pydantic's refusal (code, sentence), or None when it accepts."""
    try:
        validate(raw)
    except DecodeError as refused:
        return refused.code, refused.detail
    return None


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_the_fast_path_accepts_only_what_pydantic_accepts_and_builds_the_same_event(
    recognise: Recognise, raw: bytes | str
) -> None:
    fast = recognise(raw)
    refused = outcome(raw)
    if refused is not None:
        assert fast is None
        with pytest.raises(DecodeError) as decoded:
            decode(raw)
        assert (decoded.value.code, decoded.value.detail) == refused
        return
    slow = validate(raw)
    if fast is not None:
        assert_same(fast, slow)
        assert encode(fast) == encode(slow)
        assert repr(fast) == repr(slow)
    assert_same(decode(raw), slow)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages(duplicate=False))
def test_every_valid_message_of_the_types_it_takes_without_a_repeated_key_takes_the_fast_path(
    recognise: Recognise, raw: bytes | str
) -> None:
    started = ('"run.started"' in raw) if isinstance(raw, str) else (b'"run.started"' in raw)
    if outcome(raw) is None and (takes_started(recognise) or not started):
        assert recognise(raw) is not None


def test_the_models_built_are_frozen(recognise: Recognise) -> None:
    event = recognise(next(orjson.dumps(e) for e in synthetic_run("r", tasks=1) if e["type"] == "score.emitted"))
    assert event is not None
    with pytest.raises(Exception, match="frozen"):
        event.run_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize("source", ["synthetic", "examples"])
def test_the_logs_decode_on_the_fast_path_to_what_pydantic_gives(recognise: Recognise, source: str) -> None:
    if source == "examples":
        lines = [line for line in EXAMPLE_LOG.read_bytes().splitlines() if line.strip()]
    else:
        runs = [synthetic_run(f"r{i}", tasks=3, attempts=3, seed=i) for i in range(3)]
        lines = [orjson.dumps(event) for event in interleave(runs)]
    taken = 0
    for line in lines:
        if outcome(line) is None and (takes_started(recognise) or orjson.loads(line)["type"] != "run.started"):
            fast = recognise(line)
            assert fast is not None, line
            assert_same(fast, validate(line))
            taken += 1
        else:
            assert recognise(line) is None
    assert taken > len(lines) // 2


def test_a_non_finite_string_is_read_as_the_float(recognise: Recognise) -> None:
    raw = (
        b'{"schema_version":1,"type":"score.emitted","event_id":"e","run_id":"r","task_id":"t","trial_id":"x",'
        b'"metric_type":"m","status":"completed","outputs":[{"name":"a","value":"-Infinity"},{"name":"b","value":"NaN"}]}'
    )
    fast = recognise(raw)
    assert isinstance(fast, ScoreMeasured)
    assert [output.value for output in fast.outputs] == [-math.inf, pytest.approx(math.nan, nan_ok=True)]


ENVELOPE = {"schema_version": 1, "event_id": "e", "run_id": "r", "occurred_at": "2026-11-30T12:00:00Z"}
VALID: dict[str, tuple[type[BaseModel], dict[str, Any]]] = {
    "score.emitted": (
        ScoreMeasured,
        {"task_id": "t", "trial_id": "x", "metric_type": "m", "status": "completed", "outputs": []},
    ),
    "trial.finished": (TrialFinished, {"task_id": "t", "trial_id": "x", "status": "completed"}),
    "run.closed": (RunClosed, {"reason": "completed"}),
}
EVERY_FIELD = {
    "task_id": "t",
    "trial_id": "x",
    "metric_type": "m",
    "status": "completed",
    "failure": "trial",
    "outputs": [],
    "error": {"type": "E"},
    "usage": {"input_tokens": 1},
    "reason": "completed",
    "attempts_per_task": 1,
    "tasks": [],
    "labels": {},
}
"""A valid value of every field some input type has."""


@pytest.mark.parametrize("kind", sorted(VALID))
def test_a_field_of_another_type_is_left_to_pydantic(recognise: Recognise, kind: str) -> None:
    model, fields = VALID[kind]
    body = {**ENVELOPE, "type": kind, **fields}
    assert recognise(orjson.dumps(body)) is not None
    for name, value in EVERY_FIELD.items():
        if name not in model.model_fields:
            raw = orjson.dumps({**body, name: value})
            assert outcome(raw) is not None, name
            assert recognise(raw) is None, name


SCORE = {**ENVELOPE, "type": "score.emitted", **VALID["score.emitted"][1]}


@pytest.mark.parametrize(
    "at",
    [
        "2026-11-30T12:00:00Z",
        "2026-11-30t12:00:00.5+05:30",
        "2026-11-30T12:00:59.9999999Z",  # past six digits of fraction: read by events.timestamps
        "2016-12-31T23:59:60Z",  # a leap second: the same
        None,
        "absent",
    ],
)
def test_the_event_carries_the_moment_its_timestamp_was_read_as(recognise: Recognise, at: str | None) -> None:
    """Decoding keeps the moment on the event (`events.models.MOMENT`), where the fold reads
    it rather than parse the text a second time; pydantic's path keeps it too."""
    expected = None if at in (None, "absent") else epoch_seconds(at)
    kinds = [*VALID, "run.started"] if takes_started(recognise) else list(VALID)
    for kind in kinds:
        body = STARTED if kind == "run.started" else {**ENVELOPE, "type": kind, **VALID[kind][1]}
        body = {key: value for key, value in body.items() if key != "occurred_at" or at != "absent"}
        if at != "absent":
            body["occurred_at"] = at
        raw = orjson.dumps(body)
        for event in (recognise(raw), validate(raw), decode(raw)):
            assert event is not None, kind
            assert bits(getattr(event, MOMENT)) == bits(expected), kind
            copy = event.model_copy()  # built without validation: it carries none
            assert not hasattr(copy, MOMENT)
            assert copy == event  # the moment is no part of equality
            assert encode(copy) == encode(event)  # nor of the wire


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "failed", "failure": "trial", "outputs": [{"name": "a", "value": 1}]},
        {"status": "failed"},
        {"status": "failed", "failure": None},
        {"status": "completed", "failure": "trial"},
        {"outputs": [{"name": "a", "value": 1}, {"name": "a", "value": 2}]},
        {"outputs": None},
        {"outputs": [{"name": "a", "value": 2**63}]},
        {"outputs": [{"name": "a", "value": 1, "extra": 1}]},
        {"task_id": "x" * 257},
        {"event_id": ""},
        {"schema_version": 2},
    ],
)
def test_a_score_the_rules_refuse_is_left_to_pydantic(recognise: Recognise, changes: dict[str, Any]) -> None:
    raw = orjson.dumps({**SCORE, **changes})
    assert outcome(raw) is not None
    assert recognise(raw) is None


SIGNAL: dict[str, Any] = {"metric": "m", "output": "a", "weight": 2.0}
VIEW: dict[str, Any] = {"name": "v", "reducer": "weighted", "signals": [SIGNAL]}
METRIC: dict[str, Any] = {"metric_type": "m", "outputs": [{"name": "a", "kind": "continuous"}]}
TASK: dict[str, Any] = {"task_id": "t", "metrics": [METRIC], "views": [VIEW]}
STARTED: dict[str, Any] = {
    **ENVELOPE,
    "type": "run.started",
    "attempts_per_task": 3,
    "labels": {"suite": "s"},
    "tasks": [TASK],
}


def with_task(**changes: Any) -> dict[str, Any]:
    return {**STARTED, "tasks": [{**TASK, **changes}]}


def with_signal(**changes: Any) -> dict[str, Any]:
    return with_task(views=[{**VIEW, "signals": [{**SIGNAL, **changes}]}])


def test_a_name_read_again_is_the_same_string_and_every_name_stays_right_past_the_table() -> None:
    """The compiled recogniser hands out a name it read last time as the same str object (the
    fold's lookups then compare one pointer); names past its table's slots, colliding and
    displacing each other, and names too long for it, still decode to what pydantic gives."""
    recognise = built()

    def score(number: int, task_id: str) -> bytes:
        return orjson.dumps({**SCORE, "event_id": f"e{number}", "task_id": task_id, "run_id": "run-a"})

    first, again = recognise(score(0, "task-a")), recognise(score(1, "task-a"))
    assert isinstance(first, ScoreMeasured)
    assert isinstance(again, ScoreMeasured)
    assert again.task_id is first.task_id
    assert again.run_id is first.run_id
    names = [f"task-{number:05d}" for number in range(20_000)] + [f"{'long-' * 40}{number}" for number in range(50)]
    for number, name in enumerate([*names, *reversed(names)]):
        raw = score(number, name)
        fast = recognise(raw)
        assert fast is not None
        assert_same(fast, validate(raw))


def test_a_valid_run_started_is_built_as_pydantic_builds_it() -> None:
    for body in (STARTED, {**ENVELOPE, "type": "run.started", "tasks": []}, with_task(metrics=[], views=[])):
        raw = orjson.dumps(body)
        fast = built()(raw)
        assert fast is not None
        assert_same(fast, validate(raw))
        assert encode(fast) == encode(validate(raw))


@pytest.mark.parametrize("rules", ["0.26", "0.25", None])
def test_a_run_started_naming_its_harbor_rules_is_built_as_pydantic_builds_it(rules: str | None) -> None:
    raw = orjson.dumps({**STARTED, "harbor_rules": rules})
    fast = built()(raw)
    assert isinstance(fast, RunStarted)
    assert fast.harbor_rules == rules
    assert_same(fast, validate(raw))
    assert encode(fast) == encode(validate(raw))


def test_a_run_started_with_another_types_field_is_left_to_pydantic() -> None:
    for name, value in EVERY_FIELD.items():
        if name not in STARTED:
            raw = orjson.dumps({**STARTED, name: value})
            assert outcome(raw) is not None, name
            assert built()(raw) is None, name


@pytest.mark.parametrize(
    "body",
    [
        {**STARTED, "tasks": [TASK, TASK]},
        with_task(metrics=[METRIC, METRIC]),
        with_task(views=[VIEW, VIEW]),
        with_task(metrics=[{"metric_type": "m", "outputs": [{"name": "a", "kind": "boolean"}] * 2}]),
        with_task(metrics=[{"metric_type": "m", "outputs": [{"name": "a", "kind": "bad"}]}]),
        with_task(metrics=[{"metric_type": "m", "outputs": [{"name": "a", "kind": "label", "extra": 1}]}]),
        with_task(metrics=None),
        with_task(views=None),
        with_task(task_id=""),
        with_task(task_id="x" * 257),
        with_task(extra=1),
        with_task(views=[{"name": "v", "reducer": "max", "signals": []}]),
        with_signal(weight=True),
        with_signal(weight="NaN"),
        with_signal(weight=None),
        with_signal(output=""),
        {**STARTED, "attempts_per_task": 0},
        {**STARTED, "attempts_per_task": 10**6 + 1},
        {**STARTED, "attempts_per_task": 2.0},
        {**STARTED, "attempts_per_task": True},
        {**STARTED, "harbor_rules": "0.24"},
        {**STARTED, "harbor_rules": " 0.26"},
        {**STARTED, "harbor_rules": 0.26},
        {**STARTED, "harbor_rules": True},
        {**STARTED, "labels": None},
        {**STARTED, "labels": {"a": 1}},
        {**STARTED, "tasks": None},
        {**STARTED, "schema_version": 2},
    ],
)
def test_a_run_started_the_rules_refuse_is_left_to_pydantic(body: dict[str, Any]) -> None:
    raw = orjson.dumps(body)
    assert outcome(raw) is not None
    assert built()(raw) is None


def test_a_label_given_twice_is_left_to_pydantic() -> None:
    raw = orjson.dumps(STARTED).replace(b'"labels":{"suite":"s"}', b'"labels":{"suite":"s","suite":"t"}')
    assert outcome(raw) is None
    assert built()(raw) is None


@pytest.mark.parametrize(
    "number", ["-0", "0", "3", "-0.0", "1e2", "2.5E-3", "1180591620717411303424", "-9223372036854775809"]
)
def test_an_integer_or_float_for_a_float_field_is_read_as_pydantic_reads_it(recognise: Recognise, number: str) -> None:
    """Written as JSON writers other than Python's do (`-0`, integers past 64 bits): a float
    field reads an integer as Python's float() of it, and -0 is the integer 0."""
    weight = orjson.dumps(with_signal(weight=0.125)).replace(b"0.125", number.encode())
    cost = (
        b'{"schema_version":1,"type":"trial.finished","event_id":"e","run_id":"r","task_id":"t","trial_id":"x",'
        b'"status":"completed","usage":{"cost_usd":' + number.encode() + b"}}"
    )
    for raw in (weight, cost) if takes_started(recognise) else (cost,):
        slow = None if outcome(raw) is not None else validate(raw)
        fast = recognise(raw)
        if slow is None:
            assert fast is None
        else:
            assert fast is not None, raw
            assert_same(fast, slow)


def as_array(record: dict[str, Any]) -> list[Any]:
    """A record as the array of its values in order: what serde's derived readers also take."""
    return list(record.values())


TRIAL_USED = {**ENVELOPE, "type": "trial.finished", **VALID["trial.finished"][1], "status": "failed"}


@pytest.mark.parametrize(
    "body",
    [
        {**TRIAL_USED, "usage": [1, 2, 0.5]},
        {**TRIAL_USED, "usage": []},
        {**TRIAL_USED, "error": ["E", "message"]},
        {**SCORE, "outputs": [["a", 1]]},
        as_array(TRIAL_USED),
        as_array(SCORE),
        as_array({**ENVELOPE, "type": "run.closed", "reason": "completed"}),
        as_array(STARTED),
        {**STARTED, "tasks": [as_array(TASK)]},
        with_task(metrics=[as_array(METRIC)]),
        with_task(metrics=[{"metric_type": "m", "outputs": [["a", "continuous"]]}]),
        with_task(views=[as_array(VIEW)]),
        with_task(views=[{**VIEW, "signals": [as_array(SIGNAL)]}]),
    ],
)
def test_a_record_given_as_an_array_of_its_values_is_left_to_pydantic(
    recognise: Recognise, body: dict[str, Any] | list[Any]
) -> None:
    """The models take an object where a record goes, never an array of its fields in order."""
    raw = orjson.dumps(body)
    assert outcome(raw) is not None
    assert recognise(raw) is None
