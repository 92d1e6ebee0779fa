"""Malformed Kafka messages for the fault-injection suite, deterministic by seed.

Each kind is one way a bad message reaches the events topic: a producer bug, a text encoding
mix-up, a binary file sent by mistake, a client of a newer contract, a hostile sender (nesting
past any parser's depth, lone surrogates, NUL bytes, a key given twice, every field of every
type with a value of the wrong type: `tests.faults.wrong_types`). `Poison.reason` is the
dead-letter reason code the worker must give it (its `evalstream.reason` header). The codes
are not guesses: each was found by running the kind through `events.codec.decode` and
`worker.runtime.processor.Processor`, and `tests/faults/test_poison.py` checks them still hold.
None is "internal-error": bad input is the sender's fault.

Apart from its one fault each message looks valid: the envelope names the target run,
`event_id` is unique (`poison:<kind>:<index>`), and the message is keyed by the run (except the
key kinds). Trial ids are fresh (`poison-<index>`), so a poison the worker wrongly applied would
add an attempt and change the run's summary, which is what the suite looks for.

State-dependent kinds (`STATEFUL`): "second-run-started" is a valid `run.started` with an
`event_id` of its own, refused ("refused") only because the run has already started. Sent
before the real `run.started`, it is applied and becomes the run's declaration, and the real
one is dead-lettered instead. The caller must deliver these after the run's valid
`run.started`. Every other kind is dead-lettered whatever the state of its run.

Kinds that are Kafka's alone (`NOT_A_LINE`): those whose fault is the message key (a file has
no keys: their value is a valid event) and the empty value (an empty line is no event). Kinds
that are a file's alone (`NOT_A_MESSAGE`): a 10 MB line, past what the events topic takes.
`line(poison)` is a poison as a line of a JSONL log.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, cast

import orjson
from pydantic import BaseModel

from events.codec import MAX_EVENT_BYTES, encode
from events.models import INT_LIMIT
from tests import builders
from tests.faults.wrong_types import FIELDS, Event, WrongType, given

TASK_ID: Final = "task-00000"
"""The task the poisons name: the first task of an `events.synthetic` run, so that a poison
looks like it belongs to the run it is aimed at."""

OVERSIZED_BYTES: Final = MAX_EVENT_BYTES + 1
"""Just over the decoder's limit, and well under the events topic's `max.message.bytes`
(MAX_EVENT_BYTES + 1024), so the broker accepts it and the worker has to dead-letter it."""

NESTING_DEPTH: Final = 10_000
"""Arrays nested this deep in an output value: far past any parser's recursion limit."""

DEEP_OBJECTS: Final = 3_000
"""Objects nested this deep: past Python's recursion limit in msgspec (~1,000), which it meets
skipping a value it does not read."""

TEN_MEGABYTES: Final = 10 * 2**20

GIANT_DIGITS: Final = 5_000
"""Digits of the "giant-integer" kind: more than Python's default int-to-string limit (4,300)."""


@dataclass(frozen=True, slots=True)
class Poison:
    """One malformed message and what the worker must do with it.

    `reason` is the dead-letter reason code (`evalstream.reason` header) the worker gives it.
    """

    kind: str
    key: bytes | None
    value: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class _Target:
    """What a kind's builder needs: the run, a unique event id, a fresh trial id, a seeded rng."""

    run_id: str
    event_id: str
    trial_id: str
    rng: random.Random

    @property
    def key(self) -> bytes:
        return self.run_id.encode()


_RAW: Final = "@@poison-raw@@"
"""Placeholder for a literal JSON cannot be made to hold (NaN, a 5,000-digit number)."""


def _wire(event: BaseModel) -> dict[str, Any]:
    """A valid event as an editable JSON object: built by `tests.builders`, as the contract encodes it."""
    return cast(dict[str, Any], orjson.loads(encode(event)))


def _trial(target: _Target) -> dict[str, Any]:
    return _wire(builders.trial(TASK_ID, target.trial_id, run_id=target.run_id, event_id=target.event_id))


def _score(target: _Target) -> dict[str, Any]:
    return _wire(
        builders.score(
            TASK_ID, target.trial_id, "reward", {"score": 0.5}, run_id=target.run_id, event_id=target.event_id
        )
    )


def _started(target: _Target) -> dict[str, Any]:
    task = builders.task_spec(TASK_ID, {"reward.score": "continuous"})
    return _wire(builders.started(target.run_id, [task], event_id=target.event_id))


def _score_value(target: _Target, literal: bytes) -> bytes:
    """A score whose one output value is `literal`, spliced in as raw JSON text."""
    body = _score(target)
    body["outputs"][0]["value"] = _RAW
    return orjson.dumps(body).replace(orjson.dumps(_RAW), literal)


def _without(body: dict[str, Any], field: str) -> dict[str, Any]:
    return {name: value for name, value in body.items() if name != field}


def _truncated_json(target: _Target) -> tuple[bytes | None, bytes]:
    value = orjson.dumps(_score(target))
    return target.key, value[: len(value) // 2]


def _binary_garbage(target: _Target) -> tuple[bytes | None, bytes]:
    # A PNG signature first, so no seed can make the bytes start like JSON.
    return target.key, b"\x89PNG\r\n\x1a\n" + target.rng.randbytes(248)


def _non_utf8(target: _Target) -> tuple[bytes | None, bytes]:
    # A producer that encoded its text as Latin-1: "é" is the lone byte 0xE9.
    body = {**_trial(target), "status": "failed", "error": {"type": "UnicodeError", "message": "café"}}
    return target.key, orjson.dumps(body).replace("é".encode(), "é".encode("latin-1"))


def _wrong_type(target: _Target) -> tuple[bytes | None, bytes]:
    # outputs as a name -> value map instead of a list of {"name", "value"}.
    return target.key, orjson.dumps({**_score(target), "outputs": {"score": 0.5}})


def _missing_field(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps(_without(_score(target), "metric_type"))


def _missing_type(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps(_without(_trial(target), "type"))


def _unknown_type(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "type": "trial.started"})


def _schema_version_2(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "schema_version": 2})


def _boolean_schema_version(target: _Target) -> tuple[bytes | None, bytes]:
    # `true` == 1 in Python: a lax check would let it through.
    return target.key, orjson.dumps({**_trial(target), "schema_version": True})


def _unknown_field(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "duration_s": 12.5})


def _string_number(target: _Target) -> tuple[bytes | None, bytes]:
    # Validation is strict: "1200" is not 1200.
    return target.key, orjson.dumps({**_trial(target), "usage": {"input_tokens": "1200"}})


def _bad_timestamp(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "occurred_at": "2026-11-30 12:00:00"})


def _failed_with_outputs(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_score(target), "status": "failed", "failure": "trial"})


def _key_mismatch(target: _Target) -> tuple[bytes | None, bytes]:
    return (target.run_id + ".other").encode(), orjson.dumps(_trial(target))


def _empty_key(target: _Target) -> tuple[bytes | None, bytes]:
    return b"", orjson.dumps(_trial(target))


def _null_key(target: _Target) -> tuple[bytes | None, bytes]:
    return None, orjson.dumps(_trial(target))


def _oversized(target: _Target) -> tuple[bytes | None, bytes]:
    # Valid but for its size: a failed trial whose error message is padded to the byte.
    body = {**_trial(target), "status": "failed", "error": {"type": "Log", "message": ""}}
    padding = OVERSIZED_BYTES - len(orjson.dumps(body))
    body["error"]["message"] = "x" * padding
    value = orjson.dumps(body)
    assert len(value) == OVERSIZED_BYTES
    return target.key, value


def _second_run_started(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps(_started(target))


def _non_finite_number(target: _Target) -> tuple[bytes | None, bytes]:
    # A bare NaN literal (Python's json.dumps writes one); the contract wants the string "NaN".
    return target.key, _score_value(target, b"NaN")


def _huge_number(target: _Target) -> tuple[bytes | None, bytes]:
    # The smallest integer that does not fit in 64 bits (signed).
    return target.key, _score_value(target, str(INT_LIMIT).encode())


def _giant_integer(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, _score_value(target, b"9" * GIANT_DIGITS)


def _deep_nesting(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, _score_value(target, b"[" * NESTING_DEPTH + b"]" * NESTING_DEPTH)


def _not_an_object(target: _Target) -> tuple[bytes | None, bytes]:
    # A batch in one message: a JSON array of events.
    return target.key, orjson.dumps([_trial(target)])


def _empty_value(target: _Target) -> tuple[bytes | None, bytes]:
    # What a tombstone (null value) becomes in `worker.runtime.app`.
    return target.key, b""


def _utf8_bom(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, b"\xef\xbb\xbf" + orjson.dumps(_trial(target))


def _deep_objects(target: _Target) -> tuple[bytes | None, bytes]:
    # Before "type": a reader looking for the tag skips it, recursing all the way down.
    nested = b'{"a":' * DEEP_OBJECTS + b"1" + b"}" * DEEP_OBJECTS
    return target.key, b'{"nested":' + nested + b"," + orjson.dumps(_trial(target))[1:]


def _deep_arrays(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, b"[" * DEEP_OBJECTS + orjson.dumps(_trial(target)) + b"]" * DEEP_OBJECTS


def _utf16(target: _Target) -> tuple[bytes | None, bytes]:
    # A producer on Windows: UTF-16 with its byte order mark.
    return target.key, orjson.dumps(_trial(target)).decode().encode("utf-16")


def _lone_surrogate(target: _Target) -> tuple[bytes | None, bytes]:
    # Half of a UTF-16 pair, escaped: valid JSON syntax, no Unicode text.
    return target.key, orjson.dumps(_trial(target)).replace(b'"poison-', b'"\\ud83dpoison-', 1)


def _surrogate_bytes(target: _Target) -> tuple[bytes | None, bytes]:
    # The same half written as UTF-8 would write it (CESU-8, "WTF-8"): not UTF-8.
    return target.key, orjson.dumps(_trial(target)).replace(b'"poison-', b'"\xed\xa0\xbdpoison-', 1)


def _nul_byte(target: _Target) -> tuple[bytes | None, bytes]:
    # A C string's terminator inside a JSON string, unescaped.
    return target.key, orjson.dumps(_trial(target)).replace(b'"poison-', b'"\x00poison-', 1)


def _infinity_literal(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, _score_value(target, b"-Infinity")


def _duplicate_key(target: _Target) -> tuple[bytes | None, bytes]:
    # "status" twice: the last one counts (as pydantic reads JSON), and it is wrong.
    return target.key, orjson.dumps(_trial(target))[:-1] + b',"status":"running"}'


def _ten_megabytes(target: _Target) -> tuple[bytes | None, bytes]:
    body = {**_trial(target), "status": "failed", "error": {"type": "Log", "message": ""}}
    body["error"]["message"] = "x" * (TEN_MEGABYTES - len(orjson.dumps(body)))
    return target.key, orjson.dumps(body)


def _full(target: _Target, event: Event) -> dict[str, Any]:
    """A valid event of type `event` with every field it can have given, nested ones too."""
    at = {"occurred_at": "2026-11-30T12:00:00Z"}
    if event == "trial.finished":
        usage = {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.5}
        return {
            **_trial(target),
            **at,
            "status": "failed",
            "error": {"type": "Timeout", "message": "m"},
            "usage": usage,
        }
    if event == "score.emitted":
        return {**_score(target), **at, "error": {"type": "Warning", "message": "m"}}
    if event == "run.closed":
        return _wire(builders.closed(target.run_id, "cancelled", event_id=target.event_id))
    signal = {"metric": "reward", "output": "score", "weight": 1.0}
    view = {"name": "mean", "reducer": "mean", "signals": [signal]}
    task = builders.task_spec(TASK_ID, {"reward.score": "continuous"}, [view])
    return _wire(
        builders.started(
            target.run_id, [task], event_id=target.event_id, attempts_per_task=5, labels={"s": "x"}, harbor_rules="0.25"
        )
    )


def _wrongly_typed(wrong: WrongType) -> Callable[[_Target], tuple[bytes | None, bytes]]:
    def build(target: _Target) -> tuple[bytes | None, bytes]:
        return target.key, orjson.dumps(given(_full(target, wrong.event), wrong))

    return build


_KINDS: Final[dict[str, tuple[Callable[[_Target], tuple[bytes | None, bytes]], str]]] = {
    "truncated-json": (_truncated_json, "not-json"),
    "binary-garbage": (_binary_garbage, "not-json"),
    "non-utf8": (_non_utf8, "not-json"),
    "wrong-type": (_wrong_type, "invalid-field"),
    "missing-field": (_missing_field, "missing-field"),
    "unknown-type": (_unknown_type, "unknown-type"),
    "schema-version-2": (_schema_version_2, "schema-version"),
    "unknown-field": (_unknown_field, "unknown-field"),
    "key-mismatch": (_key_mismatch, "key-mismatch"),
    "empty-key": (_empty_key, "key-mismatch"),
    "oversized": (_oversized, "oversized"),
    "second-run-started": (_second_run_started, "refused"),
    "non-finite-number": (_non_finite_number, "invalid-field"),
    "huge-number": (_huge_number, "invalid-field"),
    "deep-nesting": (_deep_nesting, "not-json"),
    "not-an-object": (_not_an_object, "not-object"),
    "empty-value": (_empty_value, "not-json"),
    "null-key": (_null_key, "key-mismatch"),
    "missing-type": (_missing_type, "missing-field"),
    "boolean-schema-version": (_boolean_schema_version, "schema-version"),
    "string-number": (_string_number, "invalid-field"),
    "bad-timestamp": (_bad_timestamp, "invalid-field"),
    "failed-with-outputs": (_failed_with_outputs, "invalid-field"),
    "giant-integer": (_giant_integer, "not-json"),
    "utf8-bom": (_utf8_bom, "not-json"),
    "deep-objects": (_deep_objects, "not-json"),
    "deep-arrays": (_deep_arrays, "not-json"),
    "utf-16": (_utf16, "not-json"),
    "lone-surrogate": (_lone_surrogate, "not-json"),
    "surrogate-bytes": (_surrogate_bytes, "not-json"),
    "nul-byte": (_nul_byte, "not-json"),
    "infinity-literal": (_infinity_literal, "invalid-field"),
    "duplicate-key": (_duplicate_key, "invalid-field"),
    "ten-megabytes": (_ten_megabytes, "oversized"),
    **{wrong.kind: (_wrongly_typed(wrong), wrong.reason) for wrong in FIELDS},
}
"""kind -> (builder, reason code), codes as observed (see the module docstring)."""

KINDS: Final = tuple(_KINDS)

STATEFUL: Final = frozenset({"second-run-started"})
"""Kinds dead-lettered only if delivered after the run's valid `run.started`."""

NOT_A_LINE: Final = frozenset({"key-mismatch", "empty-key", "null-key", "empty-value"})
"""Kinds of Kafka's alone: a log's lines have no keys, and an empty line is no event."""

NOT_A_MESSAGE: Final = frozenset({"ten-megabytes"})
"""Kinds of a file's alone: past the events topic's `max.message.bytes`, the broker refuses them."""


def poison(kind: str, run_id: str, index: int) -> Poison:
    """One message of `kind` aimed at `run_id`; `index` makes its event id unique and seeds its bytes."""
    build, reason = _KINDS[kind]
    target = _Target(run_id, f"poison:{kind}:{index}", f"poison-{index}", random.Random(f"{run_id}:{kind}:{index}"))
    key, value = build(target)
    return Poison(kind, key, value, reason)


def line(poison: Poison) -> bytes:
    """`poison` as one line of a JSONL log: its value, a newline in it (random bytes) a space."""
    return poison.value.replace(b"\n", b" ")


def poisons(run_id: str, count: int, seed: int) -> list[Poison]:
    """`count` poisons for `run_id`: KINDS in a seeded shuffle, reshuffled each round, so every
    kind appears once `count >= len(KINDS)`. Indices (and so event ids) are 0..count-1.
    Deliver the `STATEFUL` ones after the run's valid `run.started`."""
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < count:
        round_ = list(KINDS)
        rng.shuffle(round_)
        order.extend(round_)
    return [poison(kind, run_id, index) for index, kind in enumerate(order[:count])]
